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

With one seed per cell both reduce to the usual single-system tests. A language model's perplexity (Table 6) is
handled alike over test lines (:class:`Perplexity`: per line the summed NLL and the word count; the t-test over
each line's mean log-likelihood per word, the bootstrap over lines, lower perplexity being better).
"""

from __future__ import annotations

import math
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

    def resampled(self, weights: np.ndarray, stats: np.ndarray) -> np.ndarray:
        return np.rint(weights @ np.asarray(stats, dtype=np.float64)).astype(np.int64)


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

    def resampled(self, weights: np.ndarray, stats: np.ndarray) -> np.ndarray:
        return weights @ np.asarray(stats, dtype=np.float64)


METRIC_SCORERS = {**{name: Bleu(name) for name in METRIC_SETTINGS}, "ppl": Perplexity()}


def corpus_score(stats: np.ndarray | Sequence[Sequence[float]], metric: str) -> float:
    """The corpus score (BLEU, perplexity) of the summed statistics of the given sentences or lines."""
    return METRIC_SCORERS[metric].corpus(np.asarray(stats, dtype=np.float64).sum(axis=0).tolist())


def sentence_scores(stats: Sequence[Sequence[int]], metric: str) -> list[float]:
    """Sentence BLEU of every sentence (exponential smoothing, effective order)."""
    return METRIC_SCORERS[metric].items(np.asarray(stats))


@dataclass
class CellScore:
    """A cell's runs: ``scores`` one corpus score per seed; ``p_t_test``/``p_bootstrap`` against the baseline (None
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
    """``(p_t_test, p_bootstrap)`` of H1: ``system`` (its seeds' statistics) is better than ``baseline`` (higher
    BLEU, lower perplexity)."""
    n = {len(r) for r in (*system, *baseline)}
    if len(n) != 1:
        raise ValueError(f"runs of one comparison have different numbers of test sentences: {sorted(n)}")
    scorer = METRIC_SCORERS[metric]
    sys_sent = np.mean([scorer.items(np.asarray(r)) for r in system], axis=0)
    base_sent = np.mean([scorer.items(np.asarray(r)) for r in baseline], axis=0)
    _, p_t = paired_t_test(sys_sent.tolist(), base_sent.tolist())
    size = n.pop()
    rng = np.random.default_rng(seed)
    weights = np.zeros((n_samples, size))
    np.add.at(weights, (np.repeat(np.arange(n_samples), size), rng.integers(0, size, n_samples * size)), 1.0)

    def resampled_mean(runs: Sequence[np.ndarray]) -> np.ndarray:
        sums = [scorer.resampled(weights, r) for r in runs]
        return np.mean([[scorer.corpus(row.tolist()) for row in s] for s in sums], axis=0)

    gain = resampled_mean(system) - resampled_mean(baseline)
    not_better = int(np.sum(gain <= 0 if scorer.higher_is_better else gain >= 0))
    return p_t, (1 + not_better) / (1 + n_samples)
