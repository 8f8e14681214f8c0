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


# The bounds of the decoding settings, checked where a decoding config is read (:func:`check_decoding`): each value
# beyond them exhausts memory or time or gives nonsense, and no real setting comes near them.
MAX_BEAM_SIZE = 256  # memory and time grow with k: k live hypotheses and 2k candidates per sentence and step
MAX_LEN_A = 10.0  # an output more than ten times its source's length is no translation
MAX_OUTPUT_TOKENS = 10_000  # max_len_b and min_len: every step of a longer output attends over all the ones before
MAX_BATCH_TOKENS = 1_000_000  # batch_tokens: the batch's source memory and its beams' states grow with it


def check_decoding(node: Any, key: str = "decoding", max_source_tokens: int | None = None) -> None:
    """The one check of a decoding config's settings, where they enter (a command's composed config), before it is
    built; the search objects trust what passed it. Each with :func:`~sarnmt.errors.check_range`: ``beam_size`` in
    1..:data:`MAX_BEAM_SIZE`, ``max_len_a`` in 0..:data:`MAX_LEN_A`, ``max_len_b`` and ``min_len`` in
    0..:data:`MAX_OUTPUT_TOKENS`, ``batch_tokens`` (when set) in 1..:data:`MAX_BATCH_TOKENS` (finite numbers; the
    length penalty checks its own, :mod:`.penalties`); then a ``min_len`` that no output could reach, as every output
    would be cut at its limit: with ``max_len_a=0`` the longest output is ``max_len_b`` tokens (at least 1, EOS
    included), whatever the source.

    :param max_source_tokens: the longest source a command decodes (``max_input_tokens``, checked too:
        :func:`~sarnmt.decoding.input_limit.check_max_input_tokens`), when it has one: then the longest output of a
        ``max_len_a`` above 0 is ``max_len_a·(max_source_tokens + 1) + max_len_b`` tokens, EOS included.
    :raises InputError: ``<key>.<setting>=<value>: must be ...``, naming the bound and what it protects.
    """
    from sarnmt.decoding.input_limit import check_max_input_tokens
    from sarnmt.errors import InputError, check_range

    get = node.get if hasattr(node, "get") else (lambda _name, default=None: default)
    bounds = (
        ("beam_size", 1, MAX_BEAM_SIZE, "memory and time grow with the beam: 2k candidates per sentence and step"),
        ("max_len_a", 0, MAX_LEN_A, "an output more than ten times its source is no translation"),
        ("max_len_b", 0, MAX_OUTPUT_TOKENS, "every output token attends over the ones before"),
        ("min_len", 0, MAX_OUTPUT_TOKENS, "every output token attends over the ones before"),
        ("batch_tokens", 1, MAX_BATCH_TOKENS, "the batch's source memory and beam states grow with it"),
    )
    for name, low, high, why in bounds:
        if get(name) is not None:
            check_range(f"{key}.{name}", get(name), low, high, why)
    if max_source_tokens is not None:
        check_max_input_tokens(max_source_tokens)
    a, b, least = get("max_len_a"), get("max_len_b"), get("min_len")
    if not least or a is None or b is None:
        return
    if a == 0:  # penalties.max_lengths: b tokens, at least 1 (EOS), whatever the source
        longest, how = max(1, b), f"{key}.max_len_a=0, {key}.max_len_b={b}"
    elif max_source_tokens is not None:  # the source's EOS counted
        longest = max(1, int(a * (max_source_tokens + 1) + b))
        how = f"{key}.max_len_a={a} × (max_input_tokens={max_source_tokens:,} + 1) + {key}.max_len_b={b}"
    else:
        return
    if least >= longest:
        raise InputError(
            f"{key}.min_len={least:,}: more than any output can have, so none could end: the longest is {longest:,} "
            f"tokens, EOS included ({how}); lower min_len"
        )


def build_search(node: Any, key: str = "decoding", max_source_tokens: int | None = None) -> Search:
    """The search object of a config node (``cfg.decoding``), its settings checked first (:func:`check_decoding`).

    :param key: the node's key, for messages.  :param max_source_tokens: see :func:`check_decoding`.
    :raises InputError: naming ``<key>.<setting>`` for a setting out of range or one the search refuses
        (``decoding.min_len=-1: must be 0 or more``), instead of Hydra's wrapped error.
    """
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    from sarnmt.errors import InputError

    check_decoding(node, key, max_source_tokens)
    try:
        return instantiate(node)
    except InstantiationException as err:
        if isinstance(err.__cause__, InputError):
            raise InputError(f"{key}.{err.__cause__}") from err.__cause__
        raise
