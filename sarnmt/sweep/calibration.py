"""The seed-aware tests' error rates under a true null, measured by simulation: how often each test marks a row
that is no better than its baseline.

Three tests are scored on every null cell (:mod:`sarnmt.sweep.seed_tests`): the tables' test (Welch's test on the
seed means with v_shared, the test set's variance shared by a system's runs, df by Welch's 1947 form), the test
the earlier test (with v_sent, the paired sentence bootstrap's variance, df by Welch-Satterthwaite: ``seed_test=
"v_sent"``) and the two-level bootstrap before it; a rejection is a one-sided p below the nominal level.

**Synthetic regimes** (:data:`REGIMES`). A null cell is two systems with no true difference, each run ``n_r`` /
``n_b`` times on one test set of ``sentences`` sentences drawn afresh for every cell. Per-sentence BLEU statistics
(sacrebleu's ``[hyp_len, ref_len, correct_1..4, total_1..4]``, which :mod:`sarnmt.sweep.stats` scores) are drawn
for every run: sentence i of run j of system s matches its n-grams with probability ``q^n``,

    q = sigmoid(mu + d_i + a_si + u_sj),   correct_n ~ Binomial(total_n, q^n),   total_n = max(len_i - n + 1, 0),

``d_i ~ N(0, 1)`` the sentence's difficulty (shared by both systems), ``a_si ~ N(0, sentence_sd)`` how system s
happens to fare on sentence i (shared by its runs: a new test set draws new ones, so it is the test set's sampling
noise of the difference), ``u_sj ~ N(0, seed_sd)`` run j's level (the seed), and the binomial draw the run x
sentence noise. Both systems have the same distribution, so any mark is a false positive:

- ``seed``: seed noise dominant (seed_sd 0.10, sentence_sd 0): runs of a system differ by about 1 BLEU;
- ``sentence``: sentence noise dominant (seed_sd 0, sentence_sd 0.5): the runs agree, the test set decides;
- ``both``: seed_sd 0.07 and sentence_sd 0.35.

**The regime of the real runs** (:data:`REAL`: the committed ``mini`` records of Table 1's En→De column,
Multi30K test2016, 3 rows x 5 seeds, and of Table 6, 5 language models x 3 seeds), two ways:

- ``model``: the additive model ψ_sji = d_i + a_si + u_sj + e_sji fitted to the runs' jackknife pseudo-values
  (:func:`fit`): d_i the sentences' mean pseudo-value over every run; e_sji drawn, for each run and sentence, from
  that sentence's residuals of the two-way decomposition (runs x sentences, within each system; rescaled for
  the degrees of freedom the fit took), so a run's own sentence noise has the real runs' size and shape; u_sj ~
  N(0, seed_sd) with seed_sd² the pooled seed variance of the runs' scores less their own sentence noise (own / N);
  a_si ~ N(0, interaction_sd) with interaction_sd² the systems x sentences interaction of the runs' mean
  pseudo-values less what their own noise puts there (floored at 0: none in the En→De runs). A run's score is the
  mean of its pseudo-values. Both cells are drawn from it; :data:`REAL_CELLS` null cells a run count.
- ``splits``: the real runs of the source pooled (15 in each) and split at random into two null cells of the run
  counts (drawn without replacement), every test computed from the runs' own statistics. The rate over splits is
  the rate for these 15 runs; a calibrated test's rate for another 15 exchangeable runs would differ from it by
  more than the Monte Carlo error of the splits (at 3 v 3 the permutation rate of an exact test over datasets of
  15 normal runs has sd 0.008 at 0.05), so its band adds that spread (:func:`split_spread`).

In the real regimes the old test's v_sent is its jackknife equivalent (v_pooled,
:class:`~sarnmt.sweep.seed_tests.VarianceParts`: the variance over test sets of the difference of the two sides'
mean pseudo-values, which the paired bootstrap estimates with Monte Carlo error), and there is no two-level
bootstrap (no counts to resample in the model).

**Bands.** With ``cells`` null cells the Monte Carlo standard error of a rejection rate near alpha is sqrt(alpha
(1 - alpha) / cells); a calibrated test's rate lies within alpha +- 3 such errors (:func:`band`) but by chance about
once in 370: at 2,000 cells 0.035-0.065 at 0.05 and 0.003-0.017 at 0.01, at 4,000 0.039-0.061 and 0.005-0.015.

``python -m sarnmt.sweep.calibration [--cells N] [--resamples R] [--sentences S] [--seed K] [--runs 2v2,3v3]
[--real-cells M] [--regimes synthetic,real] [--records DIR]`` prints the table (Markdown). Defaults: 2,000 cells,
400 bootstrap resamples per cell (the tables use 10,000: with 400 the old tests' p move by their Monte Carlo error,
about 0.011 at 0.05, and v_sent by about 7%), 300 sentences, the run counts of :data:`SIZES` for the synthetic
regimes; :data:`REAL_CELLS` cells (and splits) at :data:`REAL_SIZES` for the real ones. Every regime and run count
draws from its own generator (seeded by the simulation's seed, the run counts and the regime), so a line does not
change when ``--runs`` adds others.
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sarnmt.errors import InputError, reported
from sarnmt.sweep import seed_tests
from sarnmt.sweep.records import read_sentence_stats
from sarnmt.sweep.stats import METRIC_SCORERS

METRIC = "bleu_tok"
LEVELS = (0.05, 0.01)
SIZES = ((3, 3), (3, 5), (5, 5))
REAL_SIZES = ((3, 3), (5, 5))
REAL_CELLS = 40_000
BLOCK = 250  # model cells drawn at once: memory ~ BLOCK x runs x sentences x 8 bytes a side
# the committed records of the real regimes: sweeps/results/mini/records of a checkout
RECORDS = Path(__file__).resolve().parents[2] / "sweeps" / "results" / "mini" / "records"


@dataclass(frozen=True)
class Regime:
    """Where the noise of a null cell comes from: ``seed_sd`` the runs' level (logit scale), ``sentence_sd`` each
    system's own luck per sentence (shared by its runs; redrawn with the test set)."""

    name: str
    seed_sd: float
    sentence_sd: float


