"""The seed-aware tests' error rates under a true null, measured by simulation: how often each test marks a row
that is no better than its baseline. ``sarnmt calibrate`` (:mod:`sarnmt.cli.calibrate`) prints the table.

Three tests are scored on every null cell (:mod:`sarnmt.sweep.seed_tests`): the tables' test (Welch's test on the
seed means with v_shared, the test set's variance shared by a system's runs, df by Welch's 1947 form), the
earlier test (with v_sent, the paired sentence bootstrap's variance, df by Welch-Satterthwaite: ``seed_test=
"v_sent"``) and the two-level bootstrap before it; a rejection is a one-sided p below the nominal level.

The null cells come from :mod:`sarnmt.sweep.null_regimes`: the synthetic regimes (:func:`rejection_rates`, every
test on every cell), and the regime of the real runs, the additive model fitted to them (:func:`model_rates`,
:data:`REAL_CELLS` null cells a run count) and random splits of them (:func:`split_rates`). The rate over splits is
the rate for these 15 runs; a calibrated test's rate for another 15 exchangeable runs would differ from it by more
than the Monte Carlo error of the splits (at 3 v 3 the permutation rate of an exact test over datasets of 15 normal
runs has sd 0.008 at 0.05), so its band adds that spread (:func:`split_spread`). In the real regimes the old test's
v_sent is its jackknife equivalent (v_pooled, :class:`~sarnmt.sweep.seed_tests.VarianceParts`: the variance over
test sets of the difference of the two sides' mean pseudo-values, which the paired bootstrap estimates with Monte
Carlo error), and there is no two-level bootstrap (no counts to resample in the model).

**Bands.** With ``cells`` null cells the Monte Carlo standard error of a rejection rate near alpha is sqrt(alpha
(1 - alpha) / cells); a calibrated test's rate lies within alpha +- 3 such errors (:func:`band`) but by chance about
once in 370: at 2,000 cells 0.035-0.065 at 0.05 and 0.003-0.017 at 0.01, at 4,000 0.039-0.061 and 0.005-0.015.

:func:`calibrate` runs the regimes and returns the table (Markdown); :mod:`sarnmt.cli.calibrate` checks the
settings first. Defaults: 2,000 cells,
400 bootstrap resamples per cell (the tables use 10,000: with 400 the old tests' p move by their Monte Carlo error,
about 0.011 at 0.05, and v_sent by about 7%), 300 sentences, the run counts of :data:`SIZES` for the synthetic
regimes; :data:`REAL_CELLS` cells (and splits) at :data:`REAL_SIZES` for the real ones. Every regime and run count
draws from its own generator (seeded by the simulation's seed, the run counts and the regime), so a line does not
change when ``runs`` adds others.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sarnmt.errors import InputError
from sarnmt.sweep import seed_tests
from sarnmt.sweep.null_regimes import (
    REAL,
    RECORDS,
    REGIMES,
    Fitted,
    RealSource,
    Regime,
    fit,
    model_cells,
    null_cell,
    split_indices,
)

METRIC = "bleu_tok"
LEVELS = (0.05, 0.01)
SIZES = ((3, 3), (3, 5), (5, 5))
REAL_SIZES = ((3, 3), (5, 5))
REAL_CELLS = 40_000
BLOCK = 250  # model cells drawn at once: memory ~ BLOCK x runs x sentences x 8 bytes a side


def band(alpha: float, cells: int, spread: float = 0.0) -> tuple[float, float]:
    """Where a calibrated test's rejection rate lies at ``cells`` null cells: alpha +- 3 sqrt(alpha (1 - alpha) /
    cells + spread²), ``spread`` the sd of the rate itself over datasets (the splits'), rounded outward to 0.001."""
    half = 3 * math.sqrt(alpha * (1 - alpha) / cells + spread**2)
    return max(0.0, math.floor(1000 * (alpha - half) + 1e-9) / 1000), math.ceil(1000 * (alpha + half) - 1e-9) / 1000


def cell_p_values(
    system: Sequence[np.ndarray], baseline: Sequence[np.ndarray], resampling: seed_tests.Resampling
) -> tuple[float, float, float]:
    """``(p_shared, p_v_sent, p_two_level)``: the tables' seed-aware test, the earlier one (v_sent) and the two-level
    bootstrap of one cell (the old two from one bootstrap pass)."""
    two_level, pooled = seed_tests.both_bootstraps(system, baseline, METRIC, resampling)
    scores = seed_tests.run_scores(system, METRIC), seed_tests.run_scores(baseline, METRIC)
    shared = seed_tests.variance_parts(system, baseline, METRIC).shared
    new = seed_tests.welch_test(*scores, shared, METRIC)
    old = seed_tests.welch_arrays(*scores, float(np.var(pooled, ddof=1)), df_form="satterthwaite")[3]
    return new.p, float(old), seed_tests.two_level_test(two_level, METRIC).p


@dataclass(frozen=True)
class Rates:
    """Rejection rates of one regime and run count over ``cells`` null cells (or splits): ``shared[alpha]`` the
    tables' test, ``v_sent[alpha]`` the earlier test (v_sent), ``two_level[alpha]`` the two-level bootstrap (None
    where it cannot run), ``bands[alpha]`` where a calibrated test's rate lies."""

    regime: str
    runs: tuple[int, int]
    cells: int
    shared: dict[float, float]
    v_sent: dict[float, float]
    two_level: dict[float, float] | None
    bands: dict[float, tuple[float, float]]


def _rates(p: np.ndarray) -> dict[float, float]:
    return {a: float((p < a).mean()) for a in LEVELS}


def rejection_rates(
    regime: Regime,
    runs: tuple[int, int],
    cells: int = 2000,
    resamples: int = 400,
    sentences: int = 300,
    seed: int = 0,
) -> Rates:
    """The three tests' rejection rates at :data:`LEVELS` over ``cells`` null cells of a synthetic ``regime`` at
    ``runs`` (``resamples`` bootstrap resamples per cell, every cell its own generator seed, reproducible from
    ``seed``)."""
    rng = np.random.default_rng([seed, runs[0], runs[1], REGIMES.index(regime) if regime in REGIMES else 99])
    p = np.array(
        [
            cell_p_values(
                *null_cell(rng, regime, runs, sentences),
                seed_tests.Resampling(resamples, int(rng.integers(2**31))),
            )
            for _ in range(cells)
        ]
    )
    return Rates(
        regime.name,
        runs,
        cells,
        _rates(p[:, 0]),
        _rates(p[:, 1]),
        _rates(p[:, 2]),
        {a: band(a, cells) for a in LEVELS},
    )


def psi_p_values(
    psi_r: np.ndarray,
    psi_b: np.ndarray,
    higher_is_better: bool,
    scores: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(p_shared, p_v_sent)`` of cells given by their runs' pseudo-values ``(..., n, N)`` (the runs' scores the
    pseudo-values' means unless ``scores`` gives them): the tables' test, and the old one with v_pooled, the
    jackknife's v_sent."""
    r, b = scores if scores is not None else (psi_r.mean(axis=-1), psi_b.mean(axis=-1))
    pooled, own_r, own_b = seed_tests.variance_arrays(psi_r, psi_b)
    new = seed_tests.welch_arrays(r, b, np.maximum(pooled - own_r - own_b, 0.0), higher_is_better)[3]
    old = seed_tests.welch_arrays(r, b, pooled, higher_is_better, df_form="satterthwaite")[3]
    return new, old


def _real_rng(seed: int, runs: tuple[int, int], source: RealSource, kind: int) -> np.random.Generator:
    return np.random.default_rng([seed, runs[0], runs[1], 100 + REAL.index(source) if source in REAL else 199, kind])


def model_rates(fitted: Fitted, runs: tuple[int, int], cells: int = REAL_CELLS, seed: int = 0) -> Rates:
    """Both Welch tests' rejection rates over ``cells`` null cells of the model fitted to a real source."""
    rng = _real_rng(seed, runs, fitted.source, 0)
    p = [
        psi_p_values(*model_cells(rng, fitted, runs, min(BLOCK, cells - k)), fitted.higher_is_better)
        for k in range(0, cells, BLOCK)
    ]
    new, old = (np.concatenate([q[i] for q in p]) for i in (0, 1))
    return Rates(
        f"{fitted.source.label} model", runs, cells, _rates(new), _rates(old), None, {a: band(a, cells) for a in LEVELS}
    )


@functools.cache
def split_spread(runs: tuple[int, int], total: int, datasets: int = 200, splits: int = 2000) -> dict[float, float]:
    """Per level of :data:`LEVELS`, the sd, over datasets of ``total`` exchangeable runs (normal, one test set), of
    an exact test's rejection rate over all random splits into ``runs``: how far the splits' rate of one dataset
    may lie from the level beyond their Monte Carlo error (estimated from ``datasets`` datasets of ``splits``
    splits each, that error taken out; the same numbers every time)."""
    rng = np.random.default_rng([total, runs[0], runs[1], 7])
    values = rng.normal(size=(datasets, 1, total))
    order = np.argsort(rng.random((datasets, splits, total)), axis=-1)
    picked = np.take_along_axis(np.broadcast_to(values, order.shape), order, axis=-1)
    p = seed_tests.welch_arrays(picked[..., : runs[0]], picked[..., runs[0] : runs[0] + runs[1]], 0.0)[3]
    spread = {}
    for alpha in LEVELS:
        rates = (p < alpha).mean(axis=1)
        spread[alpha] = math.sqrt(max(rates.var(ddof=1) - float(np.mean(rates * (1 - rates))) / splits, 0.0))
    return spread


def split_rates(fitted: Fitted, runs: tuple[int, int], splits: int = REAL_CELLS, seed: int = 0) -> Rates:
    """Both Welch tests' rejection rates over ``splits`` random splits of a real source's runs (pooled over its
    systems) into two null cells of ``runs``."""
    psi, scores = np.concatenate(fitted.psi), np.concatenate(fitted.scores)
    total = len(scores)
    if runs[0] + runs[1] > total:
        raise InputError(f"runs {runs[0]}v{runs[1]}: the {fitted.source.label} runs are {total}, too few to split")
    row, base = split_indices(_real_rng(seed, runs, fitted.source, 1), total, runs, splits)
    p = [
        psi_p_values(
            psi[row[k : k + BLOCK]],
            psi[base[k : k + BLOCK]],
            fitted.higher_is_better,
            (scores[row[k : k + BLOCK]], scores[base[k : k + BLOCK]]),
        )
        for k in range(0, splits, BLOCK)
    ]
    new, old = (np.concatenate([q[i] for q in p]) for i in (0, 1))
    bands = {a: band(a, splits, split_spread(runs, total)[a]) for a in LEVELS}
    return Rates(f"{fitted.source.label} splits", runs, splits, _rates(new), _rates(old), None, bands)


def real_table(
    cells: int = REAL_CELLS, seed: int = 0, sizes: Sequence[tuple[int, int]] = REAL_SIZES, records: Path = RECORDS
) -> list[Rates]:
    """:func:`model_rates` and :func:`split_rates` of every real source at every run count of ``sizes``."""
    rates = []
    for source in REAL:
        fitted = fit(source, records)
        rates += [model_rates(fitted, n, cells, seed) for n in sizes]
        rates += [split_rates(fitted, n, cells, seed) for n in sizes]
    return rates


def calibration_table(
    cells: int = 2000,
    resamples: int = 400,
    sentences: int = 300,
    seed: int = 0,
    sizes: Sequence[tuple[int, int]] = SIZES,
) -> list[Rates]:
    """:func:`rejection_rates` of every synthetic regime at every run count of ``sizes`` (row runs, baseline
    runs)."""
    return [rejection_rates(r, n, cells, resamples, sentences, seed) for r in REGIMES for n in sizes]


def markdown(rates: Sequence[Rates]) -> str:
    """The table: per regime and run count, each test's rejection rate at nominal 0.05 and 0.01, and the band of a
    calibrated test."""
    lines = [
        "| regime | runs | cells | band, 0.05 | band, 0.01 | v_shared, 0.05 | v_shared, 0.01 | v_sent, 0.05 | "
        "v_sent, 0.01 | two-level bootstrap, 0.05 | two-level bootstrap, 0.01 |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rates:
        two = [f"{r.two_level[a]:.3f}" for a in LEVELS] if r.two_level else ["–", "–"]
        lines.append(
            f"| {r.regime} | {r.runs[0]} v {r.runs[1]} | {r.cells:,} | "
            + " | ".join(f"{r.bands[a][0]:.3f}-{r.bands[a][1]:.3f}" for a in LEVELS)
            + f" | {r.shared[0.05]:.3f} | {r.shared[0.01]:.3f} | {r.v_sent[0.05]:.3f} | {r.v_sent[0.01]:.3f} | "
            + " | ".join(two)
            + " |"
        )
    return "\n".join(lines)


def calibrate(
    kinds: Sequence[str],
    sizes: tuple[tuple[int, int], ...] | None,
    cells: int = 2000,
    resamples: int = 400,
    sentences: int = 300,
    seed: int = 0,
    real_cells: int = REAL_CELLS,
    records: Path = RECORDS,
) -> str:
    """The table (:func:`markdown`) of :func:`calibration_table` and :func:`real_table` for the regime ``kinds``
    (``synthetic``, ``real``) at the run counts ``sizes`` (None: :data:`SIZES` and :data:`REAL_SIZES`), the settings
    checked where they enter (:mod:`sarnmt.cli.calibrate`).

    :raises InputError: the record a real regime cannot read."""
    rates = []
    if "synthetic" in kinds:
        rates += calibration_table(cells, resamples, sentences, seed, sizes or SIZES)
    if "real" in kinds:
        rates += real_table(real_cells, seed, sizes or REAL_SIZES, records)
    return markdown(rates)
