"""The serve lock of a ranking database: one server per database.

:class:`~sarnmt.human.app.RankingServer` holds an exclusive ``fcntl.flock`` on ``<db>.serve-lock`` (a file beside the
database, holding the server's process id) while it runs; a second one on the same database is refused. SQLite's own
locks are not used for this: they guard transactions, and holding one for the life of the server would block
``annotators add=`` and ``export``.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from sarnmt.errors import InputError


class ServeError(InputError):
    """The app cannot start: no database or no task in it, a read-only database, one served already, an unknown
    sign-in mode, an address it cannot bind."""


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".serve-lock")


def take_lock(db: Path) -> int:
    """Take the database's serve lock (module docstring). :returns: the lock file's descriptor, to hold.

    :raises ServeError: another process serves ``db``, or the lock file cannot be made."""
    path = lock_path(db)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise ServeError(f"cannot make the lock file {path}: {err.strerror}") from err
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise ServeError(
            f"{db} is served already (by process {holder}; lock {path}): two servers on one database would hand out "
            "the same items unaware of each other; stop the other serve first"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
