"""One writer per run folder: ``<run>/.lock``, held by a training run from its start to its end.

The lock is a file created with ``O_CREAT | O_EXCL`` (atomic: of two runs started together into one folder, one
creates it) holding JSON: the holder's PID, host, boot id and process start time, when it started, its command, a
token, its SLURM job id and restart count, and the text of its ``.hydra/`` files. :func:`run_lock` takes it and
removes it when the run ends, by an error or a stop on a signal included (a preempted run's requeued job takes it
again):

- a lock held by a live process refuses the run with :class:`RunFolderLocked`, naming the holder's PID and host;
  Hydra has by then written the refused run's ``.hydra/`` files into the folder, so they are put back from the lock
  and still describe the run that holds it;
- a lock left by a process that no longer runs (killed with SIGKILL, or the machine rebooted) on this host, or by the
  same SLURM job before it was requeued (``SLURM_RESTART_COUNT``; it may start on another node), is taken over with a
  warning;
- a lock from another host cannot be checked from here: refused, naming host and PID and how to remove it.

Only the launching process (DDP global rank 0) takes the lock: the ranks Lightning or SLURM start beside it run in
the same folder as the same run (:func:`launching_process`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sarnmt.errors import UserError
from sarnmt.utils.atomic import write_text
from sarnmt.utils.json_bounds import loads

log = logging.getLogger("sarnmt")
LOCK_NAME = ".lock"
# set (and not 0) in the processes a distributed launcher starts beside the first: torchrun, Lightning's DDP
# launcher (LOCAL_RANK, NODE_RANK), SLURM tasks, LSF
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")
HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")
UNREADABLE_GRACE_S = 5.0  # a lock file being written (created, not yet filled) is read again for this long
_HELD: set[str] = set()  # the tokens of the locks this process holds


class RunFolderLocked(UserError, RuntimeError):
    """Another run writes into this run folder; the message names it (PID, host) and what to do."""


def launching_process() -> bool:
    """Whether this process is the one that takes a run's lock: not a DDP rank other than 0 started beside it."""
    return all(os.environ.get(name, "0").strip() in ("", "0") for name in RANK_VARIABLES)


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _process(pid: int) -> tuple[str, str] | None:
    """``(state, start time in clock ticks since boot)`` of a process from ``/proc``; None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], fields[19]


def _record(hydra: dict[str, str] | None) -> dict[str, Any]:
    process = _process(os.getpid())
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv)[:500],
        "token": uuid.uuid4().hex,
        "boot_id": _boot_id(),
        "process_start": process[1] if process else None,
        "slurm_job": os.environ.get("SLURM_JOB_ID"),
        "slurm_restart": int(os.environ.get("SLURM_RESTART_COUNT") or 0),
        "hydra": hydra,
    }


def _alive(holder: dict[str, Any]) -> bool | None:
    """Whether the holder still runs: True, False, or None when that cannot be told (another host)."""
    if holder.get("host") != socket.gethostname():
        return None
    if holder.get("boot_id") and _boot_id() and holder["boot_id"] != _boot_id():
        return False  # the machine has rebooted since
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return holder.get("token") in _HELD  # not ours: an earlier process that had this PID (a restarted container)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process
    process = _process(pid)
    if process is not None:
        state, start = process
        if state in ("Z", "X") or (holder.get("process_start") and start != holder["process_start"]):
            return False  # a zombie, or another process that got the PID again
    return True


def _earlier_job(holder: dict[str, Any], record: dict[str, Any]) -> bool:
    """Whether the holder was this SLURM job before it was requeued (SLURM keeps the job id and counts restarts)."""
    restart = holder.get("slurm_restart")
    return (
        record["slurm_job"] is not None
        and holder.get("slurm_job") == record["slurm_job"]
        and isinstance(restart, int)
        and restart < record["slurm_restart"]
    )


def _read(path: Path) -> tuple[bytes, dict[str, Any] | None] | None:
    """The lock's bytes and record (None when not JSON); None when there is no lock."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        record = loads(data, path)
    except ValueError:
        record = None
    return data, record if isinstance(record, dict) else None


def _describe(holder: dict[str, Any]) -> str:
    return f"PID {holder.get('pid')} on host {holder.get('host')} (since {holder.get('started')})"


