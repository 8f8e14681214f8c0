"""A table cell's score over its seeds and its significance against the baseline row, from the per-sentence
statistics of :mod:`sarnmt.sweep.stats`: a cell is the mean and sample standard deviation of its runs' corpus score
(one run per seed).

Significance, every test **one-sided**: H1 is "the row is better than the baseline" (higher BLEU, lower perplexity),
the convention of the paper's Table 1.

- **The seed-aware test** (the tables' markers, :func:`compare_cells`, :func:`seed_test`): **Welch's test on the
  seed means, its variance widened by the part of the test set's variance that the seed variance does not already
  hold**. The unit of replication is a training run (Clark et al. 2011, "Better Hypothesis Testing for Statistical
  Machine Translation: Controlling for Optimizer Instability"), and the test sentences are a sample too (Koehn
  2004, "Statistical Significance Tests for Machine Translation Evaluation"): both vary, the sentences paired
  across the two cells. With r_j the row's n_r run scores and b_j the baseline's n_b (each run's corpus score on
  the whole test set of N sentences),

      Δ = mean(r) - mean(b),   Var = s_r²/n_r + s_b²/n_b + v_shared,

  s² the sample variances over runs (Welch 1947, "The generalization of 'Student's' problem when several
  different population variances are involved") and v_shared the test-set variance of Δ that is shared by a
  system's runs: how the system as such, not one run of it, fares on these sentences rather than others (the
  system x sentence interaction). It comes from a two-way decomposition, runs x sentences, of each run's
  **jackknife pseudo-values** over the test sentences (Quenouille 1956, Tukey 1958: ψ_ji = N x_j - (N - 1)
  x_j(-i), x_j(-i) run j's corpus score without sentence i, recomputed from the summed statistics; the mean of ψ_j
  is about x_j, and Var_i(ψ_j)/N is the jackknife's variance of x_j over test sets, equal to the delta method's and
  to the sentence bootstrap's to within its Monte Carlo error):

      v_pooled = Var_i(mean_j ψ_ri - mean_j ψ_bi) / N,
      own_s    = Σ_ji (ψ_ji - ψ_j. - ψ_.i + ψ_..)² / ((n_s - 1)(N - 1))     (side s's runs only),
      v_shared = max(0, v_pooled - own_r / (N n_r) - own_b / (N n_b)).

  v_pooled is the variance over test sets of the difference of the two sides' mean pseudo-values: what Koehn's
  paired bootstrap over sentences with every run kept once measures (the old test's v_sent). It holds each run's
  own sentence-level luck (own_s / N: a run x sentence mean square, the residual of the two-way decomposition),
  which makes runs differ on one test set and so is already in s²; v_shared removes it, leaving the interaction.
  Under the additive model ψ_sji = μ_s + d_i + a_si + u_sj + e_sji (d the sentence's difficulty, shared by both
  systems and cancelled by the pairing; a the system x sentence interaction; u the seed; e the run x sentence
  noise, independent, mean 0) E[v_shared before the floor] = Var(a_ri - a_bi) / N, and Var(Δ) over seeds and test
  sets is exactly the formula above. The degrees of freedom: Welch's (1947) own form on the two seed terms a =
  s_r²/n_r and b = s_b²/n_b, ν_seed = (a + b)² / (a²/(n_r + 1) + b²/(n_b + 1)) - 2 (unbiased estimates of the
  squares; Welch-Satterthwaite's (n - 1) form rejects 0.040 at nominal 0.05 at 3 v 3 with equal variances), grown
  with the share of v_shared, which counts as known (it is estimated from (n - 1)(N - 1) residuals): df = ν_seed
  (Var / (a + b))^1.5 (:data:`KNOWN_SHARE`). The one-sided p is Student's t's upper tail at
  t = Δ / sqrt(Var) (the sign turned for perplexity, where lower is better), and the 95% interval is
  Δ ± t_(0.975, df) sqrt(Var), so the interval's lower end (upper for perplexity) is beyond 0 exactly when
  p < 0.025. p has no floor: t's tails reach 0 at any df, so every run count of two or more can earn a marker.
  Assumed: runs of a cell independent and their scores about normal over seeds (the t), the sentences a sample
  of exchangeable ones, the test's statistic smooth enough in the summed statistics for the jackknife (corpus
  BLEU and perplexity over hundreds of sentences are). Its error rate under a true null is measured by
  :mod:`sarnmt.sweep.calibration`, in the regime of the real runs too (an additive model fitted to them, and
  random splits of them). A cell with one run, or a baseline with one, gets no seed-aware test (``n/a (1
  run)``): its run-to-run spread is unknown.
- **The earlier seed-aware test** (``seed_test="v_sent"``, kept by name for the calibration and for the
  superseded ``mini8`` tables, published with it): the same Welch test with v_sent, the variance of Δ over
  Koehn's paired bootstrap over sentences with every run kept once, in place of v_shared. v_sent holds each run's
  own sentence noise a second time (it is in s² already), so where that noise is most of the seed variance, as in
  the mini runs, the test is conservative (measured: about 3% rejections at nominal 5%).
- **The two-level bootstrap** (the seed-aware test of the 8-epoch tables before that, kept by name for the
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
bootstrap. The seed-aware test's v_shared draws nothing: the jackknife is one pass over the sentences, the same
numbers every time. A bootstrap p's Monte Carlo standard error, sqrt(p(1 - p) / resamples), is 0.0022 at p = 0.05 (below
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

METHOD = "Welch + shared test-set variance"  # the seed-aware test's name in the CSV's seed_test column
# the seed-aware test's variance of the test set: "shared" (v_shared, the tables' test) or "v_sent" (the
# paired sentence bootstrap's, the tables' earlier test: the superseded mini8 tables were published with it)
SEED_TESTS = {"shared": METHOD, "v_sent": "Welch + test-set variance"}
DF_FORMS = ("welch1947", "satterthwaite")  # the seed-aware test's degrees of freedom, and the old test's
# the exponent by which the seed terms' df grow with the share of the known v_shared, df = ν_1947 (Var / seeds)^1.5:
# 2 (Satterthwaite's rule for adding a known term) rejects 0.052 / 0.014 at nominal 0.05 / 0.01 at 3 v 3 where
# v_shared is 7-25% of Var, 1 rejects 0.043 / 0.007 where it is half; 1.5 holds 0.048-0.051 / 0.009-0.011 over
# shares 0-80% at 3 v 3 and 5 v 5 but for 0.012-0.013 at 0.01 at 3 v 3 where the share is 3-25% (1,000,000 simulated
# normal cells a line, equal seed variances): the closed forms tried instead are further off (docs/reproducing.md)
KNOWN_SHARE = 1.5
# runs a side a ‡ (p < 0.01) needs: at 2 v 2 the test rejects 1.3-1.9% at nominal 1% where the seed noise acts
# (sarnmt calibrate runs=[2v2], three simulation seeds), at 3 v 3 and more within its band
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
    one-sided p, 95% interval and degrees of freedom (:func:`welch_test`), ``v_test`` the test-set variance it
    added (v_shared, or v_sent for the old test) and ``se`` = sqrt(Var); ``p_v_sent`` the earlier test's
    p (:data:`SEED_TESTS`); ``p_two_level``: the old two-level bootstrap's p
    (:func:`two_level_test`); all None with fewer than two runs on either side (``runs``).
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
    v_test: float | None = None
    se: float | None = None
    p_v_sent: float | None = None

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
    the degrees of freedom ``df`` and standard error ``se`` = sqrt(Var) (None for the bootstrap)."""

    p: float
    low: float
    high: float
    df: float | None = None
    se: float | None = None