REGIMES = (Regime("seed", 0.10, 0.0), Regime("sentence", 0.0, 0.5), Regime("both", 0.07, 0.35))


@dataclass(frozen=True)
class RealSource:
    """A set of committed runs that a real regime is fitted to: ``rows`` x ``seeds`` jobs of ``pair``, scored on
    test set ``test`` by ``metric``."""

    key: str
    label: str
    pair: str
    rows: tuple[str, ...]
    seeds: tuple[int, ...]
    test: str
    metric: str


REAL = (
    RealSource(
        "en_de",
        "En→De",
        "en_de",
        ("baseline", "mean_residual", "self_attentive_content"),
        (1, 2, 3, 4, 5),
        "nt14",
        "bleu_tok",
    ),
    RealSource(
        "lm",
        "LM",
        "lm_text",
        ("lm_lstm", "lm_attention", "lm_4gram", "lm_mean_residual", "lm_self_attentive_residual"),
        (1, 2, 3),
        "test",
        "ppl",
    ),
)


def band(alpha: float, cells: int, spread: float = 0.0) -> tuple[float, float]:
    """Where a calibrated test's rejection rate lies at ``cells`` null cells: alpha +- 3 sqrt(alpha (1 - alpha) /
    cells + spread²), ``spread`` the sd of the rate itself over datasets (the splits'), rounded outward to 0.001."""
    half = 3 * math.sqrt(alpha * (1 - alpha) / cells + spread**2)
    return max(0.0, math.floor(1000 * (alpha - half) + 1e-9) / 1000), math.ceil(1000 * (alpha + half) - 1e-9) / 1000


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


# --- the regime of the real runs -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fitted:
    """A real source's runs and the additive model fitted to them (the module's docstring): ``psi`` each system's
    pseudo-values ``(seeds, sentences)``, ``scores`` its runs' corpus scores; ``difficulty`` ``(sentences,)``,
    ``residuals`` ``(runs, sentences)`` (the two-way residuals of every run, rescaled), ``seed_sd`` and
    ``interaction_sd`` on the score's scale (one run's score; one sentence's pseudo-value)."""

    source: RealSource
    psi: tuple[np.ndarray, ...]
    scores: tuple[np.ndarray, ...]
    difficulty: np.ndarray
    residuals: np.ndarray
    seed_sd: float
    interaction_sd: float
    own: float  # the pooled run x sentence mean square: a run's own sentence noise is own / N

    @property
    def higher_is_better(self) -> bool:
        return METRIC_SCORERS[self.source.metric].higher_is_better

    @property
    def seed_variance(self) -> float:
        """The pooled variance of one run's score over seeds on this test set (seed_sd² + own / N)."""
        return self.seed_sd**2 + self.own / self.difficulty.size


def read_runs(source: RealSource, records: Path = RECORDS) -> list[list[np.ndarray]]:
    """Each row's runs' per-sentence statistics for the source's test set and metric, from ``records``.

    :raises InputError: naming the record, where one is missing or lacks the test set or the metric."""
    rows = []
    for row in source.rows:
        runs = []
        for seed in source.seeds:
            path = records / f"{source.pair}.{row}.s{seed}.json"
            try:
                table = read_sentence_stats(path)
                runs.append(np.asarray(table[source.test][source.metric], dtype=np.float64))
            except (ValueError, KeyError, TypeError) as err:
                raise InputError(
                    f"{path}: no {source.metric} statistics on {source.test!r} for the real regime ({err})"
                ) from err
        rows.append(runs)
    return rows


