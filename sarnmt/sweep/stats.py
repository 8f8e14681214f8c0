"""BLEU of a table cell over its seeds, and its significance against the baseline row, from per-sentence
statistics (no text needed).

A job stores, for every test sentence and metric, sacrebleu's sufficient statistics (hypothesis and reference
length, matching and total n-grams for n = 1..4): :func:`sentence_statistics`. From them:

- corpus BLEU of one run is sacrebleu's score of the summed statistics (:func:`corpus_score`), equal to
  ``corpus_score`` on the text;
- a cell is the mean and sample standard deviation of its runs' corpus BLEU (one run per seed);
- **the paper's one-tailed paired t-test** runs over test sentences: each sentence's sample is its sentence BLEU
  (exponential smoothing, effective order, as ``sentence_score``) averaged over the cell's seeds, paired with the
  baseline's, H1: the system's mean is higher (:func:`sarnmt.evaluation.significance.paired_t_test`);
- **the paired bootstrap** (Koehn 2004) resamples test sentences with replacement ``n_samples`` times (seeded); in
  each sample both cells' BLEU is the mean over their seeds of the corpus BLEU of the resampled sentences, and
  p = (1 + #samples where the system is not better) / (1 + n_samples).

With one seed per cell both reduce to the usual single-system tests.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from sarnmt.evaluation.significance import paired_t_test

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


def corpus_score(stats: np.ndarray | Sequence[Sequence[int]], metric: str) -> float:
    """Corpus BLEU of the summed statistics of the given sentences."""
    total = np.asarray(stats, dtype=np.int64).sum(axis=0)
    return float(_metric(metric)._compute_score_from_stats(total.tolist()).score)


def sentence_scores(stats: Sequence[Sequence[int]], metric: str) -> list[float]:
    """Sentence BLEU of every sentence (exponential smoothing, effective order)."""
    m = _metric(metric, effective_order=True)
    return [float(m._compute_score_from_stats(list(row)).score) for row in stats]


@dataclass
class CellScore:
    """A cell's runs: ``scores`` one corpus BLEU per seed; ``p_t_test``/``p_bootstrap`` against the baseline (None
    for the baseline itself, or when a test cannot run)."""

    scores: list[float]
    p_t_test: float | None = None
    p_bootstrap: float | None = None

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores)

    @property
    def sd(self) -> float | None:
        return statistics.stdev(self.scores) if len(self.scores) > 1 else None


def cell_score(runs: Sequence[np.ndarray], metric: str) -> CellScore:
    return CellScore([corpus_score(r, metric) for r in runs])


def compare(
    system: Sequence[np.ndarray], baseline: Sequence[np.ndarray], metric: str, n_samples: int = 1000, seed: int = 12345
) -> tuple[float, float]:
    """``(p_t_test, p_bootstrap)`` of H1: ``system`` (its seeds' statistics) is better than ``baseline``."""
    n = {len(r) for r in (*system, *baseline)}
    if len(n) != 1:
        raise ValueError(f"runs of one comparison have different numbers of test sentences: {sorted(n)}")
    sys_sent = np.mean([sentence_scores(r, metric) for r in system], axis=0)
    base_sent = np.mean([sentence_scores(r, metric) for r in baseline], axis=0)
    _, p_t = paired_t_test(sys_sent.tolist(), base_sent.tolist())
    size = n.pop()
    rng = np.random.default_rng(seed)
    weights = np.zeros((n_samples, size))
    np.add.at(weights, (np.repeat(np.arange(n_samples), size), rng.integers(0, size, n_samples * size)), 1.0)
    m = _metric(metric)

    def resampled_mean(runs: Sequence[np.ndarray]) -> np.ndarray:
        sums = [np.rint(weights @ np.asarray(r, dtype=np.float64)).astype(np.int64) for r in runs]
        return np.mean([[m._compute_score_from_stats(row.tolist()).score for row in s] for s in sums], axis=0)

    not_better = int(np.sum(resampled_mean(system) - resampled_mean(baseline) <= 0))
    return p_t, (1 + not_better) / (1 + n_samples)
