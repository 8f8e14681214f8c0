"""A table cell's score over its seeds and its significance against the baseline row, from the per-sentence
statistics of :mod:`sarnmt.sweep.stats`: a cell is the mean and sample standard deviation of its runs' corpus score
(one run per seed).

Significance, every test **one-sided**: H1 is "the row is better than the baseline" (higher BLEU, lower perplexity),
the convention of the paper's Table 1.

- **The seed-aware test** (the tables' markers, :func:`compare_cells`, :func:`welch_test`): **Welch's test on the
  seed means, its variance widened by the test set's resampling variance**. The unit of replication is a training
  run (Clark et al. 2011, "Better Hypothesis Testing for Statistical Machine Translation: Controlling for Optimizer
  Instability"), and the test sentences are a sample too (Koehn 2004, "Statistical Significance Tests for Machine
  Translation Evaluation"): both vary, the sentences paired across the two cells. With r_j the row's n_r run
  scores and b_j the baseline's n_b (each run's corpus score on the whole test set),

      Δ = mean(r) - mean(b),   Var = s_r²/n_r + s_b²/n_b + v_sent,

  s² the sample variances over runs (Welch 1947, "The generalization of 'Student's' problem when several
  different population variances are involved") and v_sent the variance of Δ over test sets: the variance of the
  resampled differences of Koehn's paired bootstrap over sentences with every run kept once (seeds pooled, the
  same resamples as the sentence-level bootstrap below). The degrees of freedom are Welch-Satterthwaite's
  (Satterthwaite 1946) on the two seed terms, v_sent counted as known (infinite df):
  df = Var² / ((s_r²/n_r)²/(n_r - 1) + (s_b²/n_b)²/(n_b - 1)). The one-sided p is Student's t's upper tail at
  t = Δ / sqrt(Var) (the sign turned for perplexity, where lower is better), and the 95% interval is
  Δ ± t_(0.975, df) sqrt(Var), so the interval's lower end (upper for perplexity) is beyond 0 exactly when
  p < 0.025. p has no floor: t's tails reach 0 at any df, so every run count of two or more can earn a marker.
  Its error rate under a true null is measured, against the old test's, by :mod:`sarnmt.sweep.calibration`:
  0.042-0.054 at nominal 0.05 and 0.006-0.013 at 0.01 over 2,000 null cells in each of three regimes (seed noise
  dominant, sentence noise dominant, both) at 3 v 3, 3 v 5 and 5 v 5 runs. (One run's own sentence-level noise
  enters both s² and v_sent; the simulation, whose runs have it, shows no excess caution from it.) A cell with
  one run, or a baseline with one, gets no seed-aware test (``n/a (1 run)``): its run-to-run spread is unknown.
- **The two-level bootstrap** (the seed-aware test of the 8-epoch tables until issue 42, kept by name for the
  calibration and as the CSV's ``p_two_level``: :func:`two_level_test`): each resample draws each cell's runs
  with replacement, independently for the row and the baseline, then one draw of test sentences common to both,
  recomputes every drawn run's corpus score and takes the difference of the two means over the drawn runs
  (Davison & Hinkley 1997, §3.8); p = (1 + #{resamples where the row is not better}) / (1 + resamples). With
  3-5 runs it is too liberal where the seed noise dominates: resampling n runs shrinks their variance by
  (n - 1)/n, and its tails are normal where a t with few degrees of freedom applies (measured: 11.9% rejections at
  nominal 5% and 5.9% at nominal 1% at 3 v 3, :mod:`sarnmt.sweep.calibration`).
- **The sentence-level tests, seeds pooled** (the paper's markers): the paper's one-tailed paired t-test over test
  sentences, each sentence's sample its sentence BLEU (exponential smoothing, effective order, as
  ``sentence_score``) averaged over the cell's seeds, paired with the baseline's
  (:func:`sarnmt.evaluation.significance.paired_t_test`); and the paired bootstrap over test sentences alone
  (Koehn 2004; :func:`bootstrap_differences` with ``resample_runs=False``), each cell's score the mean over all its
  seeds. Both treat the test sentences, not the runs, as the sample, so one lucky seed can make them significant.

Resamples: :class:`Resampling` (10,000 by default from numpy's PCG64 seeded 12345, processed in blocks of
:data:`BLOCK` so memory stays bounded): one pass gives v_sent, the sentence-level bootstrap and the two-level
bootstrap. A bootstrap p's Monte Carlo standard error, sqrt(p(1 - p) / resamples), is 0.0022 at p = 0.05 (below
0.005 needs at least 1,900); v_sent's relative standard error is about sqrt(2 / resamples), 1.4% at 10,000.

A language model's perplexity (Table 6) is handled alike over test lines (:class:`sarnmt.sweep.stats.Perplexity`:
per line the summed NLL and the word count; corpus perplexity recomputed from the drawn lines' sums in every
resample; the t-test over each line's mean log-likelihood per word), lower perplexity being better.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import stdtr, stdtrit

from sarnmt.evaluation.significance import paired_t_test
from sarnmt.sweep.stats import METRIC_SCORERS, corpus_score, corpus_scores

METHOD = "Welch + test-set variance"  # the seed-aware test's name in the CSV's seed_test column
# runs a side a ‡ (p < 0.01) needs: at 2 v 2 the test rejects 1.3-1.9% at nominal 1% where the seed noise acts
# (sarnmt.sweep.calibration --runs 2v2, three simulation seeds), at 3 v 3 and more within its band
RUNS_FOR_P01 = 3
BLOCK = 256  # resamples drawn and scored at once: memory ~ BLOCK x test sentences x 8 bytes for the draw


@dataclass(frozen=True)
class Resampling:
    """The bootstrap tests' resamples: ``resamples`` draws from numpy's PCG64 generator seeded with ``seed`` (the
    same numbers every time), :data:`BLOCK` at a time."""

    resamples: int = 10_000
    seed: int = 12345

    def mc_error(self, p: float = 0.05) -> float:
        """The Monte Carlo standard error of a bootstrap p near ``p``: sqrt(p(1 - p) / resamples)."""
        return math.sqrt(p * (1.0 - p) / self.resamples)


@dataclass(frozen=True)
class Comparison:
    """A cell against the baseline of its column. ``difference``: mean(row) - mean(baseline) over their runs, in the
    metric's units (negative is better for perplexity); ``p_seed``, ``low``/``high``, ``df``: the seed-aware test's
    one-sided p, 95% interval and degrees of freedom (:func:`welch_test`); ``p_two_level``: the old two-level
    bootstrap's p (:func:`two_level_test`); all None with fewer than two runs on either side (``runs``).
    ``p_t_test`` and ``p_sentence``: the sentence-level tests, seeds pooled."""

    difference: float
    runs: tuple[int, int]
    p_t_test: float
    p_sentence: float
    p_seed: float | None = None
    low: float | None = None
    high: float | None = None
    df: float | None = None
    p_two_level: float | None = None

    @property
    def seed_test_note(self) -> str | None:
        """Why there is no seed-aware test: ``n/a (1 run)`` (the row's), ``n/a (baseline: 1 run)``; else None."""
        if self.runs[0] < 2:
            return f"n/a ({self.runs[0]} run)"
        if self.runs[1] < 2:
            return f"n/a (baseline: {self.runs[1]} run)"
        return None


@dataclass
class CellScore:
    """A cell's runs: ``scores`` one corpus score per seed; ``comparison`` against the baseline (None for the
    baseline itself, or when the test cannot run)."""

    scores: list[float]
    comparison: Comparison | None = None

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores)

    @property
    def sd(self) -> float | None:
        return statistics.stdev(self.scores) if len(self.scores) > 1 else None


