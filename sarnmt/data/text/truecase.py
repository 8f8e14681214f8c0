"""A Moses truecaser (sacremoses) whose learned model is JSON-able state.

Truecasing (Moses ``train-truecaser.perl`` / ``truecase.perl``): every word not at the start of a sentence votes for
its surface form; the most frequent form of each lowercased word is its *best* form. Applying it, a sentence-initial
word (also after ``. : ! ?`` and after opening quotes or brackets) is replaced by its best form; elsewhere a *known*
surface form is kept as it is and any other form is replaced by the best one; unseen words are left alone.
The inverse is :func:`detruecase` (Moses ``detruecase.perl``): capitalise sentence-initial words. It needs no model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sacremoses import MosesDetruecaser, MosesTruecaser

_DETRUECASER = MosesDetruecaser()


class Truecaser:
    """Learned casing model over Moses-tokenised text.

    :param best: ``{lowercased word: most frequent surface form}``.
    :param known: surface forms seen in the training text other than the best ones (kept as they are).
    """

    def __init__(self, best: dict[str, str], known: Iterable[str]) -> None:
        self.best = dict(best)
        self.known = sorted(set(known))
        self._moses = MosesTruecaser()
        self._moses.model = {"best": self.best, "known": set(self.known)}

    @classmethod
    def train(cls, tokenized_lines: Iterable[str]) -> Truecaser:
        """Learn the model from tokenised lines (tokens separated by single spaces, XML-escaped as Moses does)."""
        moses = MosesTruecaser()
        model = moses.train((line.split() for line in tokenized_lines), processes=1)
        return cls(model["best"], model["known"])

    def truecase(self, tokenized_line: str) -> str:
        """The truecased line (same tokens, case changed)."""
        if not tokenized_line.strip():
            return ""
        return self._moses.truecase(tokenized_line, return_str=True, use_known=True)

    def to_state(self) -> dict[str, Any]:
        """``{"best": {lower: form}, "known": [form, ...]}``, JSON-able."""
        return {"best": dict(self.best), "known": list(self.known)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Truecaser:
        return cls(state["best"], state["known"])

    def __repr__(self) -> str:
        return f"Truecaser({len(self.best)} words)"


def detruecase(tokenized_line: str) -> str:
    """Moses ``detruecase.perl``: capitalise the first letter of every sentence-initial token."""
    return _DETRUECASER.detruecase(tokenized_line, return_str=True)
