"""The seed-aware tests' error rates under a true null, measured by simulation: how often each test marks a row
that is no better than its baseline.

A **null cell** is two systems with no true difference, each run ``n_r`` / ``n_b`` times on one test set of
``sentences`` sentences drawn afresh for every cell. Per-sentence BLEU statistics (sacrebleu's ``[hyp_len,
ref_len, correct_1..4, total_1..4]``, which :mod:`sarnmt.sweep.stats` scores) are drawn for every run: sentence i
of run j of system s matches its n-grams with probability ``q^n``,

    q = sigmoid(mu + d_i + a_si + u_sj),   correct_n ~ Binomial(total_n, q^n),   total_n = max(len_i - n + 1, 0),

``d_i ~ N(0, 1)`` the sentence's difficulty (shared by both systems), ``a_si ~ N(0, sentence_sd)`` how system s
happens to fare on sentence i (shared by its runs: a new test set draws new ones, so it is the test set's sampling
noise of the difference), ``u_sj ~ N(0, seed_sd)`` run j's level (the seed), and the binomial draw the run x
sentence noise. Both systems have the same distribution, so any mark is a false positive. Three regimes:

- ``seed``: seed noise dominant (seed_sd 0.10, sentence_sd 0): runs of a system differ by about 1 BLEU;
- ``sentence``: sentence noise dominant (seed_sd 0, sentence_sd 0.5): the runs agree, the test set decides;
- ``both``: seed_sd 0.07 and sentence_sd 0.35.

Each null cell is scored by both seed-aware tests of :mod:`sarnmt.sweep.seed_tests` from one bootstrap pass:
:func:`~sarnmt.sweep.seed_tests.welch_test` (the tables' test; v_sent from the sentence-level bootstrap) and the
old :func:`~sarnmt.sweep.seed_tests.two_level_test`; a rejection is one-sided p below the nominal level. With
``cells`` null cells the Monte Carlo standard error of a rejection rate near alpha is sqrt(alpha (1 - alpha) /
cells): 0.0049 at 0.05 and 0.0022 at 0.01 for 2,000 cells, so a calibrated test stays below 0.065 and 0.017 (three
standard errors) but by chance about once in 700 (:data:`BAND`).

``python -m sarnmt.sweep.calibration [--cells N] [--resamples R] [--sentences S] [--seed K] [--runs 2v2,3v3]``
prints the table (Markdown). Defaults: 2,000 cells, 400 bootstrap resamples per cell (the tables use 10,000: with
400 the old test's p moves by its Monte Carlo error, about 0.011 at 0.05, and v_sent by about 7%), 300 sentences,
the run counts of :data:`SIZES`. Every regime and run count draws from its own generator (seeded by the
simulation's seed, the run counts and the regime), so a line does not change when ``--runs`` adds others.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sarnmt.errors import InputError, reported
from sarnmt.sweep import seed_tests

METRIC = "bleu_tok"
LEVELS = (0.05, 0.01)
SIZES = ((3, 3), (3, 5), (5, 5))


@dataclass(frozen=True)
class Regime:
    """Where the noise of a null cell comes from: ``seed_sd`` the runs' level (logit scale), ``sentence_sd`` each
    system's own luck per sentence (shared by its runs; redrawn with the test set)."""

    name: str
    seed_sd: float
    sentence_sd: float


REGIMES = (Regime("seed", 0.10, 0.0), Regime("sentence", 0.0, 0.5), Regime("both", 0.07, 0.35))
# a calibrated test's rejection rate stays at or below this at 2,000 null cells (nominal + 3 Monte Carlo errors)
BAND = {0.05: 0.065, 0.01: 0.017}


def band(alpha: float, cells: int) -> float:
    """The upper end of a calibrated test's rejection rate at ``cells`` null cells: alpha + 3 sqrt(alpha(1-alpha) /
    cells), rounded up to 0.001 (0.065 and 0.017 at 2,000)."""
    return math.ceil(1000 * (alpha + 3 * math.sqrt(alpha * (1 - alpha) / cells)) - 1e-9) / 1000