def welch_arrays(
    system: np.ndarray,
    baseline: np.ndarray,
    v_test: np.ndarray | float,
    higher_is_better: bool = True,
    df_form: str = "welch1947",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`welch_test` for many cells at once: ``system`` ``(..., n_r)`` and ``baseline`` ``(..., n_b)`` run
    scores, ``v_test`` the test set's variance to add (broadcast); returns ``(Δ, Var, df, p)``, each ``(...)``.
    The one computation of the seed-aware test's p, for the tables, the calibration and the power simulation.
    ``df_form``: ``welch1947``, the seed terms a = s_r²/n_r and b = s_b²/n_b at Welch's (1947) ν_seed = (a + b)² /
    (a²/(n_r + 1) + b²/(n_b + 1)) - 2, grown with the share of the known v_test: df = ν_seed (Var / (a + b))^1.5
    (:data:`KNOWN_SHARE`); or ``satterthwaite``, Var² / (a²/(n_r - 1) + b²/(n_b - 1)) (the old test's)."""
    r, b = np.asarray(system, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    n_r, n_b = r.shape[-1], b.shape[-1]
    if n_r < 2 or n_b < 2:
        raise ValueError(f"Welch's test needs two runs a side, not {n_r} v {n_b}")
    if df_form not in DF_FORMS:
        raise ValueError(f"df_form={df_form!r}: one of {DF_FORMS}")
    seed_r, seed_b = r.var(axis=-1, ddof=1) / n_r, b.var(axis=-1, ddof=1) / n_b
    variance = seed_r + seed_b + np.maximum(np.asarray(v_test, dtype=np.float64), 0.0)
    k = 1 if df_form == "welch1947" else -1
    denominator = seed_r**2 / (n_r + k) + seed_b**2 / (n_b + k)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        safe = np.where(denominator > 0, denominator, 1.0)
        if df_form == "welch1947":  # the seed terms' df, grown with the share of v_test (known: infinite df)
            seeds = seed_r + seed_b
            df = (seeds**2 / safe - 2.0) * (variance / np.where(seeds > 0, seeds, 1.0)) ** KNOWN_SHARE
        else:
            df = variance**2 / safe
        df = np.where(denominator > 0, df, np.inf)
        difference = r.mean(axis=-1) - b.mean(axis=-1)
        better = difference if higher_is_better else -difference
        se = np.sqrt(variance)
        # every run identical on every sentence: only the sign can speak
        p = np.where(se > 0, stdtr(df, -better / np.where(se > 0, se, 1.0)), np.where(better > 0, 0.0, 1.0))
    return difference, variance, df, p


def welch_test(
    system: Sequence[float], baseline: Sequence[float], v_test: float, metric: str, df_form: str = "welch1947"
) -> SeedTest:
    """Welch's test on the seed means with a test-set variance added (the module's docstring): ``system`` /
    ``baseline`` the runs' corpus scores (two or more a side), ``v_test`` the test set's variance of the difference
    of means to add (v_shared: :func:`variance_parts`; the old test's v_sent). Var = s_r²/n_r + s_b²/n_b +
    v_test; df by ``df_form`` (:func:`welch_arrays`: Welch's 1947 form on the seed terms, v_test known; or
    Welch-Satterthwaite's, the old test's); one-sided p = P(T_df >= t), t = Δ / sqrt(Var) signed so that positive is
    better; the interval Δ ± t_(0.975, df) sqrt(Var)."""
    higher = METRIC_SCORERS[metric].higher_is_better
    difference, variance, df, p = (float(v) for v in welch_arrays(system, baseline, float(v_test), higher, df_form))
    half = float(stdtrit(df, 0.975)) * math.sqrt(variance)
    return SeedTest(p, difference - half, difference + half, df, math.sqrt(variance))


def pseudo_values(runs: Sequence[np.ndarray] | np.ndarray, metric: str) -> np.ndarray:
    """Each run's jackknife pseudo-values over its test sentences (lines), ``(runs, sentences)``: ψ_ji = N x_j -
    (N - 1) x_j(-i), x_j the run's corpus score and x_j(-i) the score of its summed statistics without sentence i
    (Tukey 1958). ``runs``: per-sentence statistics, a sequence of ``(sentences, width)`` arrays or one ``(...,
    runs, sentences, width)`` array (then the result is ``(..., runs, sentences)``)."""
    stacked = np.asarray(runs if isinstance(runs, np.ndarray) else np.stack(runs), dtype=np.float64)
    size = stacked.shape[-2]
    if size < 2:
        raise ValueError(f"the jackknife needs two test sentences or more, not {size}")
    total = stacked.sum(axis=-2, keepdims=True)
    full = corpus_scores(total, metric)  # (..., runs, 1)
    return size * full - (size - 1) * corpus_scores(total - stacked, metric)


def own_noise(psi: np.ndarray) -> np.ndarray:
    """The run x sentence mean square of one side's pseudo-values ``(..., runs, sentences)``: the residual of the
    two-way decomposition (runs, sentences, additive), Σ (ψ_ji - ψ_j. - ψ_.i + ψ_..)² / ((n - 1)(N - 1)); a run's
    own sentence-level noise contributes it / N to the variance of its score on one test set."""
    n, size = psi.shape[-2:]
    centred = psi - psi.mean(axis=-1, keepdims=True)  # each run's mean taken out; then the sentences' means:
    squares = np.einsum("...ji,...ji->...", centred, centred) - n * (centred.mean(axis=-2) ** 2).sum(axis=-1)
    return squares / ((n - 1) * (size - 1))


@dataclass(frozen=True)
class VarianceParts:
    """The test set's share of Var(Δ): ``pooled`` the variance over test sets of the difference of the two sides'
    mean pseudo-values (the old v_sent's estimand), ``own`` each side's run x sentence noise already in its seed
    variance (own_s / (N n_s), row then baseline), ``shared`` = max(0, pooled - own_r - own_b)."""

    pooled: float
    own: tuple[float, float]

    @property
    def shared(self) -> float:
        return max(0.0, self.pooled - self.own[0] - self.own[1])


def variance_arrays(psi_r: np.ndarray, psi_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`variance_parts` for many cells at once: pseudo-values ``(..., n_r, N)`` and ``(..., n_b, N)``;
    returns ``(v_pooled, own_r / (N n_r), own_b / (N n_b))``, each ``(...)``."""
    n_r, size = psi_r.shape[-2:]
    n_b = psi_b.shape[-2]
    pooled = (psi_r.mean(axis=-2) - psi_b.mean(axis=-2)).var(axis=-1, ddof=1) / size
    own_r = own_noise(psi_r) / (size * n_r) if n_r > 1 else np.zeros_like(pooled)
    own_b = own_noise(psi_b) / (size * n_b) if n_b > 1 else np.zeros_like(pooled)
    return pooled, own_r, own_b


def variance_parts(system: Sequence[np.ndarray], baseline: Sequence[np.ndarray], metric: str) -> VarianceParts:
    """The test set's share of Var(Δ) from the runs' per-sentence statistics (the module's docstring: v_shared and
    v_pooled from the runs' jackknife pseudo-values, decomposed runs x sentences)."""
    _sizes(system, baseline)
    pooled, own_r, own_b = variance_arrays(pseudo_values(system, metric), pseudo_values(baseline, metric))
    return VarianceParts(float(pooled), (float(own_r), float(own_b)))


def two_level_test(two_level: np.ndarray, metric: str) -> SeedTest:
    """The old seed-aware test from the two-level bootstrap's resampled differences (:func:`bootstrap_differences`
    with ``resample_runs=True``): its percentile one-sided p and 2.5th-97.5th percentile interval."""
    low, high = np.percentile(two_level, [2.5, 97.5])
    return SeedTest(one_sided_p(two_level, metric), float(low), float(high))


def run_scores(runs: Sequence[np.ndarray], metric: str) -> np.ndarray:
    """Each run's corpus score from its per-sentence statistics."""
    return corpus_scores(np.stack([np.asarray(r, dtype=np.float64).sum(axis=0) for r in runs]), metric)


def compare_cells(
    system: Sequence[np.ndarray],
    baseline: Sequence[np.ndarray],
    metric: str,
    resampling: Resampling = Resampling(),
    seed_test: str = "shared",
) -> Comparison:
    """A row's runs against the baseline's: the seed-aware test (:func:`welch_test` with v_shared,
    :func:`variance_parts`: p, the 95% interval of the difference, df; none with one run on either side), the
    old two-level bootstrap's p, and the sentence-level tests with seeds pooled. ``seed_test="v_sent"``: the
    earlier seed-aware test, v_sent from the sentence-level bootstrap's resamples in place of v_shared."""
    if seed_test not in SEED_TESTS:
        raise ValueError(f"seed_test={seed_test!r}: one of {sorted(SEED_TESTS)}")
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
    v_sent = float(np.var(pooled, ddof=1))
    old = welch_test(sys_scores, base_scores, v_sent, metric, "satterthwaite")
    if seed_test == "shared":
        v_test = variance_parts(system, baseline, metric).shared
        welch = welch_test(sys_scores, base_scores, v_test, metric)
    else:
        v_test, welch = v_sent, old
    return replace(
        result,
        v_test=float(v_test),
        p_v_sent=old.p,
        se=welch.se,
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
