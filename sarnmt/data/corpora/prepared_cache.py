"""A prepared cache folder built once: under a lock, checked against its manifest, written under a temporary name and
renamed into place.

:func:`build_once` is the whole mechanism: several processes (DDP ranks, parallel sweep jobs) preparing the same
folder at once take an exclusive ``flock`` on ``.<folder name>.lock`` beside it; the first builds, the others wait
and then find the folder ready. A folder is only ever seen complete (its files are written into
``.tmp-<name>-<pid>`` and the folder renamed), and an existing one is used only if every file matches the size and
SHA-256 recorded in its ``manifest.json`` (:mod:`sarnmt.data.corpora.manifest`); a damaged one is removed, with a
warning
naming what was wrong, and built again.

The translation corpora (:func:`sarnmt.data.corpora.preparation.prepare_corpus`) and the language-model corpora
(:mod:`sarnmt.lm.corpus`) both prepare through it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from sarnmt.data.corpora import manifest as manifest_file
from sarnmt.errors import InputError

log = logging.getLogger(__name__)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing). The lock belongs to the open file, so two
    threads of one process wait for each other as two processes do."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def usable(folder: Path) -> bool:
    """Whether ``folder`` holds a manifest that all its files match. A damaged folder is removed (with a warning
    naming every file that does not match) so it can be built again; a missing one is simply not usable."""
    if not (folder / manifest_file.NAME).is_file():
        if folder.exists():
            log.warning("prepared cache %s has no %s; building it again", folder, manifest_file.NAME)
            shutil.rmtree(folder)
        return False
    try:
        if manifest_file.add_hashes(folder):  # a manifest written before the hashes existed gets them now
            log.info("%s: file hashes added to the manifest of a cache written before them", folder)
        manifest_file.check(folder, manifest_file.read(folder))
    except InputError as err:
        log.warning("%s; building it again", err)
        shutil.rmtree(folder)
        return False
    return True


def build_once(final: Path, build: Callable[[Path], None]) -> bool:
    """Make sure ``final`` is a complete, undamaged prepared folder.

    :param build: fills the (empty, temporary) folder it is given with every file, ``manifest.json`` last
        (:func:`sarnmt.data.corpora.manifest.write`).
    :returns: True when ``final`` was already there and usable (nothing built), False when it was built now.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    with locked(final.parent / f".{final.name}.lock"):
        if usable(final):
            return True
        tmp = final.with_name(f".tmp-{final.name}-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            build(tmp)
            if not (tmp / manifest_file.NAME).is_file():
                raise RuntimeError(f"building {final} wrote no {manifest_file.NAME}")
            tmp.rename(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return False