def cell_score(runs: Sequence[np.ndarray], metric: str) -> CellScore:
    return CellScore([corpus_score(r, metric) for r in runs])


def _runs(runs: Sequence[np.ndarray], size: int) -> np.ndarray:
    """The runs' statistics as one ``(sentences, runs x width)`` matrix, so one product sums every run at once."""
    stacked = np.stack([np.asarray(r, dtype=np.float64) for r in runs], axis=1)  # (sentences, runs, width)
    return stacked.reshape(size, -1)


def _sizes(system: Sequence[np.ndarray], baseline: Sequence[np.ndarray]) -> int:
    if not system or not baseline:
        raise ValueError("a comparison needs at least one run on each side")
    n = {len(r) for r in (*system, *baseline)}
    if len(n) != 1:
        raise ValueError(f"runs of one comparison have different numbers of test sentences: {sorted(n)}")
    return n.pop()


def bootstrap_differences(
    system: Sequence[np.ndarray],
    baseline: Sequence[np.ndarray],
    metric: str,
    resampling: Resampling = Resampling(),
    resample_runs: bool = True,
) -> np.ndarray:
    """The resampled differences mean(system) - mean(baseline) of corpus scores, one per resample.

    ``resample_runs=True``, the two-level paired bootstrap: per resample, each side's runs are drawn with
    replacement (as many as it has, independently for the two sides), then one set of test sentences with
    replacement, common to both sides; every drawn run's corpus score is recomputed from the summed statistics of
    the drawn sentences (a run drawn twice counts twice in its side's mean). ``resample_runs=False``, Koehn's (2004)
    paired bootstrap over sentences with every run kept once (seeds pooled), on the same sentence draws.
    """
    two_level, pooled = both_bootstraps(system, baseline, metric, resampling)
    return two_level if resample_runs else pooled


