"""How the null data of the seed-aware tests' calibration are built (:mod:`sarnmt.sweep.calibration` runs the tests on
them): two systems with no true difference, each run several times on one test set, drawn from a synthetic model
or from the committed real runs.

**Synthetic regimes** (:data:`REGIMES`, :func:`null_cell`). A null cell is two systems with no true difference,
each run ``n_r`` / ``n_b`` times on one test set of ``sentences`` sentences drawn afresh for every cell.
Per-sentence BLEU statistics (sacrebleu's ``[hyp_len, ref_len, correct_1..4, total_1..4]``, which
:mod:`sarnmt.sweep.stats` scores) are drawn for every run: sentence i of run j of system s matches its n-grams with
probability ``q^n``,

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

- ``model`` (:func:`fit`, :func:`model_cells`): the additive model ψ_sji = d_i + a_si + u_sj + e_sji fitted to the
  runs' jackknife pseudo-values: d_i the sentences' mean pseudo-value over every run; e_sji drawn, for each run and
  sentence, from that sentence's residuals of the two-way decomposition (runs x sentences, within each system;
  rescaled for the degrees of freedom the fit took), so a run's own sentence noise has the real runs' size and
  shape; u_sj ~ N(0, seed_sd) with seed_sd² the pooled seed variance of the runs' scores less their own sentence
  noise (own / N); a_si ~ N(0, interaction_sd) with interaction_sd² the systems x sentences interaction of the
  runs' mean pseudo-values less what their own noise puts there (floored at 0: none in the En→De runs). A run's
  score is the mean of its pseudo-values. Both sides of a cell are drawn from it.
- ``splits`` (:func:`split_indices`): the real runs of the source pooled (15 in each) and split at random into two
  null cells of the run counts (drawn without replacement), every test computed from the runs' own statistics.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sarnmt.errors import InputError
from sarnmt.sweep import seed_tests
from sarnmt.sweep.records import read_sentence_stats
from sarnmt.sweep.stats import METRIC_SCORERS

# the committed records of the real regimes: sweeps/results/mini/records of a checkout
RECORDS = Path(__file__).resolve().parents[2] / "sweeps" / "results" / "mini" / "records"


@dataclass(frozen=True)
class Regime:
    """Where the noise of a synthetic null cell comes from: ``seed_sd`` the runs' level (logit scale),
    ``sentence_sd`` each system's own luck per sentence (shared by its runs; redrawn with the test set)."""

    name: str
    seed_sd: float
    sentence_sd: float


REGIMES = (Regime("seed", 0.10, 0.0), Regime("sentence", 0.0, 0.5), Regime("both", 0.07, 0.35))


def null_cell(
    rng: np.random.Generator, regime: Regime, runs: tuple[int, int], sentences: int = 300, mu: float = 0.9
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """One synthetic null cell: per-sentence BLEU statistics ``(sentences, 10)`` of ``runs[0]`` runs of a system and
    ``runs[1]`` of its baseline, the two drawn from the same distribution (the module's docstring: ``q =
    sigmoid(mu + d_i + a_si + u_sj)``)."""
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


# --- the regime of the real runs -----------------------------------------------------------------------------------
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


@dataclass(frozen=True)
class Fitted:
    """A real source's runs and the additive model fitted to them (the module's docstring): ``psi`` each system's
    pseudo-values ``(seeds, sentences)``, ``scores`` its runs' corpus scores ``(seeds,)``; ``difficulty``
    ``(sentences,)``, ``residuals`` ``(runs, sentences)`` (the two-way residuals of every run, rescaled),
    ``seed_sd`` and ``interaction_sd`` on the score's scale (one run's score; one sentence's pseudo-value)."""

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
    """The additive model ψ_sji = d_i + a_si + u_sj + e_sji of a real source's runs (the module's docstring)."""
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


def split_indices(
    rng: np.random.Generator, total: int, runs: tuple[int, int], count: int
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random splits of ``total`` pooled runs into two null cells of ``runs``, drawn without replacement:
    the indices ``(count, n_r)`` of the row's runs and ``(count, n_b)`` of the baseline's (into the runs of a
    source pooled over its systems, ``np.concatenate(fitted.psi)``)."""
    order = np.argsort(rng.random((count, total)), axis=1)
    return order[:, : runs[0]], order[:, runs[0] : runs[0] + runs[1]]
