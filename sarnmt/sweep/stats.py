"""Per-sentence statistics and the corpus scores computed from them (no text needed).

A job stores, for every test sentence and metric, sacrebleu's sufficient statistics (hypothesis and reference
length, matching and total n-grams for n = 1..4): :func:`sentence_statistics`. From them corpus BLEU of one run is
sacrebleu's score of the summed statistics (:func:`corpus_score`, and :func:`corpus_scores` for many sums at once,
equal to it), equal to ``corpus_score`` on the text. A language model's perplexity (Table 6) is handled alike over
test lines (:class:`Perplexity`: per line the summed NLL and the word count). The tables' significance tests over
these statistics are in :mod:`sarnmt.sweep.seed_tests`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from sacrebleu.metrics import BLEU

METRIC_SETTINGS = {"bleu_tok": ("none", False), "bleu_tok_lc": ("none", True), "bleu": ("13a", False)}


def _metric(name: str, effective_order: bool = False) -> BLEU:
    tokenize, lowercase = METRIC_SETTINGS[name]
    return BLEU(tokenize=tokenize, lowercase=lowercase, force=True, effective_order=effective_order)


def sentence_statistics(
    hyps: Sequence[str], refs: Sequence[str], metric: str, tokenize: str | None = None
) -> list[list[int]]:
    """Per sentence: ``[hyp_len, ref_len, correct_1..4, total_1..4]`` under ``metric`` (a key of
    :data:`METRIC_SETTINGS`); ``tokenize`` replaces the metric's tokenizer (``zh`` for ``bleu`` on Chinese)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    settings = METRIC_SETTINGS[metric]
    bleu = BLEU(tokenize=tokenize or settings[0], lowercase=settings[1], force=True)
    stats = bleu._extract_corpus_statistics(list(hyps), [list(refs)])
    return [[int(x) for x in row] for row in stats]


class Bleu:
    """A BLEU metric of :data:`METRIC_SETTINGS` over per-sentence statistics (width 10, integers)."""

    width = 10
    higher_is_better = True

    def __init__(self, name: str) -> None:
        self.name = name

    def corpus(self, summed: Sequence[float]) -> float:
        return float(_metric(self.name)._compute_score_from_stats([int(x) for x in summed]).score)

    def items(self, stats: np.ndarray) -> list[float]:
        """Sentence BLEU of every sentence (exponential smoothing, effective order)."""
        m = _metric(self.name, effective_order=True)
        return [float(m._compute_score_from_stats([int(x) for x in row]).score) for row in stats]

    def corpus_many(self, summed: np.ndarray) -> np.ndarray:
        """Corpus BLEU of every row of summed statistics ``(..., 10)``: sacrebleu's corpus formula (brevity penalty,
        geometric mean of the four precisions, 'exp' smoothing of a zero count, 0 without any match), vectorised."""
        summed = np.asarray(summed, dtype=np.float64)
        sys_len, ref_len = summed[..., 0], summed[..., 1]
        correct, total = summed[..., 2:6], summed[..., 6:10]
        shorter = sys_len < ref_len
        bp = np.where(shorter, np.exp(1.0 - ref_len / np.where(sys_len > 0, sys_len, 1.0)), 1.0)
        bp = np.where(shorter & (sys_len <= 0), 0.0, bp)
        alive = np.ones(sys_len.shape, dtype=bool)  # sacrebleu stops at the first order without n-grams
        smooth = np.ones(sys_len.shape)
        log_sum = np.zeros(sys_len.shape)
        for n in range(4):
            c, t = correct[..., n], total[..., n]
            alive &= t > 0
            zero = alive & (c == 0)
            smooth = np.where(zero, smooth * 2.0, smooth)
            safe = np.where(t > 0, t, 1.0)
            precision = np.where(zero, 100.0 / (smooth * safe), 100.0 * c / safe)
            log_sum += np.where(alive, np.log(np.where(alive, precision, 1.0)), -9999999999.0)
        return np.where(correct.sum(axis=-1) > 0, bp * np.exp(log_sum / 4.0), 0.0)


class Perplexity:
    """A language model's perplexity over per-line statistics ``[NLL summed over the line's words, words]`` (width
    2): exp(Σ NLL / Σ words); an item's score for the t-test is its mean log-likelihood per word (higher is
    better, as perplexity is lower)."""

    width = 2
    higher_is_better = False

    def corpus(self, summed: Sequence[float]) -> float:
        return math.exp(float(summed[0]) / float(summed[1]))

    def items(self, stats: np.ndarray) -> list[float]:
        stats = np.asarray(stats, dtype=np.float64)
        return (-stats[:, 0] / stats[:, 1]).tolist()

    def corpus_many(self, summed: np.ndarray) -> np.ndarray:
        """Perplexity of every row of summed statistics ``(..., 2)``."""
        summed = np.asarray(summed, dtype=np.float64)
        return np.exp(summed[..., 0] / summed[..., 1])


METRIC_SCORERS = {**{name: Bleu(name) for name in METRIC_SETTINGS}, "ppl": Perplexity()}


def corpus_score(stats: np.ndarray | Sequence[Sequence[float]], metric: str) -> float:
    """The corpus score (BLEU, perplexity) of the summed statistics of the given sentences or lines."""
    return METRIC_SCORERS[metric].corpus(np.asarray(stats, dtype=np.float64).sum(axis=0).tolist())


def corpus_scores(summed: np.ndarray, metric: str) -> np.ndarray:
    """The corpus score of every row of summed statistics ``(..., width)`` at once (equal to :func:`corpus_score`)."""
    return METRIC_SCORERS[metric].corpus_many(summed)


def sentence_scores(stats: Sequence[Sequence[int]], metric: str) -> list[float]:
    """Sentence BLEU of every sentence (exponential smoothing, effective order)."""
    return METRIC_SCORERS[metric].items(np.asarray(stats))
