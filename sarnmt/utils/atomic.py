"""Files written whole or not at all: to a temporary name beside the target, flushed to disk, renamed over it.

A reader never sees a half-written file: until the rename the target is the previous version (or absent), after it
the complete new one. A write that fails (the disk is full, a quota, a read-only file system) or is interrupted
(SIGINT, SIGTERM: :func:`sarnmt.errors.reported`) removes its temporary file and leaves the target as it was; the
temporary file of a write killed with SIGKILL is removed by the next write of the same target
(:func:`remove_orphans`); a failed write raises :class:`~sarnmt.errors.WriteError`
saying so. Checkpoints (:class:`sarnmt.training.resume.AtomicCheckpointIO`), averaged checkpoints, results records, the
outputs of ``translate``, ``evaluate`` and ``score``, and the manifest of a prepared cache are written this way.

What an output path names decides how it is written (:func:`output_target`):

- a regular file, or a name that does not exist yet: the atomic write above;
- a symlink: its target is replaced atomically (the temporary file sits beside the target) and the link stays;
- a FIFO or a character device (``/dev/null``, ``/dev/stdout``, a terminal): written through, never replaced;
- a folder, a socket, a block device or a symlink loop: refused, naming it.

:func:`atomic_files` writes several outputs together (``translate``'s translations and attention file,
``evaluate``'s hypotheses and record): each is staged and fsynced, and only when every one is complete are they all
renamed, so a failure leaves none of them under its final name. :func:`check_output` and :func:`check_folder` check
an output before the work that produces it (decoding), so that a bad path is refused at once.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sarnmt.errors import InputError, WriteError

# errors of the write itself (the device), as opposed to a bug or a bad path
WRITE_FAILURES = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}
_STREAM_NAME = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/[^/]+/fd/\d+")


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


def _named(path: Path, key: str | None) -> str:
    return f"{key}={path}" if key else str(path)


def _kind(mode: int) -> str:
    return next(
        (name for test, name in ((stat.S_ISSOCK, "socket"), (stat.S_ISBLK, "block device")) if test(mode)),
        "special file",
    )


def _device_name(path: Path) -> bool:
    """``/dev/stdout``, ``/proc/self/fd/1``: names of a stream, whatever it is open on (a file opened for appending
    included), written through."""
    return _STREAM_NAME.fullmatch(str(path.absolute())) is not None


@dataclass(frozen=True)
class OutputTarget:
    """Where an output goes.  :param path: the file replaced (a symlink's target) or written through.
    :param through: written through (a FIFO, a character device), not replaced."""

    path: Path
    through: bool = False


def output_target(path: str | os.PathLike[str], key: str | None = None) -> OutputTarget:
    """How ``path`` is written (module docstring).  :param key: the setting that named it, for messages.

    :raises InputError: for a folder, a socket, a block device, a symlink loop or a parent that is a file.
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode  # follows symlinks
    except FileNotFoundError:
        mode = None
    except NotADirectoryError as err:
        raise InputError(f"{_named(path, key)}: a folder on its way is a file; give a path inside a folder") from err
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError(f"{_named(path, key)} is a symlink loop; give a file name to write to") from err
        raise
    if mode is not None and stat.S_ISDIR(mode):
        raise InputError(f"{path} is a folder; give a file name to write to")
    if mode is not None and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or _device_name(path)):
        return OutputTarget(path, through=True)
    if mode is not None and not stat.S_ISREG(mode):
        raise InputError(f"{_named(path, key)} is a {_kind(mode)}; give a file name, a FIFO or a character device")
    return OutputTarget(Path(os.path.realpath(path)) if path.is_symlink() else path)


