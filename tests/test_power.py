"""What a column's runs can detect (:mod:`sarnmt.sweep.power`): the seed-aware test's power, simulated with the test
itself, at run level; the same as the additive model of the real runs gives (:mod:`sarnmt.sweep.null_regimes`);
and above the normal approximation the footers used to print, which was optimistic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import stdtr

from sarnmt.sweep import calibration, null_regimes, power, seed_tests

EN_DE = power.Regime(0.56)


def test_the_effect_detected_with_power_08_is_the_80th_percentile_of_the_draws_thresholds():
    e = power.thresholds(EN_DE, (5, 5))
    assert len(e) == power.DRAWS and (np.diff(e) >= 0).all()
    found = power.detectable(EN_DE, (5, 5))
    assert power.power(EN_DE, (5, 5), found) >= 0.8 > power.power(EN_DE, (5, 5), found - 1e-9)
    assert 0.9 < found < 1.05  # 5 v 5 at the En→De runs' seed sd
    normal = (1.6448536269514722 + 0.8416212335729143) * 0.56 * math.sqrt(2 / 5)  # the old footers' approximation
    assert found > normal + 0.05
    assert power.detectable(EN_DE, (3, 3)) > power.detectable(EN_DE, (3, 5)) > found
    assert power.detectable(power.Regime(0.56, 0.05), (5, 5)) > found  # a shared test-set variance costs power
    assert power.power(EN_DE, (5, 5), 0.0) == pytest.approx(0.05, abs=0.005)  # the test's level, simulated


def test_the_seeds_a_side_for_a_gain_are_the_fewest_with_power_08():
    n = power.seeds_for(EN_DE, 1.4)
    assert power.power(EN_DE, (n, n), 1.4) >= 0.8 > power.power(EN_DE, (n - 1, n - 1), 1.4)
    assert power.seeds_for(EN_DE, 0.6) > power.seeds_for(EN_DE, 1.0) > n
    assert power.seeds_for(EN_DE, 0.0) is None and power.seeds_for(EN_DE, -1.0) is None
    assert power.seeds_for(EN_DE, 0.01) is None  # beyond MAX_SEEDS
    assert power.seeds_for(EN_DE, 1.0) > power.seeds_for_power(0.56, 1.0)  # the normal approximation's, optimistic


def test_run_level_power_is_the_additive_models():
    """The footers simulate run scores; the additive model of the real En→De runs (pseudo-values of every sentence,
    the runs' own sentence noise, the test's v_shared estimated in every cell) gives the same power."""
    fitted = null_regimes.fit(null_regimes.REAL[0])
    regime = power.Regime(math.sqrt(fitted.seed_variance), 0.0)
    rng = np.random.default_rng(3)
    cells, effect = 2000, 0.9
    p = np.concatenate(
        [
            calibration.psi_p_values(*null_regimes.model_cells(rng, fitted, (5, 5), 250, shift=effect), True)[0]
            for _ in range(cells // 250)
        ]
    )
    simulated = float((p < power.POWER_ALPHA).mean())
    assert simulated == pytest.approx(power.power(regime, (5, 5), effect), abs=3 * math.sqrt(0.25 / cells))


def test_p_under_the_papers_gain_is_the_seed_aware_test_of_that_gain():
    comparison = seed_tests.Comparison(-0.12, (5, 5), 0.9, 0.9, p_seed=0.6, low=-0.9, high=0.6, df=8.0, se=0.33)
    assert power.p_under(comparison, 1.4, True) == pytest.approx(stdtr(8.0, (-0.12 - 1.4) / 0.33))
    assert power.p_under(comparison, 1.4, True) < 0.001
    lm = seed_tests.Comparison(-1.6, (3, 3), 0.0, 0.0, p_seed=0.002, low=-2.5, high=-0.7, df=8.5, se=0.4)
    assert power.p_under(lm, 5.0, False) == pytest.approx(stdtr(8.5, (1.6 - 5.0) / 0.4))  # lower is better
    assert power.p_under(seed_tests.Comparison(1.0, (1, 5), 0.0, 0.0), 1.0, True) is None
