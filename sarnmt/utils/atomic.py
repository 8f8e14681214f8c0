"""Files written whole or not at all: to a temporary name beside the target, flushed to disk, renamed over it.

A reader never sees a half-written file: until the rename the target is the previous version (or absent), after it
the complete new one. A write that fails (the disk is full, a quota, a read-only file system) or is interrupted
removes its temporary file and leaves the target as it was; a failed write raises :class:`~sarnmt.errors.WriteError`
saying so. Checkpoints (:class:`sarnmt.resume.AtomicCheckpointIO`), averaged checkpoints, results records, the
outputs of ``translate``, ``evaluate`` and ``score``, and the manifest of a prepared cache are written this way.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from sarnmt.errors import InputError, WriteError

# errors of the write itself (the device), as opposed to a bug or a bad path
WRITE_FAILURES = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (where the platform allows opening a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _device_refusal(err: BaseException) -> OSError | None:
    """The ``OSError`` of a refused write in ``err`` or what it was raised from: ``torch.save`` reports a full disk
    as a ``RuntimeError`` ("unexpected pos ...") raised while handling the ``OSError``."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and not isinstance(err, WriteError) and err.errno in WRITE_FAILURES:
            return err
        err = err.__cause__ or err.__context__
    return None


def write_failure(path: Path, err: OSError) -> WriteError:
    """The :class:`WriteError` of a failed write of ``path``, saying what happened and what is left."""
    left = f"the previous {path.name} is unchanged" if path.exists() else f"no {path.name} was written"
    hint = "; free some space and run again" if err.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return WriteError(f"could not write {path}: {err.strerror or err}; {left}{hint}")


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Open ``path`` for writing (``"wb"`` or ``"w"``, text as UTF-8 with ``\\n`` line ends); the file appears under
    its name only when the block ends without an error.

    :raises InputError: when ``path`` is a folder.
    :raises WriteError: when the device refuses the write (e.g. ENOSPC); the previous file is unchanged.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open: mode must be 'wb' or 'w', got {mode!r}")
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a folder; give a file name to write to")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    text = {"encoding": "utf-8", "newline": "\n"} if mode == "w" else {}
    try:
        with open(tmp, mode, **text) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except Exception as err:
        refused = _device_refusal(err)
        if refused is not None:
            raise write_failure(path, refused) from err
        raise
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """``data`` into ``path``, atomically."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """``text`` (UTF-8) into ``path``, atomically."""
    with atomic_open(path, "w") as handle:
        handle.write(text)
