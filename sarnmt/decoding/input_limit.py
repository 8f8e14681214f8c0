"""The longest source line ``translate`` and ``evaluate`` decode: ``max_input_tokens`` subword tokens.

Search time and memory grow with the source length (the output may be ``max_len_a · |source| + max_len_b`` tokens
long, and every step attends over the whole source and the output so far), so one enormous line could take the
machine's memory: a 9,000-token line made ``translate`` grow to 24 GB before this limit. A longer line is either
truncated to its first ``max_input_tokens`` tokens and translated (the default; a warning names the line, and
``evaluate`` lists such lines in its record) or, with ``truncate_long_input=false``, refused with an error naming
the line. Either way every input line still gives exactly one output line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sarnmt.errors import InputError

log = logging.getLogger("sarnmt")


@dataclass
class InputLimit:
    """:param max_tokens: the most source tokens (the source codec's ids, EOS not counted) decoded per line.
    :param truncate: truncate longer lines (True) or refuse them (False).
    :param name: what messages call the input (a path, ``<stdin>``, a corpus split).
    :ivar truncated: the 1-based numbers of the lines that were truncated."""

    max_tokens: int
    truncate: bool = True
    name: str = "input"
    truncated: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise InputError(f"max_input_tokens must be >= 1, got {self.max_tokens}")

    def __call__(self, ids: list[int], line_no: int) -> list[int]:
        """``ids`` of line ``line_no`` (1-based), within the limit.  :raises InputError: when too long and not
        truncating."""
        if len(ids) <= self.max_tokens:
            return ids
        where = f"{self.name}:{line_no}: {len(ids):,} tokens, more than max_input_tokens={self.max_tokens:,}"
        if not self.truncate:
            raise InputError(
                f"{where}; split the line, raise max_input_tokens (decoding time and memory grow with "
                "it), or set truncate_long_input=true to translate its first tokens"
            )
        self.truncated.append(line_no)
        log.warning("%s: translating its first %d tokens only", where, self.max_tokens)
        return ids[: self.max_tokens]
