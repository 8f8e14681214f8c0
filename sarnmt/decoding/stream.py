"""Decoding a stream of encoded sentences in batches, results in input order (``translate`` and ``evaluate``).

The input is read a chunk at a time (``chunk_batches`` batches' worth); within a chunk the sentences are sorted by
length so that batches hold sentences of similar length, decoded, and yielded back in input order before the next
chunk is read, so any input size runs in bounded memory. Empty sentences (no source ids) are not decoded: they give
an empty translation, so the number of outputs always equals the number of inputs.

A batch holds ``batch_size`` sentences, or, with ``batch_tokens`` (the search's ``decoding.batch_tokens``; on a GPU
:data:`GPU_BATCH_TOKENS` when it is unset), as many sentences as fit in that many padded source tokens: rows ×
(longest source + EOS) <= ``batch_tokens`` (a longer sentence alone). Short sentences then come many to a batch and
long ones few, so the device gets about the same work per batch. Out of device memory, the chunk is decoded again
with ``batch_tokens`` halved (a warning says so; later chunks keep the smaller size: :func:`halve_on_oom`).

Why 16,384 tokens on a GPU: at paper size a beam-5 step scores 5 rows a sentence against V = 50,000 outputs; the
H100 records of the GPU check (sweeps/results/gpu/) grow with the batch up to their largest, 256 sentences (5,600 source
tokens at WMT lengths, 1,280 beam rows), still host-bound, and the output layer's product reaches the card's matrix
rate near 2,000–4,000 rows. 16,384 tokens is about 700 WMT sentences, 3,500 beam rows: past that point, well inside
memory (its logits are 0.35 GB in bf16). ``make bench`` with ``plot_batch_sizes`` shows where sentences/s stop rising.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from sarnmt.data.loading.batching import pad_sequences
from sarnmt.decoding.search import NBestEntry, Search
from sarnmt.utils.oom import halve_on_oom

GPU_BATCH_TOKENS = 16_384  # source tokens a decoding batch on a GPU when decoding.batch_tokens is unset (docstring)


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
    batch_tokens: int | None = None,
) -> Iterator[Translation]:
    """Translations of ``sources`` (ids without EOS), one per input, in input order (an empty source: an empty
    translation, and one empty entry in its n-best list).

    :param batch_size: sentences a batch, 1 or more.  :param batch_tokens: source tokens a batch (module docstring),
        1 or more; None: the search's ``batch_tokens``, else :data:`GPU_BATCH_TOKENS` on a CUDA device, else
        ``batch_size`` sentences. Both are trusted: a command checks its ``batch_size`` where it enters, and
        :func:`~sarnmt.decoding.search.check_decoding` the search's ``batch_tokens``."""
    tokens = batch_tokens if batch_tokens is not None else getattr(search, "batch_tokens", None)
    if tokens is None and torch.device(device).type == "cuda":
        tokens = GPU_BATCH_TOKENS
    assert batch_size >= 1 and (tokens is None or tokens >= 1), "unchecked batch_size or batch_tokens"  # else no batch
    iterator = iter(sources)
    empty = [NBestEntry([], 0.0, 0.0)] if nbest > 1 else []
    while chunk := read_chunk(iterator, batch_size, tokens, chunk_batches):

        def decode_chunk(size: int | None) -> list[Translation | None]:
            results: list[Translation | None] = [None] * len(chunk)
            order = sorted((i for i, ids in enumerate(chunk) if ids), key=lambda i: -len(chunk[i]))
            for rows in cut(order, [len(ids) + 1 for ids in chunk], batch_size, size):
                decoded = decode_batch(net, search, [chunk[i] for i in rows], device, return_attention, nbest)
                for i, result in zip(rows, decoded, strict=True):
                    results[i] = result
            return results

        if tokens is None:
            results = decode_chunk(None)
        else:
            tokens, results = halve_on_oom(decode_chunk, tokens, what="decoding.batch_tokens")
        for result in results:
            yield result if result is not None else Translation([], 0.0, 0.0, nbest=empty)


def read_chunk(iterator: Iterator[list[int]], batch_size: int, tokens: int | None, batches: int) -> list[list[int]]:
    """The next chunk: ``batch_size × batches`` sentences, or sentences up to ``tokens × batches`` source tokens
    (EOS included; at least one sentence).  ``batches`` is trusted: ``translate`` checks its ``chunk_batches`` where
    it enters."""
    assert batches >= 1, f"chunk_batches={batches} reached the stream unchecked"
    if tokens is None:
        return list(itertools.islice(iterator, batch_size * batches))
    chunk, total = [], 0
    for ids in iterator:
        chunk.append(ids)
        total += len(ids) + 1
        if total >= tokens * batches:
            break
    return chunk


def cut(order: list[int], lengths: list[int], batch_size: int, tokens: int | None) -> Iterator[list[int]]:
    """Consecutive batches of ``order`` (sorted longest first): ``batch_size`` rows each, or, with ``tokens``, as
    many rows as keep rows × the batch's longest length (its first) within ``tokens`` (at least one row).

    :param lengths: each sentence's length, EOS included, by index."""
    if tokens is None:
        for start in range(0, len(order), batch_size):
            yield order[start : start + batch_size]
        return
    start = 0
    while start < len(order):
        rows = max(1, tokens // lengths[order[start]])
        yield order[start : start + rows]
        start += rows
