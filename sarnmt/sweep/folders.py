"""A job's run folder (``<runs_dir>/<job id>/``) and who owns it: ``job.json`` holds the config hash the folder's
checkpoints belong to and the code that started them (:mod:`sarnmt.sweep.code`). A folder of another hash is moved
aside as ``<job id>.stale-<hash>``, never resumed; one started by other code is refused; under SLURM the DDP ranks
other than 0 wait until rank 0 has claimed the folder."""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from sarnmt.sweep.code import check_resume
from sarnmt.sweep.records import write_json

log = logging.getLogger("sarnmt")
MARKER = "job.json"


def now() -> str:
    """The time in UTC, to the second, ISO 8601 (the time stamps of records and run folders)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def folder_hash(folder: Path) -> str | None:
    """The config hash ``folder`` belongs to; None when it has no readable ``job.json``."""
    try:
        return json.loads((folder / MARKER).read_text())["config_hash"]
    except (OSError, ValueError, KeyError):
        return None


def folder_code(folder: Path) -> dict | None:
    """The code that started the run in ``folder`` (None: unknown, a folder from before records pinned the code)."""
    try:
        return json.loads((folder / MARKER).read_text()).get("code")
    except (OSError, ValueError, AttributeError):
        return None


def claim_folder(folder: Path, job_id: str, digest: str, code: dict | None = None) -> None:
    """Make ``folder`` this job's, for this config hash and this ``code``; a folder of another hash is moved aside,
    one of the same hash started by other code is refused (:func:`sarnmt.sweep.code.check_resume`)."""
    if folder.exists():
        owner = folder_hash(folder) or "unknown"
        if owner == digest:
            if code is not None:
                check_resume(folder_code(folder), code, folder)
            return
        aside = folder.with_name(f"{folder.name}.stale-{owner}")
        k = 1
        while aside.exists():
            aside, k = folder.with_name(f"{folder.name}.stale-{owner}-{k}"), k + 1
        log.warning("%s holds a run of config %s, not %s: moved to %s", folder, owner, digest, aside)
        folder.rename(aside)
    folder.mkdir(parents=True)
    write_json(folder / MARKER, {"job": job_id, "config_hash": digest, "created": now(), "code": code})


def rank() -> int:
    """This process's DDP rank as SLURM or torchrun gives it (0 outside both)."""
    return int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", "0")))


def take_folder(folder: Path, job_id: str, digest: str, code: dict | None = None, timeout: float = 600.0) -> None:
    """Rank 0 claims ``folder``; the other ranks (one process per SLURM task) wait until it has."""
    if rank() == 0:
        claim_folder(folder, job_id, digest, code)
        return
    deadline = time.monotonic() + timeout
    while folder_hash(folder) != digest:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{folder}: rank 0 did not claim the job folder within {timeout:.0f} s")
        time.sleep(2.0)
