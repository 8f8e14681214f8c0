"""Reading line-aligned text (files, plain or gzip-compressed, and streams such as stdin), strictly.

Lines are split on ``\\n`` only (not with ``str.splitlines``, which also splits on characters such as U+2028
or U+001C that can occur inside a sentence and would break the alignment of a parallel corpus). Only the line
terminator (``\\n`` and one ``\\r`` before it: CRLF files read as LF files) is removed; all other whitespace and
control characters, NUL included, are kept, so line ``k`` of the input is always line ``k`` of what is read. Bytes
that are not UTF-8 are refused, naming the file, the line and the column; a folder where a file is expected and a
broken gzip file are refused by name (:class:`~sarnmt.errors.InputError`), a missing file by ``FileNotFoundError``.
A ``.gz`` file is decompressed up to :data:`sarnmt.utils.gzip_bounds.MAX_TEXT_BYTES` (256 MiB) and refused beyond
it, naming the limit (:func:`sarnmt.utils.gzip_bounds.read_gzip`: a 3 MB gzip bomb stops there, not at 3 GB).
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sarnmt.errors import InputError
from sarnmt.utils.gzip_bounds import MAX_TEXT_BYTES, read_gzip, size_text

MAX_SCORED_BYTES = 64 * 2**20  # a test set's hypotheses or references: newstest is ~0.4 MB, 64 MiB ~500K lines
UTF8_HINT = "convert it to UTF-8 first (e.g. iconv -f latin1 -t utf-8)"


def check_file(path: str | os.PathLike[str], what: str = "a file", streams: bool = False) -> Path:
    """``path`` as a ``Path``.

    :param streams: also accept a FIFO or a character device (read as a stream, line by line).
    :raises InputError: when it is a folder, a symlink loop, or anything but a regular file (or, with ``streams``, a
        FIFO or character device), naming ``what`` it should be.  :raises FileNotFoundError: when missing.
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file: {path}") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError(f"{path} is a symlink loop, but {what} is expected here") from err
        if err.errno == errno.ENOTDIR:
            raise FileNotFoundError(f"no such file: {path} (a folder on its way is a file)") from err
        raise
    if stat.S_ISDIR(mode):
        raise InputError(f"{path} is a folder, but {what} is expected here")
    if stat.S_ISREG(mode) or (streams and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode))):
        return path
    kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    read = "" if streams else " (a whole file is read here: give a regular file)"
    raise InputError(f"{path} is {kind}, but {what} is expected here{read}")


def _read_bytes(path: Path, max_bytes: int | None = None) -> bytes | bytearray:
    check_file(path)
    if path.name.endswith(".gz"):
        limit = MAX_TEXT_BYTES if max_bytes is None else min(max_bytes, MAX_TEXT_BYTES)
        return read_gzip(path, limit, "for more text, gunzip it and give the plain file")
    if max_bytes is not None:
        with path.open("rb") as handle:  # read one byte past the limit: a sparse or growing file is not trusted
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise InputError(f"{path} is larger than {size_text(max_bytes)}, the limit for a file read here")
        return data
    return path.read_bytes()


def _utf8_error(name: object, line_no: int, data: bytes, err: UnicodeDecodeError, line_start: int) -> InputError:
    return InputError(
        f"{name}:{line_no}: invalid UTF-8 (byte {data[err.start : err.start + 1]!r} at column "
        f"{err.start - line_start + 1}: {err.reason}); {UTF8_HINT}"
    )


def read_lines(path: str | os.PathLike[str], max_bytes: int | None = None) -> list[str]:
    """All lines of a UTF-8 text file, ``.gz`` files decompressed, line terminators removed.

    :param max_bytes: refuse a file (plain, or decompressed) larger than this, naming it and the limit, before more
        than that is read (``score``'s test sets: :data:`MAX_SCORED_BYTES`); None: plain files unbounded (corpora).

    :raises FileNotFoundError: if ``path`` is missing.
    :raises InputError: if ``path`` is a folder, on a broken gzip file, and on bytes that are not UTF-8
        (naming the file and the 1-based line number).
    """
    path = Path(path)
    data = _read_bytes(path, max_bytes)
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


# bytes of an over-long line skipped in search of its end before the input is taken for something that is not text
# (``/dev/zero``, a binary file) and reading stops: about a second of reading
MAX_SKIP = 1 << 30
SKIP_BLOCK = 1 << 20  # bytes read at a time while skipping


@dataclass(frozen=True)
class Line:
    """A line of a stream read with a byte limit (:func:`bounded_lines`).

    :param text: the line, or its first ``max_bytes`` when ``cut``.
    :param cut: the line was longer than ``max_bytes``.
    :param size: the line's length in bytes (characters for a text stream), its end excluded; when ``stops``, what
        was read of it.
    :param stops: no line end was found within ``max_bytes + MAX_SKIP``: nothing after it is read.
    """

    text: str
    cut: bool = False
    size: int = 0
    stops: bool = False


def bounded_lines(stream: Any, name: str, max_bytes: int, max_skip: int = MAX_SKIP) -> Iterator[Line]:
    """The lines of a stream as :func:`stream_lines` reads them, with at most ``max_bytes`` bytes of a line in
    memory (``readline(size)``: a binary stream counts bytes, a text stream characters). A longer line is given as
    its first ``max_bytes`` (a character cut at the limit left out) with ``cut=True``, and the rest of it is read in
    blocks and dropped up to its end; a line with no end within ``max_skip`` more bytes (``/dev/zero``, a binary
    file) is given with ``stops=True``, and reading stops there.

    :raises InputError: on bytes that are not UTF-8, naming ``name`` and the line.
    """
    if max_bytes < 1:
        raise InputError(f"max_line_bytes={max_bytes}: must be 1 or more")
    line_no = 0
    while True:
        raw = stream.readline(max_bytes + 1)
        if not raw:
            return
        line_no += 1
        newline, cr = ("\n", "\r") if isinstance(raw, str) else (b"\n", b"\r")
        cut = len(raw) > max_bytes and not raw.endswith(newline)
        size, stops = len(raw), False
        if cut:
            raw = raw[:max_bytes]
            while True:  # the rest of the line, dropped block by block
                rest = stream.readline(max(max_bytes, SKIP_BLOCK))
                if not rest or rest.endswith(newline):
                    size += max(0, len(rest) - 1)
                    break
                size += len(rest)
                if size - max_bytes > max_skip:
                    stops = True
                    break
        else:
            if raw.endswith(newline):
                raw = raw[:-1]
            if raw.endswith(cr):
                raw = raw[:-1]
            size = len(raw)
        if isinstance(raw, str):
            yield Line(raw, cut, size, stops)
        else:
            try:
                # a cut line may end inside a character: the incremental decoder leaves it out instead of refusing
                text = codecs.getincrementaldecoder("utf-8")("strict").decode(raw, final=not cut)
            except UnicodeDecodeError as e:
                raise _utf8_error(name, line_no, raw, e, 0) from e
            yield Line(text, cut, size, stops)
        if stops:
            return


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
