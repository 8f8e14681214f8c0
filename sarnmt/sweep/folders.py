"""A job's run folder (``<runs_dir>/<job id>/``) and who owns it: ``job.json`` holds the config hash the folder's
checkpoints belong to and the code that started them (:mod:`sarnmt.sweep.code`). A folder of another hash is moved
aside as ``<job id>.stale-<hash>``, never resumed; one started by other code is refused (or moved aside as
``<job id>.other-code-<source hash>`` when the job runs again because its record came from other code); under SLURM
the DDP ranks other than 0 wait until rank 0 has claimed the folder.

One job at a time in a folder: :func:`job_lock` holds ``<runs_dir>/.locks/<job id>.lock`` (an ``flock``, which the
kernel releases however the process ends: SIGKILL, preemption, requeue) while the job runs, from claiming the folder
to writing the record. Of two sweeps of the same table started at once, the first job to take it runs the job; the
other skips it (:class:`FolderInUse`, naming the holder), and its sweep reports the cells it skipped
(:func:`lock_holder`). Training inside holds the run folder's own lock as well (:mod:`sarnmt.training.run_lock`, which
cannot be nested and covers training only); one it cannot check, left on another host by a job of this cell whose node
was lost, is removed under the cell's lock (:func:`clear_stale_run_lock`), so that the next sweep resumes the job."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sarnmt.errors import UserError
from sarnmt.sweep.code import check_resume, describe, same_code
from sarnmt.sweep.records import write_json
from sarnmt.training.run_lock import LOCK_NAME as RUN_LOCK
from sarnmt.training.run_lock import launching_process
from sarnmt.utils.json_bounds import load_file

log = logging.getLogger("sarnmt")
MARKER = "job.json"
LOCKS = ".locks"


class FolderInUse(UserError, RuntimeError):
    """Another process (a job of another sweep of the same table) runs this job now: skipped."""


def now() -> str:
    """The time in UTC, to the second, ISO 8601 (the time stamps of records and run folders)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def folder_hash(folder: Path) -> str | None:
    """The config hash ``folder`` belongs to; None when it has no readable ``job.json``."""
    try:
        return load_file(folder / MARKER)["config_hash"]
    except (OSError, ValueError, KeyError):
        return None


def folder_code(folder: Path) -> dict | None:
    """The code that started the run in ``folder`` (None: unknown, a folder from before records pinned the code)."""
    try:
        return load_file(folder / MARKER).get("code")
    except (OSError, ValueError, AttributeError):
        return None


def claim_folder(
    folder: Path, job_id: str, digest: str, code: dict | None = None, replace_other_code: bool = False
) -> None:
    """Make ``folder`` this job's, for this config hash and this ``code``; a folder of another hash is moved aside,
    one of the same hash started by other code is refused (:func:`sarnmt.sweep.code.check_resume`), or moved aside
    too when ``replace_other_code`` (the job runs again because its record came from other code)."""
    if folder.exists():
        owner = folder_hash(folder) or "unknown"
        if owner != digest:
            _move_aside(folder, f"stale-{owner}", f"holds a run of config {owner}, not {digest}")
        elif code is None:
            return
        elif replace_other_code and not same_code(started := folder_code(folder) or {}, code):
            source = started.get("source_hash") or "unpinned"
            _move_aside(folder, f"other-code-{source}", f"was started by {describe(started)}")
        else:
            check_resume(folder_code(folder), code, folder)
            return
    folder.mkdir(parents=True)
    write_json(folder / MARKER, {"job": job_id, "config_hash": digest, "created": now(), "code": code})


def rank() -> int:
    """This process's DDP rank as SLURM or torchrun gives it (0 outside both)."""
    return int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", "0")))


def _move_aside(folder: Path, suffix: str, why: str) -> None:
    aside = folder.with_name(f"{folder.name}.{suffix}")
    k = 1
    while aside.exists():
        aside, k = folder.with_name(f"{folder.name}.{suffix}-{k}"), k + 1
    log.warning("%s %s: moved to %s", folder, why, aside)
    folder.rename(aside)


def take_folder(
    folder: Path,
    job_id: str,
    digest: str,
    code: dict | None = None,
    timeout: float = 600.0,
    replace_other_code: bool = False,
) -> None:
    """Rank 0 claims ``folder`` (:func:`claim_folder`); the other ranks (one process per SLURM task) wait until it
    has, then refuse other code as rank 0 does (a rank left waiting for a rank 0 that refused would hang in DDP's
    rendezvous). With ``replace_other_code`` they wait for the folder of this code, not for the one rank 0 is about
    to move aside, which has the same config hash."""
    if rank() == 0:
        claim_folder(folder, job_id, digest, code, replace_other_code)
        return

    def claimed() -> bool:
        if folder_hash(folder) != digest:
            return False
        return not replace_other_code or code is None or same_code(folder_code(folder), code)

    deadline = time.monotonic() + timeout
    while not claimed():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{folder}: rank 0 did not claim the job folder within {timeout:.0f} s")
        time.sleep(2.0)
    if code is not None:
        check_resume(folder_code(folder), code, folder)