def both_bootstraps(
    system: Sequence[np.ndarray], baseline: Sequence[np.ndarray], metric: str, resampling: Resampling
) -> tuple[np.ndarray, np.ndarray]:
    """Both bootstraps of :func:`bootstrap_differences` from one pass over the resamples: ``(two_level, pooled)``.
    Vectorised over :data:`BLOCK` resamples at a time (per block: the runs drawn for each side, then the sentence
    counts, then one matrix product that sums every run's statistics); the same ``resampling`` gives the same
    numbers."""
    size = _sizes(system, baseline)
    scorer = METRIC_SCORERS[metric]
    k_sys, k_base = len(system), len(baseline)
    stacked = np.concatenate([_runs(system, size), _runs(baseline, size)], axis=1)  # (sentences, (ks + kb) x width)
    rng = np.random.default_rng(resampling.seed)
    two_level, pooled = np.empty(resampling.resamples), np.empty(resampling.resamples)
    for start in range(0, resampling.resamples, BLOCK):
        m = min(BLOCK, resampling.resamples - start)
        pick_sys = rng.integers(0, k_sys, (m, k_sys))
        pick_base = rng.integers(0, k_base, (m, k_base))
        draws = rng.integers(0, size, (m, size)) + (np.arange(m) * size)[:, None]
        weights = np.bincount(draws.ravel(), minlength=m * size).reshape(m, size).astype(np.float64)
        scores = scorer.corpus_many((weights @ stacked).reshape(m, k_sys + k_base, scorer.width))
        sys_scores, base_scores = scores[:, :k_sys], scores[:, k_sys:]
        pooled[start : start + m] = sys_scores.mean(axis=1) - base_scores.mean(axis=1)
        two_level[start : start + m] = np.take_along_axis(sys_scores, pick_sys, axis=1).mean(
            axis=1
        ) - np.take_along_axis(base_scores, pick_base, axis=1).mean(axis=1)
    return two_level, pooled


def one_sided_p(differences: np.ndarray, metric: str) -> float:
    """The percentile bootstrap's one-sided p of H1 "the system is better":
    (1 + #resamples where it is not better) / (1 + #resamples); a tie counts as not better."""
    higher = METRIC_SCORERS[metric].higher_is_better
    not_better = int(np.count_nonzero(differences <= 0 if higher else differences >= 0))
    return (1 + not_better) / (1 + len(differences))


def sentence_t_test(system: Sequence[np.ndarray], baseline: Sequence[np.ndarray], metric: str) -> float:
    """The paper's one-tailed paired t-test over test sentences (lines), seeds pooled: each item's score averaged
    over a side's runs, paired with the other side's; H1: the system is better."""
    _sizes(system, baseline)
    scorer = METRIC_SCORERS[metric]
    sys_items = np.mean([scorer.items(np.asarray(r)) for r in system], axis=0)
    base_items = np.mean([scorer.items(np.asarray(r)) for r in baseline], axis=0)
    return paired_t_test(sys_items.tolist(), base_items.tolist())[1]


@dataclass(frozen=True)
class SeedTest:
    """One seed-aware test's outcome: the one-sided ``p``, the 95% interval ``low``/``high`` of the difference and
    the degrees of freedom ``df`` (None for the bootstrap)."""

    p: float
    low: float
    high: float
    df: float | None = None