def check_folder(folder: str | os.PathLike[str], key: str | None = None) -> None:
    """Refuse, before any work, a folder that could not be created or written to: a file under its name or on its
    way, or a nearest existing folder that is not writable.  :raises InputError: naming ``key`` and the path."""
    folder = Path(os.path.abspath(folder))
    for existing in (folder, *folder.parents):
        try:
            mode = os.stat(existing).st_mode
        except (FileNotFoundError, NotADirectoryError):  # missing, or under a file: the file is named further up
            continue
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise InputError(f"{_named(folder, key)}: {existing} is a symlink loop; give a folder") from err
            raise
        if not stat.S_ISDIR(mode):
            what = "is a file" if existing == folder else f"cannot be created: {existing} is a file"
            raise InputError(f"{_named(folder, key)} {what}; give a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise InputError(f"{_named(folder, key)}: no permission to write in {existing}")
        return


def check_output(path: str | os.PathLike[str], key: str | None = None) -> OutputTarget:
    """:func:`output_target`, and for a file replaced, :func:`check_folder` of the folder it goes into."""
    target = output_target(path, key)
    if not target.through:
        check_folder(target.path.parent, key)
    return target


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process (alive), or no pid at all
        return pid < 2**31
    return True


def remove_orphans(path: Path) -> list[Path]:
    """Remove the temporary files ``.<name>.tmp-<pid>`` beside ``path`` whose process is gone: what a write killed
    with SIGKILL (which no process can catch) left. One whose process still runs is another writer's, and kept.

    :returns: the files removed."""
    removed = []
    prefix = f".{path.name}.tmp-"
    try:
        siblings = [p for p in path.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return removed
    for sibling in siblings:
        pid = sibling.name[len(prefix) :]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            try:
                sibling.unlink()
                removed.append(sibling)
            except OSError:
                pass
    return removed


@dataclass
class _Staged:
    final: Path
    tmp: Path | None  # None: written through
    handle: IO[Any]


@dataclass
class AtomicFiles:
    """The outputs of one :func:`atomic_files` block."""

    staged: list[_Staged] = field(default_factory=list)

    def open(self, path: str | os.PathLike[str], mode: str = "wb", key: str | None = None) -> IO[Any]:
        """Open ``path`` (``"wb"`` or ``"w"``: text as UTF-8 with ``\\n`` line ends) for writing.

        :raises InputError: for what :func:`output_target` refuses, or a path already open in this block.
        """
        if mode not in ("wb", "w"):
            raise ValueError(f"atomic_open: mode must be 'wb' or 'w', got {mode!r}")
        target = output_target(path, key)
        if any(s.final == target.path for s in self.staged):
            raise InputError(f"{_named(Path(path), key)} is already written by this command; give another file")
        text = {"encoding": "utf-8", "newline": "\n"} if mode == "w" else {}
        if target.through:
            self.staged.append(_Staged(target.path, None, open(target.path, mode, **text)))
        else:
            target.path.parent.mkdir(parents=True, exist_ok=True)
            remove_orphans(target.path)
            tmp = target.path.with_name(f".{target.path.name}.tmp-{os.getpid()}")
            self.staged.append(_Staged(target.path, tmp, open(tmp, mode, **text)))
        return self.staged[-1].handle

    def _commit(self) -> None:
        for s in self.staged:
            try:
                s.handle.flush()
                if s.tmp is not None:
                    os.fsync(s.handle.fileno())
                s.handle.close()
            except OSError as err:
                if s.tmp is None:
                    raise WriteError(f"could not write {s.final}: {err.strerror or err}") from err
                if err.errno in WRITE_FAILURES:
                    raise write_failure(s.final, err) from err
                raise
        for s in self.staged:
            if s.tmp is not None:
                os.replace(s.tmp, s.final)
        for folder in {s.final.parent for s in self.staged if s.tmp is not None}:
            _fsync_dir(folder)

    def _discard(self) -> None:
        for s in self.staged:
            try:
                s.handle.close()
            except OSError:
                pass
            if s.tmp is not None:
                s.tmp.unlink(missing_ok=True)


@contextmanager
def atomic_files() -> Iterator[AtomicFiles]:
    """Several outputs written together: :meth:`AtomicFiles.open` each; when the block ends without an error every
    staged file is flushed and fsynced, then all are renamed; after an error none is (written-through ones keep
    what was written).

    :raises WriteError: when the device refuses a write (e.g. ENOSPC); every previous file is unchanged.
    """
    files = AtomicFiles()
    try:
        yield files
        files._commit()
    except Exception as err:
        refused = _device_refusal(err)
        staged = [s.final for s in files.staged if s.tmp is not None]
        if refused is not None and not isinstance(err, WriteError) and staged:
            raise write_failure(staged[0], refused) from err
        raise
    finally:
        files._discard()


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Open ``path`` for writing (``"wb"`` or ``"w"``, text as UTF-8 with ``\\n`` line ends); the file appears under
    its name only when the block ends without an error (a FIFO or character device is written through).

    :raises InputError: when ``path`` is a folder (or anything else :func:`output_target` refuses).
    :raises WriteError: when the device refuses the write (e.g. ENOSPC); the previous file is unchanged.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open: mode must be 'wb' or 'w', got {mode!r}")
    with atomic_files() as files:
        yield files.open(path, mode)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """``data`` into ``path``, atomically."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """``text`` (UTF-8) into ``path``, atomically."""
    with atomic_open(path, "w") as handle:
        handle.write(text)
