"""What the benchmark runs on: length-sorted batches of sentence pairs, one set per workload.

A workload (``lengths.<name>`` in ``sarnmt/conf/bench.yaml``) names a parallel corpus (``src`` / ``tgt``, plain or
``.gz``: Multi30K's training set, or the WMT news sample with sentences up to 50 tokens, under ``../shared/data``). When
its files are there the sentences are real: their lengths and word repetitions are the corpus's, with every whitespace
token hashed to an id in [2, V) (speed depends on lengths and vocabulary size, not on which words they are). Otherwise,
or with ``src: null``, the pairs are synthetic, of random lengths drawn from ``synthetic`` (a triangular distribution
over [low, high] with the given mean), and the record says so. Batches are built the way training builds them
(:mod:`sarnmt.data.loading.sampler`): the whole set sorted by ``max(source length, target length)`` and cut into batches
of ``batch_size`` sentences, so that padding stays as small as in training; the timed batches are spread evenly over
that sorted list (short, middle and long ones).
"""

from __future__ import annotations

import logging
import random
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch import Tensor

from sarnmt.data.loading.batching import pad_sequences
from sarnmt.data.text.reading import read_parallel

log = logging.getLogger("sarnmt.bench")

Pair = tuple[list[int], list[int]]


@dataclass
class Workload:
    """:param pairs: (source ids, target ids) without EOS.  :param description: where they came from."""

    pairs: list[Pair]
    description: str


@dataclass
class TrainBatch:
    """:param src: (B, S) with EOS.  :param src_mask: (B, S).  :param tgt: (B, T) with EOS.  :param tgt_mask: (B, T)."""

    src: Tensor
    src_mask: Tensor
    tgt: Tensor
    tgt_mask: Tensor

    @property
    def tokens(self) -> int:
        """Target tokens, EOS included (what training throughput counts)."""
        return int(self.tgt_mask.sum())

    def to(self, device: torch.device) -> TrainBatch:
        return TrainBatch(*(t.to(device) for t in (self.src, self.src_mask, self.tgt, self.tgt_mask)))


def hashed_ids(line: str, vocab: int) -> list[int]:
    """Whitespace tokens of ``line`` as stable ids in [2, vocab) (0 is EOS, 1 UNK)."""
    return [2 + zlib.crc32(token.encode()) % (vocab - 2) for token in line.split()]


def corpus_workload(src_path: str | Path, tgt_path: str | Path, vocab: int, max_len: int) -> Workload:
    """Every pair of a parallel corpus whose sides are both non-empty and shorter than ``max_len`` tokens."""
    src_lines, tgt_lines = read_parallel(src_path, tgt_path)
    pairs = [
        (hashed_ids(s, vocab), hashed_ids(t, vocab))
        for s, t in zip(src_lines, tgt_lines, strict=True)
        if 0 < len(s.split()) < max_len and 0 < len(t.split()) < max_len
    ]
    return Workload(pairs, f"{src_path} / {tgt_path} (real lengths, hashed ids)")


def synthetic_workload(sentences: int, vocab: int, lengths: tuple[int, int, float], seed: int) -> Workload:
    """Random ids; source and target lengths drawn independently from the triangular distribution over
    [low, high] whose mean is ``mean`` (low + high + mode = 3·mean), rounded.

    :param lengths: (low, high, mean), low <= mean <= high and the mode it implies within [low, high]."""
    low, high, mean = lengths
    mode = 3 * mean - low - high
    if not low <= mode <= high:
        raise ValueError(
            f"bench: synthetic lengths [{low}, {high}] cannot have mean {mean} (a triangular "
            f"distribution's mean lies in [{(2 * low + high) / 3:g}, {(low + 2 * high) / 3:g}])"
        )
    rng = random.Random(seed)

    def sentence() -> list[int]:
        return [rng.randrange(2, vocab) for _ in range(round(rng.triangular(low, high, mode)))]

    pairs = [(sentence(), sentence()) for _ in range(sentences)]
    return Workload(pairs, f"synthetic sentences of {low}-{high} tokens, mean {mean:g}")


def make_workload(spec: DictConfig, vocab: int, sentences: int, seed: int) -> Workload:
    """The pairs of one workload: its corpus when ``spec.src`` and ``spec.tgt`` exist, else ``sentences`` synthetic
    pairs of ``spec.synthetic`` lengths (with a warning when the corpus was named but is missing).

    :param spec: ``src``, ``tgt`` (paths or null), ``max_len``, ``synthetic`` ([low, high, mean])."""
    if spec.src is not None and spec.tgt is not None:
        src, tgt = Path(spec.src), Path(spec.tgt)
        if src.is_file() and tgt.is_file():
            return corpus_workload(src, tgt, vocab, spec.max_len)
        log.warning("bench: %s / %s not found: synthetic sentences instead", src, tgt)
    return synthetic_workload(sentences, vocab, tuple(spec.synthetic), seed)


def sorted_batches(pairs: list[Pair], batch_size: int, count: int) -> list[TrainBatch]:
    """``count`` batches of ``batch_size`` pairs as training cuts them, spread evenly over the length-sorted set.

    The pairs are sorted by ``max(source, target length)`` (ties by target, then source length) and cut into
    consecutive batches; batch i of the ``count`` returned is the middle one of the i-th of ``count`` equal stretches,
    so the batches come out shortest first.
    :raises ValueError: if there are fewer than ``count`` full batches.
    """
    ordered = sorted(pairs, key=lambda p: (max(len(p[0]), len(p[1])), len(p[1]), len(p[0])))
    full = len(ordered) // batch_size
    if full < count:
        raise ValueError(f"bench: {len(pairs)} sentence pairs make {full} batches of {batch_size}, {count} needed")
    batches = []
    for i in range(count):
        start = ((2 * i + 1) * full // (2 * count)) * batch_size
        chunk = ordered[start : start + batch_size]
        batches.append(TrainBatch(*pad_sequences([s for s, _ in chunk]), *pad_sequences([t for _, t in chunk])))
    return batches


def fixed_batch(batch_size: int, length: int, vocab: int, seed: int) -> TrainBatch:
    """A batch of ``batch_size`` pairs whose sides are all exactly ``length`` tokens (plus EOS): for the plots."""
    gen = torch.Generator().manual_seed(seed)
    ids = [torch.randint(2, vocab, (batch_size, length), generator=gen).tolist() for _ in range(2)]
    return TrainBatch(*pad_sequences(ids[0]), *pad_sequences(ids[1]))