def null_cell(
    rng: np.random.Generator, regime: Regime, runs: tuple[int, int], sentences: int = 300, mu: float = 0.9
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """One null cell: per-sentence BLEU statistics ``(sentences, 10)`` of ``runs[0]`` runs of a system and
    ``runs[1]`` of its baseline, the two drawn from the same distribution (the module's docstring)."""
    lengths = rng.integers(8, 25, sentences)
    totals = np.maximum(lengths[:, None] - np.arange(4)[None, :], 0)  # (sentences, 4)
    difficulty = rng.normal(0.0, 1.0, sentences)
    sides = []
    for n in runs:
        luck = rng.normal(0.0, regime.sentence_sd, sentences) if regime.sentence_sd else 0.0
        level = rng.normal(0.0, regime.seed_sd, n) if regime.seed_sd else np.zeros(n)
        q = 1.0 / (1.0 + np.exp(-(mu + difficulty + luck)[None, :] - level[:, None]))  # (n, sentences)
        correct = rng.binomial(np.broadcast_to(totals, (n, sentences, 4)), q[..., None] ** np.arange(1, 5))
        stats = np.concatenate(
            [
                np.broadcast_to(lengths[None, :, None], (n, sentences, 2)),
                correct,
                np.broadcast_to(totals, correct.shape),
            ],
            axis=2,
        )
        sides.append([s.astype(np.int64) for s in stats])
    return sides[0], sides[1]


def cell_p_values(
    system: Sequence[np.ndarray], baseline: Sequence[np.ndarray], resampling: seed_tests.Resampling
) -> tuple[float, float]:
    """``(p_welch, p_two_level)``: the new and the old seed-aware test of one cell, from one bootstrap pass."""
    two_level, pooled = seed_tests.both_bootstraps(system, baseline, METRIC, resampling)
    welch = seed_tests.welch_test(
        seed_tests.run_scores(system, METRIC),
        seed_tests.run_scores(baseline, METRIC),
        float(np.var(pooled, ddof=1)),
        METRIC,
    )
    return welch.p, seed_tests.two_level_test(two_level, METRIC).p


@dataclass(frozen=True)
class Rates:
    """Rejection rates of one regime and run count: ``welch[alpha]`` and ``two_level[alpha]`` over ``cells``."""

    regime: str
    runs: tuple[int, int]
    cells: int
    welch: dict[float, float]
    two_level: dict[float, float]


def rejection_rates(
    regime: Regime,
    runs: tuple[int, int],
    cells: int = 2000,
    resamples: int = 400,
    sentences: int = 300,
    seed: int = 0,
) -> Rates:
    """Both tests' rejection rates at :data:`LEVELS` over ``cells`` null cells of ``regime`` at ``runs``
    (``resamples`` bootstrap resamples per cell, every cell its own generator seed, reproducible from ``seed``)."""
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
        {a: float((p[:, 0] < a).mean()) for a in LEVELS},
        {a: float((p[:, 1] < a).mean()) for a in LEVELS},
    )


def calibration_table(
    cells: int = 2000,
    resamples: int = 400,
    sentences: int = 300,
    seed: int = 0,
    sizes: Sequence[tuple[int, int]] = SIZES,
) -> list[Rates]:
    """:func:`rejection_rates` of every regime at every run count of ``sizes`` (row runs, baseline runs)."""
    return [rejection_rates(r, n, cells, resamples, sentences, seed) for r in REGIMES for n in sizes]


def markdown(rates: Sequence[Rates]) -> str:
    """The table: per regime and run count, each test's rejection rate at nominal 0.05 and 0.01."""
    lines = [
        "| regime | runs | Welch + v_sent, 0.05 | Welch + v_sent, 0.01 | two-level bootstrap, 0.05 | "
        "two-level bootstrap, 0.01 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rates:
        lines.append(
            f"| {r.regime} | {r.runs[0]} v {r.runs[1]} | {r.welch[0.05]:.3f} | {r.welch[0.01]:.3f} | "
            f"{r.two_level[0.05]:.3f} | {r.two_level[0.01]:.3f} |"
        )
    return "\n".join(lines)


def _positive(key: str, minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise InputError(f"{key}={text!r}: give an integer, {minimum} or more")
        return value

    return parse


def parse_runs(text: str) -> tuple[tuple[int, int], ...]:
    """``"2v2,3v5"`` -> ``((2, 2), (3, 5))``: run counts of the row and the baseline, 2 or more a side (Welch's test
    needs a variance on each side)."""
    sizes = []
    for item in text.split(","):
        counts = item.strip().split("v")
        if len(counts) != 2 or not all(c.isdecimal() and int(c) >= 2 for c in counts):
            raise InputError(f"--runs={text!r}: give run counts as NvM, 2 or more a side, comma-separated (3v3,3v5)")
        sizes.append((int(counts[0]), int(counts[1])))
    return tuple(dict.fromkeys(sizes))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sarnmt.sweep.calibration", description=__doc__.split("\n")[0])
    parser.add_argument("--cells", default="2000", help="null cells per regime and run count (2000)")
    parser.add_argument("--resamples", default="400", help="bootstrap resamples per cell (400)")
    parser.add_argument("--sentences", default="300", help="test sentences per cell (300)")
    parser.add_argument("--seed", default="0", help="the simulation's generator seed (0)")
    default_runs = ",".join(f"{a}v{b}" for a, b in SIZES)
    parser.add_argument("--runs", default=default_runs, help=f"run counts, row v baseline ({default_runs})")
    args = parser.parse_args(argv)
    with reported():
        cells = _positive("--cells", 10)(args.cells)
        resamples = _positive("--resamples", 50)(args.resamples)
        sentences = _positive("--sentences", 10)(args.sentences)
        seed = _positive("--seed", 0)(args.seed)
        sizes = parse_runs(args.runs)
        print(markdown(calibration_table(cells, resamples, sentences, seed, sizes)), flush=True)


if __name__ == "__main__":
    main()