def welch_test(system: Sequence[float], baseline: Sequence[float], v_sent: float, metric: str) -> SeedTest:
    """Welch's test on the seed means with the test set's resampling variance added (the module's docstring):
    ``system``/``baseline`` the runs' corpus scores (two or more a side), ``v_sent`` the variance of the difference
    of means over resampled test sets. Var = s_r²/n_r + s_b²/n_b + v_sent; df by Welch-Satterthwaite on the seed
    terms (v_sent with infinite df); one-sided p = P(T_df >= t), t = Δ / sqrt(Var) signed so that positive is
    better; the interval Δ ± t_(0.975, df) sqrt(Var)."""
    r, b = np.asarray(system, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    if len(r) < 2 or len(b) < 2:
        raise ValueError(f"Welch's test needs two runs a side, not {len(r)} v {len(b)}")
    seed_r, seed_b = r.var(ddof=1) / len(r), b.var(ddof=1) / len(b)
    variance = seed_r + seed_b + max(float(v_sent), 0.0)
    denominator = seed_r**2 / (len(r) - 1) + seed_b**2 / (len(b) - 1)
    df = variance**2 / denominator if denominator > 0 else math.inf
    difference = float(r.mean() - b.mean())
    better = difference if METRIC_SCORERS[metric].higher_is_better else -difference
    se = math.sqrt(variance)
    if se == 0.0:  # every run identical on every resample: only the sign can speak
        p = 0.0 if better > 0 else 1.0
    else:
        p = float(stdtr(df, -better / se))  # Student's t upper tail P(T_df >= t)
    half = float(stdtrit(df, 0.975)) * se
    return SeedTest(p, difference - half, difference + half, float(df))


def two_level_test(two_level: np.ndarray, metric: str) -> SeedTest:
    """The old seed-aware test from the two-level bootstrap's resampled differences (:func:`bootstrap_differences`
    with ``resample_runs=True``): its percentile one-sided p and 2.5th-97.5th percentile interval."""
    low, high = np.percentile(two_level, [2.5, 97.5])
    return SeedTest(one_sided_p(two_level, metric), float(low), float(high))


def run_scores(runs: Sequence[np.ndarray], metric: str) -> np.ndarray:
    """Each run's corpus score from its per-sentence statistics."""
    return corpus_scores(np.stack([np.asarray(r, dtype=np.float64).sum(axis=0) for r in runs]), metric)


def compare_cells(
    system: Sequence[np.ndarray], baseline: Sequence[np.ndarray], metric: str, resampling: Resampling = Resampling()
) -> Comparison:
    """A row's runs against the baseline's: the seed-aware test (:func:`welch_test`: p, the 95% interval of the
    difference, df; none with one run on either side), the old two-level bootstrap's p, and the sentence-level
    tests with seeds pooled. The sentence-level bootstrap's resamples give both p_sentence and v_sent."""
    sys_scores, base_scores = run_scores(system, metric), run_scores(baseline, metric)
    difference = float(sys_scores.mean() - base_scores.mean())
    two_level, pooled = both_bootstraps(system, baseline, metric, resampling)
    result = Comparison(
        difference,
        (len(system), len(baseline)),
        p_t_test=sentence_t_test(system, baseline, metric),
        p_sentence=one_sided_p(pooled, metric),
    )
    if result.seed_test_note is not None:
        return result
    welch = welch_test(sys_scores, base_scores, float(np.var(pooled, ddof=1)), metric)
    return replace(
        result,
        p_seed=welch.p,
        low=welch.low,
        high=welch.high,
        df=welch.df,
        p_two_level=two_level_test(two_level, metric).p,
    )


def compare(
    system: Sequence[np.ndarray],
    baseline: Sequence[np.ndarray],
    metric: str,
    n_samples: int = 10_000,
    seed: int = 12345,
) -> tuple[float, float]:
    """``(p_t_test, p_bootstrap)``, the sentence-level tests with seeds pooled, of H1: ``system`` (its seeds'
    statistics) is better than ``baseline`` (higher BLEU, lower perplexity)."""
    pooled = bootstrap_differences(system, baseline, metric, Resampling(n_samples, seed), resample_runs=False)
    return sentence_t_test(system, baseline, metric), one_sided_p(pooled, metric)
