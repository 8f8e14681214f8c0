"""Every JSON file the package reads, read with bounds: its size, its nesting depth and the length of its whole
numbers are checked before (or while) it is parsed, so a file from elsewhere cannot exhaust memory or the stack.

Python's ``json`` parses nested arrays by recursion (``"[" * 200000`` is a ``RecursionError``) and takes whole
numbers of any length (``"parameters": 10**400`` parses, then overflows where it is used). Here:

- a file larger than ``max_bytes`` (:data:`MAX_BYTES`, 64 MiB, unless the reader says less) is refused before it is
  read (a gzip-compressed one: :func:`sarnmt.utils.gzip_bounds.read_gzip` stops at the same limit);
- the depth is measured before parsing, without recursion: the strings are blanked out (one regular expression), the
  brackets ``[ ] { }`` left are kept (``bytes.translate``) and their running depth, +1 for an opening and -1 for a
  closing bracket, is summed with numpy in blocks; more than ``max_depth`` (:data:`MAX_DEPTH`, 64) is refused;
- a whole number with more than :data:`MAX_INT_DIGITS` (20) digits is refused as it is parsed (``parse_int``);
  ``NaN``, ``Infinity`` and floats beyond the double range (``1e400`` is ``inf``) parse, and the reader's schema
  decides (a record's score that is not finite makes it broken: :mod:`sarnmt.sweep.records`).

Every refusal is a :class:`JsonError` (an :class:`~sarnmt.errors.InputError`, so a ``ValueError``) naming the file:
``<file> nests deeper than 64 levels``, ``<file>: a whole number of 401 digits (at most 20)``, ``<file> is larger
than 1 MiB``, ``<file>: truncated or not valid JSON (...)``, ``<file>: not UTF-8 (...)``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from sarnmt.errors import InputError
from sarnmt.utils.gzip_bounds import read_gzip, size_text

MAX_BYTES = 64 * 2**20
MAX_DEPTH = 64  # a record nests 5 levels, sentence statistics 4
MAX_INT_DIGITS = 20  # a signed 64-bit integer has at most 19

_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)  # linear: every attempt matches
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BLOCK = 1 << 22  # brackets summed at a time


class JsonError(InputError):
    """A JSON input that is too large, too deep, holds too long a whole number, or is not UTF-8 JSON."""


def depth(data: bytes | bytearray) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON text, outside its strings, found without recursion.

    An opening bracket's byte has bit 1 set (``[`` 0x5B, ``{`` 0x7B), a closing one's not (``]`` 0x5D, ``}`` 0x7D),
    so each bracket's step is ``(byte & 2) - 1``; the depth is the largest running sum of the steps.
    """
    brackets = _STRING.sub(b'""', data).translate(None, _NOT_BRACKETS)
    deepest, level = 0, 0
    for start in range(0, len(brackets), _BLOCK):
        steps = (np.frombuffer(brackets, np.uint8, count=min(_BLOCK, len(brackets) - start), offset=start) & 2).astype(
            np.int32
        ) - 1
        running = np.cumsum(steps, dtype=np.int64) + level
        deepest, level = max(deepest, int(running.max())), int(running[-1])
    return deepest


def loads(
    data: bytes | bytearray | str,
    name: str | os.PathLike[str],
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Parse JSON text ``data`` (what messages call ``name``) within the bounds above.

    :raises JsonError: naming ``name`` and the bound it passes, or why it is not UTF-8 JSON.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise JsonError(f"{name} is larger than {size_text(max_bytes)}, the limit for this JSON file")
    levels = depth(raw)
    if levels > max_depth:
        raise JsonError(f"{name} nests deeper than {max_depth} levels ({levels}); it is not a file this reads")
    try:
        text = raw.decode("utf-8") if not isinstance(data, str) else data
    except UnicodeDecodeError as err:
        raise JsonError(f"{name}: not UTF-8 ({err})") from err
    try:
        return json.loads(text, parse_int=_whole_number)
    except _TooLong as err:
        raise JsonError(f"{name}: a whole number of {err.digits} digits (at most {MAX_INT_DIGITS})") from None
    except (json.JSONDecodeError, RecursionError) as err:
        raise JsonError(f"{name}: truncated or not valid JSON ({err})") from err


def load_file(path: str | os.PathLike[str], max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """Read and parse the JSON file ``path`` (its size checked before it is read; a ``.gz`` file decompressed up to
    ``max_bytes``).

    :raises JsonError: as :func:`loads`, or a ``.gz`` file beyond ``max_bytes``.  :raises OSError: it cannot be read.
    """
    path = Path(path)
    if path.name.endswith(".gz"):
        return loads(read_gzip(path, max_bytes), path, max_bytes, max_depth)
    with path.open("rb") as handle:
        data = handle.read(max_bytes + 1)  # a FIFO or a file that grows is cut here too
    return loads(data, path, max_bytes, max_depth)


class _TooLong(ValueError):
    def __init__(self, digits: int) -> None:
        super().__init__(digits)
        self.digits = digits


def _whole_number(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise _TooLong(digits)
    return int(text)
