"""What a column's runs can detect: the footer's power line (:mod:`sarnmt.sweep.footer`), by simulation of the
seed-aware test itself (:func:`sarnmt.sweep.seed_tests.welch_arrays`) in the regime of the column's runs.

**The regime.** A run's score over seeds on the column's test set is normal with the seed variance pooled over the
column's cells with two or more runs (:func:`pooled_sd`: it holds each run's own sentence noise, as the runs'
spread does); the difference of two cells' means gains the test set's shared variance v_shared of the comparison
(:class:`sarnmt.sweep.seed_tests.VarianceParts`; the test adds the same v_shared). This is the additive model of
the real runs (:mod:`sarnmt.sweep.null_regimes`, which the calibration draws from) reduced to run level, where the
test's statistic lives (its cells' power is the same within Monte Carlo error: ``tests/test_power.py``).

**The test's own thresholds.** With common random numbers (:data:`DRAWS` draws from numpy's PCG64 seeded
:data:`SEED`), each draw d of the seeds (and of the shared test-set term) has a threshold e_d: the true difference
from which that draw's one-sided p is below :data:`POWER_ALPHA` (s² and the df do not move with the difference, so
e_d = t_(1 - alpha, df_d) sqrt(Var_d) - noise_d). The power at an effect e is the share of draws with e_d <= e, and
the effect detected with power 0.8 (:func:`detectable`) is the 80th percentile of the e_d: exact for these draws,
no search. Monte Carlo error of a power near 0.8 at 20,000 draws: 0.003.

:func:`p_under` is the probability of the observed Δ, or one further from the paper's, if the paper's gain held at
this scale: the seed-aware test of H0 "Δ is the paper's gain" against "Δ is below it" (one-sided, the same Var and
df as the table's test, whose level the calibration measures).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy.special import stdtr, stdtrit

from sarnmt.sweep import seed_tests

POWER_ALPHA, POWER = 0.05, 0.8
DRAWS, SEED = 20_000, 20_240_559
MAX_SEEDS = 200  # seeds a side searched for the paper's gain; beyond: "more than 200"


def pooled_sd(cells: Sequence[Sequence[float]]) -> tuple[float, int] | None:
    """The pooled sample sd over seeds of several cells' scores, sqrt(sum (n_i - 1) s_i^2 / sum (n_i - 1)), and
    its degrees of freedom; cells with one run add nothing; None without any cell of two runs."""
    parts = [(len(c) - 1, statistics.variance(c)) for c in cells if len(c) > 1]
    df = sum(d for d, _ in parts)
    if not df:
        return None
    return math.sqrt(sum(d * v for d, v in parts) / df), df


def seeds_for_power(sd: float, effect: float, alpha: float = POWER_ALPHA, power: float = POWER) -> int | None:
    """The normal approximation the superseded ``mini8`` tables' power lines were published with (optimistic for
    the seed-aware test: :func:`seeds_for` simulates it): seeds per system for a one-sided two-sample comparison of
    seed means at level ``alpha`` to detect ``effect`` with probability ``power`` at seed sd ``sd``, n = 2((z_(1 -
    alpha) + z_power) sd / effect)^2 rounded up, at least 2 (None for an effect <= 0)."""
    if effect <= 0:
        return None
    z = NormalDist().inv_cdf(1.0 - alpha) + NormalDist().inv_cdf(power)
    return max(2, math.ceil(2.0 * (z * sd / effect) ** 2))


@dataclass(frozen=True)
class Regime:
    """A comparison's regime: ``sd`` one run's score sd over seeds (the column's pooled), ``v_shared`` the test
    set's shared variance of the difference."""

    sd: float
    v_shared: float = 0.0


@functools.lru_cache(maxsize=512)
def thresholds(regime: Regime, runs: tuple[int, int], draws: int = DRAWS, seed: int = SEED) -> np.ndarray:
    """Each draw's threshold e_d (the module's docstring), sorted: the true difference, in the metric's better
    direction, from which the seed-aware test at ``runs`` rejects at :data:`POWER_ALPHA` in that draw."""
    rng = np.random.default_rng([seed, runs[0], runs[1]])
    row = rng.standard_normal((draws, runs[0])) * regime.sd
    base = rng.standard_normal((draws, runs[1])) * regime.sd
    shared = rng.standard_normal(draws) * math.sqrt(max(regime.v_shared, 0.0))
    difference, variance, df, _ = seed_tests.welch_arrays(row, base, regime.v_shared)
    noise = difference + shared
    return np.sort(stdtrit(df, 1.0 - POWER_ALPHA) * np.sqrt(variance) - noise)


def power(regime: Regime, runs: tuple[int, int], effect: float) -> float:
    """The seed-aware test's power at p < :data:`POWER_ALPHA` for a true difference ``effect`` (in the better
    direction) at ``runs`` (row, baseline)."""
    e = thresholds(regime, runs)
    return float(np.searchsorted(e, effect, side="right")) / len(e)


def detectable(regime: Regime, runs: tuple[int, int], target: float = POWER) -> float:
    """The smallest true difference the seed-aware test detects with power ``target`` at ``runs``."""
    e = thresholds(regime, runs)
    return float(e[min(len(e) - 1, math.ceil(target * len(e)) - 1)])


def seeds_for(regime: Regime, effect: float, target: float = POWER) -> int | None:
    """The fewest seeds a side (n v n) at which the seed-aware test detects ``effect`` with power ``target``
    (simulated; None for an effect <= 0 or beyond :data:`MAX_SEEDS`)."""
    if effect <= 0 or power(regime, (MAX_SEEDS, MAX_SEEDS), effect) < target:
        return None
    low, high = 2, MAX_SEEDS
    while low < high:  # power grows with the seeds
        middle = (low + high) // 2
        if power(regime, (middle, middle), effect) >= target:
            high = middle
        else:
            low = middle + 1
    return low


def p_under(comparison: seed_tests.Comparison, gain: float, higher_is_better: bool) -> float | None:
    """The one-sided p of the observed Δ if the true difference were ``gain`` (in the better direction): P(T_df <=
    (better Δ - gain) / sqrt(Var)); None where the comparison has no seed-aware test."""
    if comparison.p_seed is None or comparison.se is None:
        return None
    better = comparison.difference if higher_is_better else -comparison.difference
    if comparison.se == 0.0:
        return 0.0 if better < gain else 1.0
    return float(stdtr(comparison.df, (better - gain) / comparison.se))