def _take_over(path: Path, seen: bytes, why: str) -> None:
    """Remove the stale lock ``seen`` unless another run replaced it since: renamed aside first, so that of two runs
    taking over the same stale lock only one removes it."""
    aside = path.with_name(f"{LOCK_NAME}.stale-{os.getpid()}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    if aside.read_bytes() == seen:
        log.warning("run folder %s: %s; taking its lock over", path.parent, why)
    else:  # a fresh lock, taken meanwhile: put it back (the next attempt refuses)
        try:
            os.link(aside, path)
        except FileExistsError:
            pass
    aside.unlink(missing_ok=True)


def _restore_hydra(folder: Path, holder: dict[str, Any], ours: dict[str, str] | None) -> None:
    """Put back the holder's ``.hydra/`` files, which this refused run's Hydra has just written over."""
    theirs = holder.get("hydra")
    if not ours or not isinstance(theirs, dict) or theirs.get("subdir") != ours.get("subdir"):
        return
    for name in HYDRA_FILES:
        if isinstance(theirs.get(name), str):
            write_text(folder / ours["subdir"] / name, theirs[name])


def hydra_files(cfg: DictConfig, folder: Path) -> dict[str, str] | None:
    """The text of the ``.hydra/`` files Hydra wrote into ``folder`` for this run (as Hydra writes them), or None
    when this is no Hydra run into ``folder`` (a test, a sweep job writing into its own folder)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    subdir = hydra.get("output_subdir")
    if not subdir or Path(hydra.runtime.output_dir).resolve() != folder.resolve():
        return None
    return {
        "subdir": str(subdir),
        "config.yaml": OmegaConf.to_yaml(cfg),
        "hydra.yaml": OmegaConf.to_yaml(HydraConfig.instance().cfg),
        "overrides.yaml": OmegaConf.to_yaml(hydra.overrides.task),
    }


def _meet_holder(path: Path, record: dict[str, Any], hydra: dict[str, str] | None) -> None:
    """The lock ``path`` exists: take it over if its holder is gone, else refuse.

    :raises RunFolderLocked: naming the holder."""
    found = _read(path)
    if found is None:
        return  # released meanwhile
    seen, holder = found
    if holder is None:  # being written, or left half-written by a process killed at that moment
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return
        if age < UNREADABLE_GRACE_S:
            time.sleep(0.2)
        else:
            _take_over(path, seen, "its lock file is unreadable")
        return
    alive = _alive(holder)
    if alive is False or (alive is None and _earlier_job(holder, record)):
        why = "the same SLURM job before it was requeued" if alive is None else "a process that no longer runs"
        _take_over(path, seen, f"it was locked by {_describe(holder)}, {why}")
        return
    folder = path.parent
    _restore_hydra(folder, holder, hydra)
    if alive is None:
        raise RunFolderLocked(
            f"run folder {folder} is locked by {_describe(holder)}, another host, which cannot be checked from "
            f"here; if that run has ended, delete {path} and run again, otherwise give this run another folder "
            "(hydra.run.dir=...)"
        )
    raise RunFolderLocked(
        f"run folder {folder} is in use by another run: {_describe(holder)}; wait for it to end or stop it "
        f"(kill {holder.get('pid')}), or give this run another folder (hydra.run.dir=...)"
    )


def acquire(folder: Path, hydra: dict[str, str] | None = None) -> dict[str, Any]:
    """Take ``folder``'s lock. :returns: the record written into it.

    :raises RunFolderLocked: when a live process (or one on another host) holds it, naming it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    record = _record(hydra)
    data = json.dumps(record, indent=1).encode("utf-8")
    for _ in range(50):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            _meet_holder(path, record, hydra)  # refuses, or returns once a stale lock is gone (or to look again)
            continue
        try:
            os.write(fd, data)
            os.fsync(fd)
        except BaseException:
            path.unlink(missing_ok=True)  # a full disk: no empty lock left behind
            raise
        finally:
            os.close(fd)
        _HELD.add(record["token"])
        return record
    raise RunFolderLocked(f"run folder {folder}: could not take {path}, which other runs keep taking; run again")


def release(folder: Path, record: dict[str, Any]) -> None:
    """Remove ``folder``'s lock if it is still the one ``record`` describes."""
    _HELD.discard(record["token"])
    path = folder / LOCK_NAME
    found = _read(path)
    if found is not None and found[1] is not None and found[1].get("token") == record["token"]:
        path.unlink(missing_ok=True)


@contextmanager
def run_lock(folder: str | Path | None, cfg: DictConfig | None = None) -> Iterator[dict[str, Any] | None]:
    """Hold ``folder``'s lock inside the block (nothing when ``folder`` is None or this is a DDP rank other than 0).
    ``cfg``: the run's config, whose ``.hydra/`` files the lock keeps (:func:`hydra_files`)."""
    if folder is None or not launching_process():
        yield None
        return
    folder = Path(folder)
    record = acquire(folder, hydra_files(cfg, folder) if cfg is not None else None)
    try:
        yield record
    finally:
        release(folder, record)
