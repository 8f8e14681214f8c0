"""The manifest of a prepared cache folder: its settings and counts, and the size and SHA-256 of every file in it,
checked when the cache is loaded.

A cache is written under a temporary name and renamed, so it is never seen half-written; the hashes catch what
happens to it afterwards (a file truncated by a full disk while it was copied, edited by hand, damaged on disk).
:func:`check` names every file that does not match. Caches written before the hashes existed get them on their
first :func:`add_hashes` (``prepare`` does that under the corpus lock).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sarnmt.errors import InputError
from sarnmt.utils.atomic import write_text
from sarnmt.utils.json_bounds import load_file

NAME = "manifest.json"


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def hashes(folder: Path) -> dict[str, dict[str, Any]]:
    """``{file name: {"bytes": size, "sha256": hex}}`` of every file of ``folder`` but the manifest."""
    return {
        p.name: {"bytes": p.stat().st_size, "sha256": file_hash(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != NAME
    }


def write(folder: Path, manifest: dict[str, Any]) -> None:
    """``manifest`` plus the hashes of the folder's files, as ``folder/manifest.json`` (atomically)."""
    write_text(folder / NAME, json.dumps({**manifest, "files": hashes(folder)}, indent=1))


def read(folder: Path) -> dict[str, Any]:
    """The manifest.  :raises InputError: when it is missing or unreadable."""
    try:
        manifest = load_file(folder / NAME)
    except (OSError, InputError) as err:
        raise InputError(
            f"prepared cache {folder} has no readable {NAME} ({err}); delete the folder and run prepare again"
        ) from err
    if not isinstance(manifest, dict) or not isinstance(manifest.get("splits"), dict):
        raise InputError(f"prepared cache {folder}: {NAME} lacks its splits; delete the folder and run prepare again")
    return manifest


def problems(folder: Path, manifest: dict[str, Any]) -> list[str]:
    """What does not match the manifest's hashes, one entry per file (empty: all match, or no hashes recorded)."""
    out = []
    for name, want in manifest.get("files", {}).items():
        path = folder / name
        if not path.is_file():
            out.append(f"{name} is missing")
        elif path.stat().st_size != want["bytes"]:
            out.append(f"{name} has {path.stat().st_size} bytes, the manifest says {want['bytes']}")
        elif file_hash(path) != want["sha256"]:
            out.append(f"{name} has another SHA-256 than the manifest's")
    return out


def check(folder: Path, manifest: dict[str, Any]) -> None:
    """:raises InputError: naming every file of ``folder`` that does not match ``manifest``."""
    found = problems(folder, manifest)
    if found:
        raise InputError(
            f"prepared cache {folder} is damaged: {'; '.join(found)}; delete the folder and run "
            "prepare again (it is rebuilt from the corpus files)"
        )


def add_hashes(folder: Path) -> bool:
    """Give a manifest written before the hashes existed its hashes.  :returns: whether it had none."""
    manifest = read(folder)
    if "files" in manifest:
        return False
    write(folder, manifest)
    return True
