"""Scoring rules of search, kept apart from the search loops: the length penalty and the maximum output length.

Length penalty (docs/models.md §Decoding; GNMT, Wu et al. 2016 eq. 14), applied to a finished hypothesis's summed
log-probability ``score`` of length ``n`` tokens (EOS included when it was emitted)::

    normalised = score / lp(n),   lp(n) = ((offset + n) / (offset + 1)) ** alpha

- ``alpha=1, offset=0``: dl4mt's ``translate.py -n``, score divided by the length including EOS (the default);
- ``alpha=0``: no normalisation (raw log-probability);
- ``alpha=0.6, offset=5``: GNMT's length penalty.

Maximum length: ``max_len_a · |source| + max_len_b`` tokens (EOS included), at least 1 (fairseq's rule).
"""

from __future__ import annotations

from torch import Tensor

from sarnmt.errors import check_range

MAX_ALPHA = 5.0  # lp(n) = n**5 stays finite in float32 for the longest output sarnmt allows (14,010 tokens: 5e20)
MAX_OFFSET = 1e6


class LengthPenalty:
    """:param alpha: the exponent (0 switches normalisation off), 0..:data:`MAX_ALPHA`.  :param offset: GNMT's
    constant (5), 0 for dl4mt; 0..:data:`MAX_OFFSET`.

    :raises InputError: for a value out of its range, nan or inf (one line naming ``length_penalty.<key>``)."""

    def __init__(self, alpha: float = 1.0, offset: float = 0.0) -> None:
        check_range("length_penalty.alpha", alpha, 0, MAX_ALPHA, "a larger power of a long output's length overflows")
        check_range("length_penalty.offset", offset, 0, MAX_OFFSET, "beyond it every length gets the same penalty")
        self.alpha, self.offset = float(alpha), float(offset)

    def __call__(self, scores: Tensor, length: Tensor) -> Tensor:
        """:param scores: summed log-probabilities, any shape.  :param length: n, the hypotheses' common length, a
        long tensor of shape () on their device (the divisor lp(n) is formed there in float64, rounded once to the
        scores' dtype by the division).  :returns: the normalised scores, same shape."""
        if self.alpha == 0.0:
            return scores
        return scores / ((length.double() + self.offset) / (self.offset + 1.0)) ** self.alpha

    def settings(self) -> dict[str, float]:
        return {"alpha": self.alpha, "offset": self.offset}

    def __repr__(self) -> str:
        return f"LengthPenalty(alpha={self.alpha}, offset={self.offset})"


def max_lengths(src_mask: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """Per-sentence output length limit ``a·|src| + b`` (EOS included), at least 1.

    :param src_mask: shape (B, S), True on real source positions.  :param max_len_a: 0 or more, trusted
        (:func:`~sarnmt.decoding.search.check_decoding` checks ``decoding.max_len_a``).
    :returns: shape (B,), long, on the same device.
    """
    assert max_len_a >= 0, f"max_len_a={max_len_a} reached the search unchecked (check_decoding)"
    src_lengths = src_mask.sum(dim=1)
    return (max_len_a * src_lengths.double() + max_len_b).long().clamp(min=1)
