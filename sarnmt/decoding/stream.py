"""Decoding a stream of encoded sentences in batches, results in input order (``translate`` and ``evaluate``).

The input is read ``chunk`` sentences at a time (``batch_size × chunk_batches``); within a chunk the sentences are
sorted by length so that batches hold sentences of similar length, decoded, and yielded back in input order before
the next chunk is read, so any input size runs in bounded memory. Empty sentences (no source ids) are not decoded:
they give an empty translation, so the number of outputs always equals the number of inputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from sarnmt.data.loading.batching import pad_sequences
from sarnmt.decoding.search import NBestEntry, Search
from sarnmt.errors import check_range


@dataclass
class Translation:
    """One sentence's result.  :param tokens: output ids without EOS.  :param score: summed log-probability.
    :param normalized_score: what the search ranked by.  :param src_attention: (n, S_i + 1) incl. the source EOS,
    or None.  :param tgt_attention: (n, n) or None.  :param nbest: the n best hypotheses, best first (n > 1 only)."""

    tokens: list[int]
    score: float
    normalized_score: float
    src_attention: Tensor | None = None
    tgt_attention: Tensor | None = None
    nbest: list[NBestEntry] = field(default_factory=list)


def decode_batch(
    net: nn.Module,
    search: Search,
    sources: list[list[int]],
    device: torch.device,
    return_attention: bool,
    nbest: int = 1,
) -> list[Translation]:
    """Decode non-empty sources as one batch.  :param sources: source ids without EOS."""
    src, src_mask = pad_sequences(sources)
    hyps = search(net, src.to(device), src_mask.to(device), return_attention, nbest)
    out = []
    for k, tokens in enumerate(hyps.tokens):
        result = Translation(tokens, hyps.scores[k], hyps.normalized_scores[k])
        if nbest > 1:
            result.nbest = hyps.nbest[k]
        if return_attention:
            result.src_attention = hyps.src_attention[k].cpu() if hyps.src_attention else None
            result.tgt_attention = hyps.tgt_attention[k].cpu() if hyps.tgt_attention else None
        out.append(result)
    return out


def decode_stream(
    net: nn.Module,
    search: Search,
    sources: Iterable[list[int]],
    batch_size: int,
    device: torch.device,
    return_attention: bool = False,
    chunk_batches: int = 20,
    nbest: int = 1,
) -> Iterator[Translation]:
    """Translations of ``sources`` (ids without EOS), one per input, in input order (an empty source: an empty
    translation, and one empty entry in its n-best list)."""
    check_range("batch_size", batch_size, 1)
    iterator = iter(sources)
    while chunk := list(itertools.islice(iterator, batch_size * max(1, chunk_batches))):
        results: list[Translation | None] = [None] * len(chunk)
        order = sorted((i for i, ids in enumerate(chunk) if ids), key=lambda i: -len(chunk[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            decoded = decode_batch(net, search, [chunk[i] for i in rows], device, return_attention, nbest)
            for i, result in zip(rows, decoded, strict=True):
                results[i] = result
        empty = [NBestEntry([], 0.0, 0.0)] if nbest > 1 else []
        for result in results:
            yield result if result is not None else Translation([], 0.0, 0.0, nbest=empty)