# --- one job at a time in a run folder -----------------------------------------------------------------------------
def lock_path(runs_dir: Path, job_id: str) -> Path:
    return runs_dir / LOCKS / f"{job_id}.lock"


def _slurm_job() -> tuple[str | None, int]:
    return os.environ.get("SLURM_JOB_ID") or None, int(os.environ.get("SLURM_RESTART_COUNT") or 0)


def _holder() -> dict:
    job, restart = _slurm_job()
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "slurm_job": job,
        "slurm_restart": restart,
        "since": now(),
    }


def describe_holder(holder: dict | None) -> str:
    if not holder:
        return "another process"
    where = f"PID {holder.get('pid')} on host {holder.get('host')}, since {holder.get('since')}"
    return f"SLURM job {holder['slurm_job']} ({where})" if holder.get("slurm_job") else where


def _read_holder(path: Path) -> dict | None:
    try:
        holder = load_file(path)
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _refusal(path: Path) -> Path:
    """Where rank 0 of a SLURM job that was refused the lock says so, for its other ranks."""
    job, restart = _slurm_job()
    return path.with_name(f"{path.name}.refused-{job}-{restart}")


@contextmanager
def job_lock(runs_dir: Path, job_id: str, attempts: int = 3, timeout: float = 600.0) -> Iterator[bool]:
    """Hold job ``job_id``'s lock inside the block; yields whether this process holds it (False on the ranks beside
    it, and where it cannot be taken).

    The launching process takes it (:func:`sarnmt.training.run_lock.launching_process`); the other ranks of a SLURM job
    go on once their rank 0 holds it (and skip when it was refused); ranks started by another launcher run under their
    parent's lock. On a file system without ``flock`` (Lustre mounted without it) the job runs unlocked, with a warning.

    :raises FolderInUse: another process holds it (named), after ``attempts`` tries half a second apart.
    """
    path = lock_path(runs_dir, job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not launching_process():
        if os.environ.get("SLURM_PROCID", "0") not in ("", "0"):
            _follow_rank_zero(path, job_id, timeout)
        yield False
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    held = True
    try:
        for attempt in range(attempts):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt + 1 < attempts:
                    time.sleep(0.5)
                    continue
                holder = _read_holder(path)
                if _slurm_job()[0]:
                    write_json(_refusal(path), {"holder": holder})
                raise FolderInUse(f"job {job_id} is being run by {describe_holder(holder)} ({path}): skipped") from None
            except OSError as err:
                log.warning("%s cannot be locked (%s): job %s runs unlocked", path, err, job_id)
                held = False
                break
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(_holder()) + "\n").encode(), 0)
        yield held
    finally:
        os.close(fd)  # releases the lock


def clear_stale_run_lock(folder: Path) -> None:
    """Remove the run folder's training lock (:mod:`sarnmt.training.run_lock`) when another host left it. Only under the
    cell's lock (:func:`job_lock`), which proves that no other job of the cell runs: such a lock is what a job whose
    node was lost leaves, and :mod:`sarnmt.training.run_lock` cannot check it from here (it takes over the stale locks
    of this host and of the same SLURM job requeued by itself)."""
    path = folder / RUN_LOCK
    try:
        holder = load_file(path)
    except (OSError, ValueError):
        return
    if isinstance(holder, dict) and holder.get("host") not in (None, socket.gethostname()):
        log.warning(
            "%s: left by %s, which no longer runs this job (its cell lock is ours): removed",
            path,
            describe_holder(holder),
        )
        path.unlink(missing_ok=True)


def _follow_rank_zero(path: Path, job_id: str, timeout: float) -> None:
    """A SLURM rank other than 0: wait until this job's rank 0 holds the lock; raise when it was refused."""
    job, restart = _slurm_job()
    deadline = time.monotonic() + timeout
    while True:
        holder = _read_holder(path) or {}
        if holder.get("slurm_job") == job and holder.get("slurm_restart") == restart:
            return
        if _refusal(path).exists():
            refused = _read_holder(_refusal(path)) or {}
            raise FolderInUse(f"job {job_id} is being run by {describe_holder(refused.get('holder'))}: skipped")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: rank 0 of SLURM job {job} did not take the job's lock within {timeout:.0f} s")
        time.sleep(0.5)


def lock_holder(runs_dir: Path, job_id: str) -> str | None:
    """Who holds job ``job_id``'s lock now, in words; None when nobody does."""
    path = lock_path(runs_dir, job_id)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return describe_holder(_read_holder(path))
    except OSError:
        return None
    finally:
        os.close(fd)
    return None
