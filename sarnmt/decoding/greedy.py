"""Greedy search: the argmax at every step. It is beam search with k = 1 on the one search loop
(:func:`sarnmt.decoding.beam.beam_decode`): with one slot, an EOS finishes a sentence exactly when it is the argmax
and the live hypothesis is extended by the argmax otherwise. Scores are raw summed log-probabilities (no length
penalty: with one hypothesis there is nothing to rank).
"""

from __future__ import annotations

from torch import Tensor, nn

from sarnmt.decoding.beam import BeamSearch, beam_decode
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.decoding.search import Hypotheses

__all__ = ["GreedySearch", "Hypotheses", "greedy_decode"]

RAW = LengthPenalty(alpha=0.0)


def greedy_decode(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
    return_attention: bool = False,
    min_len: int = 0,
) -> Hypotheses:
    """Greedy search for a batch.  :param src: shape (B, S).  :param src_mask: shape (B, S)."""
    return beam_decode(model, src, src_mask, 1, RAW, max_len_a, max_len_b, return_attention, 1, min_len)


class GreedySearch(BeamSearch):
    """Greedy search as a configured object (``sarnmt/conf/decoding/greedy.yaml``,
    ``sarnmt/conf/val_decoding/greedy.yaml``).

    :param max_len_a: output length limit ``a·|src| + b``.  :param max_len_b: see ``max_len_a``.
    :param min_len: no EOS before this many tokens (0: none).
    :param batch_tokens: source tokens a batch (:class:`~sarnmt.decoding.beam.BeamSearch`); None: by sentences.
    """

    name = "greedy"

    def __init__(
        self, max_len_a: float = 2.0, max_len_b: int = 10, min_len: int = 0, batch_tokens: int | None = None
    ) -> None:
        super().__init__(1, RAW, max_len_a, max_len_b, min_len, batch_tokens)

    def __repr__(self) -> str:
        return f"GreedySearch(max_len_a={self.max_len_a}, max_len_b={self.max_len_b}, min_len={self.min_len})"