@functools.cache
def fit(source: RealSource, records: Path = RECORDS) -> Fitted:
    """The additive model of a real source's runs (the module's docstring)."""
    rows = read_runs(source, records)
    psi = tuple(seed_tests.pseudo_values(runs, source.metric) for runs in rows)
    scores = tuple(seed_tests.run_scores(runs, source.metric) for runs in rows)
    n, size = psi[0].shape
    residuals = []
    for p in psi:
        r = p - p.mean(axis=1, keepdims=True) - p.mean(axis=0, keepdims=True) + p.mean()
        residuals.append(r * math.sqrt(n / (n - 1) * size / (size - 1)))  # E[r²] = σ_e² (n - 1)(N - 1) / (nN)
    own = float(np.mean([seed_tests.own_noise(p) for p in psi]))
    seed_variance = float(np.mean([s.var(ddof=1) for s in scores]))
    means = np.stack([p.mean(axis=0) for p in psi])  # (systems, sentences)
    interaction = means - means.mean(axis=1, keepdims=True) - means.mean(axis=0, keepdims=True) + means.mean()
    interaction_ms = float((interaction**2).sum() / ((len(psi) - 1) * (size - 1)))
    return Fitted(
        source,
        psi,
        scores,
        means.mean(axis=0),
        np.concatenate(residuals),
        math.sqrt(max(seed_variance - own / size, 0.0)),
        math.sqrt(max(interaction_ms - own / n, 0.0)),
        own,
    )


def model_cells(
    rng: np.random.Generator, fitted: Fitted, runs: tuple[int, int], count: int, shift: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` cells of the fitted model: pseudo-values ``(count, n_r, N)`` and ``(count, n_b, N)``; ``shift``
    added to every pseudo-value of the row (a true difference; 0 for a null cell)."""
    size = fitted.difficulty.size
    columns = np.arange(size)
    sides = []
    for n, offset in zip(runs, (shift, 0.0), strict=True):
        pick = rng.integers(
            0, len(fitted.residuals), (count, n, size), dtype=np.uint8 if len(fitted.residuals) < 256 else np.int64
        )
        noise = fitted.residuals[pick, columns]
        noise += rng.normal(0.0, fitted.seed_sd, (count, n, 1))
        if fitted.interaction_sd:
            noise += rng.normal(0.0, fitted.interaction_sd, (count, 1, size))
        sides.append(noise + fitted.difficulty + offset)
    return sides[0], sides[1]


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
        raise InputError(f"--runs {runs[0]}v{runs[1]}: the {fitted.source.label} runs are {total}, too few to split")
    rng = _real_rng(seed, runs, fitted.source, 1)
    order = np.argsort(rng.random((splits, total)), axis=1)
    row, base = order[:, : runs[0]], order[:, runs[0] : runs[0] + runs[1]]
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


def parse_regimes(text: str) -> tuple[str, ...]:
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",")))
    if not kinds or any(k not in ("synthetic", "real") for k in kinds):
        raise InputError(f"--regimes={text!r}: give synthetic, real or both, comma-separated")
    return kinds


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sarnmt.sweep.calibration", description=__doc__.split("\n")[0])
    parser.add_argument("--cells", default="2000", help="null cells per synthetic regime and run count (2000)")
    parser.add_argument("--resamples", default="400", help="bootstrap resamples per synthetic cell (400)")
    parser.add_argument("--sentences", default="300", help="test sentences per synthetic cell (300)")
    parser.add_argument("--seed", default="0", help="the simulation's generator seed (0)")
    default_runs = ",".join(f"{a}v{b}" for a, b in SIZES)
    parser.add_argument("--runs", default=None, help=f"run counts, row v baseline ({default_runs}; real: 3v3,5v5)")
    parser.add_argument(
        "--real-cells", default=str(REAL_CELLS), help=f"null cells and splits a real line ({REAL_CELLS})"
    )
    parser.add_argument("--regimes", default="synthetic,real", help="synthetic, real or both (both)")
    parser.add_argument("--records", default=str(RECORDS), help="the real runs' records (the mini records)")
    args = parser.parse_args(argv)
    with reported():
        cells = _positive("--cells", 10)(args.cells)
        resamples = _positive("--resamples", 50)(args.resamples)
        sentences = _positive("--sentences", 10)(args.sentences)
        seed = _positive("--seed", 0)(args.seed)
        real_cells = _positive("--real-cells", 100)(args.real_cells)
        kinds = parse_regimes(args.regimes)
        sizes = parse_runs(args.runs) if args.runs else None
        rates = []
        if "synthetic" in kinds:
            rates += calibration_table(cells, resamples, sentences, seed, sizes or SIZES)
        if "real" in kinds:
            rates += real_table(real_cells, seed, sizes or REAL_SIZES, Path(args.records))
        print(markdown(rates), flush=True)


if __name__ == "__main__":
    main()
