"""The longest source line ``translate`` and ``evaluate`` decode: ``max_input_tokens`` subword tokens.

Search time and memory grow with the source length (the output may be ``max_len_a · |source| + max_len_b`` tokens
long, and every step attends over the whole source and the output so far), so one enormous line could take the
machine's memory: a 9,000-token line made ``translate`` grow to 24 GB before this limit. A longer line is either
truncated to its first ``max_input_tokens`` tokens and translated (the default; a warning names the line, and
``evaluate`` lists such lines in its record) or, with ``truncate_long_input=false``, refused with an error naming
the line. Either way every input line still gives exactly one output line.

Encoding is bounded too: a line of more than ``CHARS_PER_TOKEN · max_input_tokens`` characters (51,200 for 400
tokens; no real text has that many characters per subword) can only be truncated, so only that many of its first
characters (up to the last space among them, where there is one) are encoded (:meth:`InputLimit.encode`): a 30 MB
line costs what a 50 KB one does. ``translate`` reads its input with a per-line byte limit, ``max_line_bytes``
(:func:`sarnmt.data.text.reading.bounded_lines`): a longer line is cut there by the same rule (translated from its
start with a warning, or refused) and the rest of it skipped; a line with no end in a further GiB (``/dev/zero``, a
binary file) is cut by the same rule and ends the input.

Both limits have a maximum (:func:`~sarnmt.errors.check_range`, the bound in the message): ``max_input_tokens`` at
most :data:`MAX_INPUT_TOKENS` (4,096: the output may be ten times that, and each kept token adds to the encoder
states every step attends over; the paper trains on sentences of up to 50 tokens), ``max_line_bytes`` at most
:data:`MAX_LINE_BYTES` (1 GiB of a line in memory).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Protocol

from sarnmt.data.text.reading import Line
from sarnmt.errors import InputError, check_range

log = logging.getLogger("sarnmt")

CHARS_PER_TOKEN = 128  # the characters of a line encoded per token kept: far more than any subword has
MAX_INPUT_TOKENS = 4_096  # decoding memory and time grow with the source: its states, attention, output length bound
MAX_LINE_BYTES = 2**30  # the most of one line held in memory while reading
_LAST_SPACE = re.compile(r"\s(?=\S*\Z)")


class Encoder(Protocol):
    def encode(self, text: str) -> list[int]: ...


def check_max_input_tokens(value: object) -> None:
    """:raises InputError: ``max_input_tokens=<value>: must be ...`` unless a whole number in 1..4,096."""
    why = "decoding memory and time grow with the source's length"
    check_range("max_input_tokens", value, 1, MAX_INPUT_TOKENS, why, whole=True)


def check_max_line_bytes(value: object) -> None:
    """:raises InputError: ``max_line_bytes=<value>: must be ...`` unless a number in 1..:data:`MAX_LINE_BYTES`."""
    check_range("max_line_bytes", value, 1, MAX_LINE_BYTES, "a line is held in memory up to it")


@dataclass
class InputLimit:
    """:param max_tokens: the most source tokens (the source codec's ids, EOS not counted) decoded per line.
    :param truncate: truncate longer lines (True) or refuse them (False).
    :param name: what messages call the input (a path, ``<stdin>``, a corpus split).
    :param max_line_bytes: the per-line byte limit of the reading (only for messages here).
    :ivar truncated: the 1-based numbers of the lines that were truncated.

    The limits are trusted: a command checks them once, where they enter (:func:`check_max_input_tokens`, through
    :func:`~sarnmt.decoding.search.check_decoding`, and :func:`check_max_line_bytes`)."""

    max_tokens: int
    truncate: bool = True
    name: str = "input"
    max_line_bytes: int | None = None
    truncated: list[int] = field(default_factory=list)

    @property
    def max_chars(self) -> int:
        """The most characters of a line that are encoded."""
        return self.max_tokens * CHARS_PER_TOKEN

    def __call__(self, ids: list[int], line_no: int) -> list[int]:
        """``ids`` of line ``line_no`` (1-based), within the limit.  :raises InputError: when too long and not
        truncating."""
        if len(ids) <= self.max_tokens:
            return ids
        return self._cut(ids, line_no, f"{len(ids):,} tokens, more than max_input_tokens={self.max_tokens:,}")

    def encode(self, codec: Encoder, line: str | Line, line_no: int) -> tuple[list[int], str]:
        """The ids of line ``line_no`` within the limit, encoding at most :attr:`max_chars` of its characters, and
        the text they come from (the line, or the start of it that was encoded).

        :param line: the text, or a :class:`~sarnmt.data.text.reading.Line` that the reading may have cut at
            ``max_line_bytes`` (always truncated or refused, then).
        :raises InputError: when too long and not truncating."""
        read = line if isinstance(line, Line) else Line(line)
        if not read.text.strip() and not read.stops:  # a blank line (cut or not) is an empty translation
            return [], read.text
        text = read.text
        if len(text) > self.max_chars:
            text = text[: self.max_chars]
            space = _LAST_SPACE.search(text)
            if space is not None and space.start() > self.max_chars // 2:
                text = text[: space.start()]
        ids = codec.encode(text) if text.strip() else []
        if read.stops:
            where = f"no line end in its first {read.size:,} bytes"
            return self._cut(ids, line_no, where, stops=True, hint="split the input into lines"), text
        if read.cut:
            limit = f"max_line_bytes={self.max_line_bytes:,}" if self.max_line_bytes is not None else "the limit"
            hint = "split the line (or raise max_line_bytes and max_input_tokens)"
            return self._cut(ids, line_no, f"{read.size:,} bytes, more than {limit}", hint=hint), text
        if text is not read.text:
            chars = f"{self.max_chars:,} read for max_input_tokens={self.max_tokens:,}"
            return self._cut(ids, line_no, f"{len(read.text):,} characters, more than the {chars}"), text
        return self(ids, line_no), text

    def _cut(self, ids: list[int], line_no: int, why: str, stops: bool = False, hint: str = "") -> list[int]:
        where = f"{self.name}:{line_no}: {why}"
        if not self.truncate:
            hint = hint or "split the line, raise max_input_tokens (decoding time and memory grow with it)"
            raise InputError(f"{where}; {hint}, or set truncate_long_input=true to translate its first tokens")
        self.truncated.append(line_no)
        after = "; the input is read no further" if stops else ""
        log.warning("%s: translating its first %d tokens only%s", where, min(len(ids), self.max_tokens), after)
        return ids[: self.max_tokens]
