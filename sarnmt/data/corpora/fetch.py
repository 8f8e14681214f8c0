"""Fetching corpus files: resumable, verified, retried downloads and safe archive extraction.

- :func:`download`: HTTP(S) with a progress bar into ``<dest>.part``; an interrupted transfer resumes with an HTTP
  ``Range`` request (and restarts when the server ignores it); the finished file is verified against its checksum
  (``md5:``/``sha256:``) before it is renamed to ``dest``. A failure is retried; the last one raises
  :class:`FetchError` saying which URL to download by hand and where to put the file.
- :func:`extract`: unpack a tar archive into a temporary folder beside the target, refusing any member whose path
  leaves the target or that is a link or device, then rename it into place (a half-extracted folder is never used).
"""

from __future__ import annotations

import hashlib
import http.client
import shutil
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from tqdm.auto import tqdm

from sarnmt.errors import UserError

CHUNK = 1 << 16


class FetchError(UserError, RuntimeError):
    """A corpus file could not be fetched or verified; the message says what to do by hand."""


def file_checksum(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: Path, checksum: str | None) -> str | None:
    """``None`` when ``path`` matches ``checksum`` (``"md5:<hex>"``/``"sha256:<hex>"``; ``None`` = no check),
    else a description of the mismatch."""
    if checksum is None:
        return None
    algorithm, _, want = checksum.partition(":")
    if algorithm not in ("md5", "sha256") or not want:
        raise ValueError(f"bad checksum {checksum!r}: expected 'md5:<hex>' or 'sha256:<hex>'")
    got = file_checksum(path, algorithm)
    return None if got == want.lower() else f"{algorithm} is {got}, expected {want}"


def _transfer(url: str, part: Path, timeout: float) -> None:
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        if have and response.status != 206:  # the server ignored Range: start again
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        with (
            open(part, "ab" if have else "wb") as out,
            tqdm(total=total, initial=have, unit="B", unit_scale=True, desc=part.name[:-5], leave=False) as bar,
        ):
            while block := response.read(CHUNK):
                out.write(block)
                bar.update(len(block))
        if total is not None and part.stat().st_size < total:
            raise OSError(f"connection closed after {part.stat().st_size} of {total} bytes")


def download(
    url: str, dest: Path, checksum: str | None, *, retries: int = 3, timeout: float = 60.0, wait: float = 1.0
) -> bool:
    """Fetch ``url`` to ``dest`` unless ``dest`` is already there and verified.

    :returns: True if something was downloaded, False if ``dest`` was already in place.
    :raises FetchError: after ``retries`` failed attempts, or when an existing ``dest`` fails its checksum.
    """
    dest = Path(dest)
    hint = f"download {url} by hand and save it as {dest}" + (f" ({checksum})" if checksum else "")
    if dest.exists():
        problem = verify(dest, checksum)
        if problem:
            raise FetchError(f"{dest} is corrupt: {problem}. Delete it and run again, or {hint}")
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    errors = []
    for attempt in range(1, retries + 1):
        try:
            _transfer(url, part, timeout)
        except (OSError, http.client.HTTPException) as e:  # resume from what arrived on the next attempt
            if isinstance(e, urllib.error.HTTPError) and e.code == 416:
                part.unlink(missing_ok=True)  # Range beyond the end: the partial file is wrong
            errors.append(f"attempt {attempt}: {e}")
        else:
            problem = verify(part, checksum)
            if problem is None:
                part.replace(dest)
                return True
            part.unlink()  # corrupt: start from scratch
            errors.append(f"attempt {attempt}: checksum mismatch, {problem}")
        if attempt < retries:
            time.sleep(wait * attempt)
    raise FetchError(f"could not fetch {url} ({'; '.join(errors)}). Please {hint}")


def extract(archive: Path, target: Path) -> None:
    """Unpack the tar archive ``archive`` (any compression) into the folder ``target``, safely and atomically.

    :raises FetchError: on an unreadable archive or a member that is a link, a device, or outside ``target``.
    """
    archive, target = Path(archive), Path(target)
    tmp = target.with_name(f".{target.name}.extracting")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tar:
            root = tmp.resolve()
            for member in tar.getmembers():
                where = (root / member.name).resolve()
                if not where.is_relative_to(root) or member.name.startswith("/"):
                    raise FetchError(f"{archive}: member {member.name!r} would be written outside {target}")
                if not (member.isfile() or member.isdir()):
                    raise FetchError(f"{archive}: member {member.name!r} is a link or special file; refused")
            tar.extractall(tmp, filter="data")
    except (tarfile.TarError, EOFError, OSError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise FetchError(f"{archive}: cannot extract ({e}); delete it and run again") from e
    except FetchError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if target.exists():  # a folder the user started: add the archive's files, keep the others
        shutil.copytree(tmp, target, dirs_exist_ok=True)
        shutil.rmtree(tmp)
    else:
        tmp.rename(target)
