"""What every search returns (:class:`Hypotheses`) and what every search object looks like (:class:`Search`).

Search objects are built by Hydra from ``sarnmt/conf/decoding/*.yaml`` and ``sarnmt/conf/val_decoding/*.yaml``
(``_target_`` is the registry): greedy (:class:`~sarnmt.decoding.greedy.GreedySearch`) and beam
(:class:`~sarnmt.decoding.beam.BeamSearch`), one loop (greedy is k = 1). Training's
final test, ``sarnmt.translate`` and ``sarnmt.evaluate`` all decode through them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from torch import Tensor, nn

NEG_INF = float("-inf")  # the score of an impossible or empty hypothesis


@dataclass
class Hypotheses:
    """Decoding results in batch order (one hypothesis per sentence).

    :param tokens: per sentence, the output ids without EOS.
    :param scores: per sentence, the summed log-probability (EOS included when emitted).
    :param normalized_scores: per sentence, the score the search ranked by (after the length penalty); equal to
        ``scores`` for greedy search.
    :param src_attention: per sentence, α of shape (n, S_i) over its real source positions (n = len + EOS, or len
        when the length limit stopped it), when requested.
    :param tgt_attention: per sentence, the variant's history attention of shape (n, n) (row t over history items
        0..t, zero above the diagonal), when requested and the variant has one.
    :param nbest: per sentence, its n best finished hypotheses, best first, when n > 1 was asked for (fewer when
        fewer finished).
    """

    tokens: list[list[int]]
    scores: list[float]
    normalized_scores: list[float] = field(default_factory=list)
    src_attention: list[Tensor] = field(default_factory=list)
    tgt_attention: list[Tensor] = field(default_factory=list)
    nbest: list[list[NBestEntry]] = field(default_factory=list)


@dataclass
class NBestEntry:
    """One of a sentence's n best hypotheses.  :param tokens: ids without EOS.  :param score: summed
    log-probability.  :param normalized_score: what the search ranked by."""

    tokens: list[int]
    score: float
    normalized_score: float


class Search(Protocol):
    """A configured search: ``search(model, src, src_mask, return_attention) -> Hypotheses``."""

    max_len_a: float
    max_len_b: int
    beam_size: int

    def __call__(
        self, model: nn.Module, src: Tensor, src_mask: Tensor, return_attention: bool = False, nbest: int = 1
    ) -> Hypotheses:
        """:param model: any model the factory builds (anything with ``encode``/``step``).
        :param src: shape (B, S).  :param src_mask: shape (B, S).  :param nbest: also return the n best."""
        ...

    def settings(self) -> dict[str, Any]:
        """The decoding settings, JSON-able, for records."""
        ...


def build_search(node: Any, key: str = "decoding") -> Search:
    """The search object of a config node (``cfg.decoding``).  :param key: the node's key, for messages.

    :raises InputError: naming ``<key>.<setting>`` for a setting the search refuses (``decoding.min_len=-1: must be
        0 or more``), instead of Hydra's wrapped error.
    """
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    from sarnmt.errors import InputError

    try:
        return instantiate(node)
    except InstantiationException as err:
        if isinstance(err.__cause__, InputError):
            raise InputError(f"{key}.{err.__cause__}") from err.__cause__
        raise


def square(rows: list[Tensor]) -> Tensor:
    """Stack history-attention rows of growing length 1..n into a lower-triangular (n, n) matrix."""
    steps = len(rows)
    matrix = rows[0].new_zeros(steps, steps)
    for t, row in enumerate(rows):
        matrix[t, : row.numel()] = row
    return matrix
