"""The share of an input's source tokens that the model does not know: ids equal to ``<unk>``
(:data:`sarnmt.data.text.codecs.UNK`) over all ids the source codec gives, EOS not counted.

A model translates unknown words as best it can, into fluent nonsense ("hello world" → ``ve wiko velir velir`` from a
German-English toy model): nothing in the output says the input was in another language or preprocessed otherwise
than the training data. ``sarnmt translate`` counts the input's tokens as it encodes them and, where the share is
above ``unknown_warning``, says so on stderr, once per input file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sarnmt.data.text.codecs import UNK
from sarnmt.errors import InputError


@dataclass
class UnknownShare:
    """Counts of one input's source tokens.  :param threshold: the share above which :meth:`warning` speaks (None:
    never)."""

    threshold: float | None
    tokens: int = 0
    unknown: int = 0

    def __post_init__(self) -> None:
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise InputError(f"unknown_warning={self.threshold}: must be a share between 0 and 1, or null")

    def add(self, ids: Sequence[int]) -> None:
        self.tokens += len(ids)
        self.unknown += sum(1 for i in ids if i == UNK)

    @property
    def share(self) -> float:
        return self.unknown / self.tokens if self.tokens else 0.0

    def warning(self, name: str) -> str | None:
        """One line for ``name`` (the input) when the share is above the threshold, else None."""
        if self.threshold is None or self.tokens == 0 or self.share <= self.threshold:
            return None
        return (
            f"{name}: {self.unknown:,} of {self.tokens:,} source tokens ({100 * self.share:.1f}%) are unknown to the "
            f"model (<unk>): is the input in the checkpoint's source language and preprocessing? "
            f"(unknown_warning={self.threshold})"
        )
