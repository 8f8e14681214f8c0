"""A gzip file read with a limit on what it decompresses to: a "gzip bomb" (3 MB that inflate to 3 GB) stops at the
limit with one error naming the file and the limit, before it can exhaust memory.

The file is inflated in blocks of :data:`BLOCK` bytes (``GzipFile.read(n)`` inflates at most ``n`` bytes at a time,
concatenated members included) into one growing buffer, and reading stops as soon as the buffer passes the limit:
at most ``limit + BLOCK`` bytes are ever held. Text read whole (``score ref=``, ``evaluate data=files``: the
reader of :mod:`sarnmt.data.text.reading`) may decompress to :data:`MAX_TEXT_BYTES` (256 MiB, about two million
sentences of a side; the decoded text and its lines take about twice that again); a larger corpus is read as a plain
file (``gunzip`` it first), which has no such limit.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from sarnmt.errors import InputError

MAX_TEXT_BYTES = 256 * 2**20  # a compressed text file read whole
BLOCK = 2**20  # bytes inflated at a time


class GzipLimitError(InputError):
    """A gzip file that is not valid, or decompresses to more than its limit; the message names the file and the
    limit."""


def size_text(n: int) -> str:
    """``256 MiB``: a byte count as the limits are stated."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} bytes"


def read_gzip(path: str | os.PathLike[str], limit: int = MAX_TEXT_BYTES, advice: str = "") -> bytearray:
    """The decompressed bytes of the gzip file ``path``, at most ``limit`` of them.

    :param advice: what the message says to do, after the limit.
    :raises GzipLimitError: the file decompresses to more than ``limit`` bytes (``<path>: decompresses to more than
        256 MiB, the limit for this input; <advice>``), or is not a valid gzip file.  :raises OSError: it cannot be
        opened.
    """
    path = Path(path)
    data = bytearray()
    try:
        with gzip.open(path, "rb") as handle:
            while block := handle.read(BLOCK):
                data += block
                if len(data) > limit:
                    raise GzipLimitError(
                        f"{path}: decompresses to more than {size_text(limit)}, the limit for this input (a gzip "
                        f"bomb?){'; ' + advice if advice else ''}"
                    )
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise GzipLimitError(f"{path}: not a valid gzip file ({err})") from err
    return data
