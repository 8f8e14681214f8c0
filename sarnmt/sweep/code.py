"""Which code a job ran: the commit, whether the checkout had uncommitted changes, and a hash of the package's source.

A table averages a cell's seeds; that is only a measurement of one system when every seed ran the same code. The
config hash (:func:`sarnmt.sweep.records.config_hash`) covers the config, not the code, so every record also holds
:func:`code_identity`:

- ``commit``: ``git rev-parse HEAD`` of the checkout the package runs from (None outside a git checkout, e.g. an
  installed wheel);
- ``dirty``: whether the files that decide what a job computes (:data:`CODE_PATHS`: the package with its configs,
  ``sarnmt/conf``, and the sweep's table and scale files, ``sarnmt/sweep/specs``; ``pyproject.toml``) differ from
  that commit, untracked files included (None outside a checkout). Records, hypotheses and run folders do not count;
- ``source_hash``: 16 hex digits of the SHA-256 over the package's source and config files (:func:`source_hash`),
  which also pins code that is not in git.

A sweep job refuses to start from a dirty checkout unless ``allow_dirty=true``, which its record then states, and a
run folder remembers the code that started it: resuming it with other code is refused (:func:`check_resume`), so a
record never describes a run that changed code half-way.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import sarnmt
from sarnmt.errors import UserError

PACKAGE_DIR = Path(sarnmt.__file__).resolve().parent
CODE_PATHS = ("sarnmt", "pyproject.toml")
SOURCE_SUFFIXES = (".py", ".yaml", ".yml", ".sql", ".html", ".js", ".css")


class CodeError(UserError, RuntimeError):
    """A job that would run on unpinned or changed code; the message says what to commit or move."""


def source_hash(dirs: tuple[Path, ...] | None = None) -> str:
    """16 hex digits of the SHA-256 over every source file (:data:`SOURCE_SUFFIXES`) under ``dirs`` (default: the
    package, which holds its configs: :func:`sarnmt.utils.compose.config_dir`), each as its path relative to its
    folder and its bytes, in sorted order; caches (``__pycache__``) left out."""
    dirs = dirs or (PACKAGE_DIR,)
    digest = hashlib.sha256()
    for root in dirs:
        files = sorted(
            p
            for p in root.rglob("*")
            if p.is_file() and p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.relative_to(root).parts
        )
        for path in files:
            digest.update(f"{root.name}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:16]


def git_state(repo: Path) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the checkout at ``repo`` (None: not a git checkout)."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all", "--", *CODE_PATHS],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    if status.returncode != 0:
        return {"commit": sha.stdout.strip(), "dirty": None}
    return {"commit": sha.stdout.strip(), "dirty": bool(status.stdout.strip())}


def code_identity(repo: Path | None = None) -> dict[str, Any]:
    """``{"commit", "dirty", "source_hash"}`` of the code this process runs (``repo``: the checkout holding the
    package, by default the package's parent folder)."""
    return {**git_state(repo or PACKAGE_DIR.parent), "source_hash": source_hash()}


def describe(code: dict[str, Any]) -> str:
    commit = (code.get("commit") or "no commit")[:10]
    dirty = " with uncommitted changes" if code.get("dirty") else ""
    return f"commit {commit}{dirty}, source {code.get('source_hash')}"


def check_clean(code: dict[str, Any], allow_dirty: bool, job_id: str) -> None:
    """Refuse a job whose checkout has uncommitted changes to its code, unless ``allow_dirty``."""
    if code.get("dirty") and not allow_dirty:
        raise CodeError(
            f"job {job_id}: the checkout at {PACKAGE_DIR.parent} has uncommitted changes to "
            f"{', '.join(p.removeprefix(':(glob)') for p in CODE_PATHS)} (git status); a record must say which code "
            "it ran: commit them, or set allow_dirty=true (the record then says so)"
        )


def same_code(started: dict[str, Any] | None, code: dict[str, Any]) -> bool:
    """Whether two code identities are one code: the same source hash (``started`` None: unknown, never the same)."""
    return started is not None and started.get("source_hash") == code.get("source_hash")


def check_resume(started: dict[str, Any] | None, code: dict[str, Any], folder: Path) -> None:
    """Refuse to go on with a run that ``started`` on other code than ``code`` (compared by source hash)."""
    if started is None or same_code(started, code):
        return
    raise CodeError(
        f"{folder} was started by {describe(started)}; this checkout is {describe(code)}: finish the run with its "
        "code checked out, or move the folder aside to train the job again on this code"
    )
