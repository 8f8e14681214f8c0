"""Reading line-aligned text (files, plain or gzip-compressed, and streams such as stdin), strictly.

Lines are split on ``\\n`` only (not with ``str.splitlines``, which also splits on characters such as U+2028
or U+001C that can occur inside a sentence and would break the alignment of a parallel corpus). Only the line
terminator (``\\n`` and one ``\\r`` before it: CRLF files read as LF files) is removed; all other whitespace and
control characters, NUL included, are kept, so line ``k`` of the input is always line ``k`` of what is read. Bytes
that are not UTF-8 are refused, naming the file, the line and the column; a folder where a file is expected and a
broken gzip file are refused by name (:class:`~sarnmt.errors.InputError`), a missing file by ``FileNotFoundError``.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from sarnmt.errors import InputError

UTF8_HINT = "convert it to UTF-8 first (e.g. iconv -f latin1 -t utf-8)"


def check_file(path: str | os.PathLike[str], what: str = "a file") -> Path:
    """``path`` as a ``Path``.

    :raises InputError: when it is a folder (naming ``what`` it should be).  :raises FileNotFoundError: when missing.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a folder, but {what} is expected here")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    return path


def _read_bytes(path: Path) -> bytes:
    check_file(path)
    if path.name.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as f:
                return f.read()
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:
            raise InputError(f"{path}: not a valid gzip file ({e})") from e
    return path.read_bytes()


def _utf8_error(name: object, line_no: int, data: bytes, err: UnicodeDecodeError, line_start: int) -> InputError:
    return InputError(
        f"{name}:{line_no}: invalid UTF-8 (byte {data[err.start : err.start + 1]!r} at column "
        f"{err.start - line_start + 1}: {err.reason}); {UTF8_HINT}"
    )


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """All lines of a UTF-8 text file, ``.gz`` files decompressed, line terminators removed.

    :raises FileNotFoundError: if ``path`` is missing.
    :raises InputError: if ``path`` is a folder, on a broken gzip file, and on bytes that are not UTF-8
        (naming the file and the 1-based line number).
    """
    path = Path(path)
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        line_no = data.count(b"\n", 0, e.start) + 1
        raise _utf8_error(path, line_no, data, e, data.rfind(b"\n", 0, e.start) + 1) from e
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the file ends with a newline
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def stream_lines(stream: Iterable[bytes], name: str) -> Iterator[str]:
    """The lines of a byte stream (a file opened ``"rb"``, ``sys.stdin.buffer``), one at a time, as
    :func:`read_lines` reads a file.

    :param name: what messages call the stream (a path, ``<stdin>``).
    :raises InputError: on bytes that are not UTF-8, naming ``name`` and the line.
    """
    for line_no, raw in enumerate(stream, 1):  # a binary stream splits on b"\n" only
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            yield raw.decode("utf-8", errors="strict")
        except UnicodeDecodeError as e:
            raise _utf8_error(name, line_no, raw, e, 0) from e


def read_parallel(src_path: str | os.PathLike[str], tgt_path: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """Both sides of a line-aligned parallel corpus.

    :raises InputError: if the two files have different numbers of lines (naming both files and both counts),
        or as :func:`read_lines`.
    """
    src = read_lines(src_path)
    tgt = read_lines(tgt_path)
    if len(src) != len(tgt):
        raise InputError(
            f"parallel files differ in length: {src_path} has {len(src)} lines, "
            f"{tgt_path} has {len(tgt)} lines; they must be line-aligned"
        )
    return src, tgt
