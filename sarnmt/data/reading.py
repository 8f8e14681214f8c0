"""Reading line-aligned text files (plain or gzip-compressed), strictly.

Lines are split on ``\\n`` only (not with ``str.splitlines``, which also splits on characters such as U+2028
or U+001C that can occur inside a sentence and would break the alignment of a parallel corpus). Only the line
terminator (``\\n`` and one ``\\r`` before it) is removed; all other whitespace is kept.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.name.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as f:
                return f.read()
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:
            raise ValueError(f"{path}: not a valid gzip file ({e})") from e
    return path.read_bytes()


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """All lines of a UTF-8 text file, ``.gz`` files decompressed, line terminators removed.

    :raises FileNotFoundError: if ``path`` is not a file.
    :raises ValueError: on bytes that are not UTF-8, naming the file and the 1-based line number.
    """
    path = Path(path)
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        line_no = data.count(b"\n", 0, e.start) + 1
        line_start = data.rfind(b"\n", 0, e.start) + 1
        raise ValueError(
            f"{path}:{line_no}: invalid UTF-8 (byte {data[e.start : e.start + 1]!r} at column "
            f"{e.start - line_start + 1}: {e.reason})"
        ) from e
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the file ends with a newline
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_parallel(
    src_path: str | os.PathLike[str], tgt_path: str | os.PathLike[str]
) -> tuple[list[str], list[str]]:
    """Both sides of a line-aligned parallel corpus.

    :raises ValueError: if the two files have different numbers of lines (naming both files and both counts),
        or as :func:`read_lines`.
    """
    src = read_lines(src_path)
    tgt = read_lines(tgt_path)
    if len(src) != len(tgt):
        raise ValueError(
            f"parallel files differ in length: {src_path} has {len(src)} lines, "
            f"{tgt_path} has {len(tgt)} lines"
        )
    return src, tgt
