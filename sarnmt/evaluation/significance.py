"""Significance of BLEU differences between systems, the first system being the baseline.

Three paired tests:

- **paired bootstrap resampling** (Koehn 2004) and **paired approximate randomisation** (Riezler & Maxwell 2005),
  sacrebleu's own :class:`sacrebleu.significance.PairedTest` (seeded by ``SACREBLEU_SEED``, 12345 by default), run
  here block by block (:func:`bootstrap_scores`, :func:`randomization_p`: the same draws and numbers, in memory
  bounded by a block instead of resamples × sentences; 1 to :data:`MAX_RESAMPLES` resamples);
  the bootstrap run also gives every system's 95% confidence interval. Both are **two-sided**: their statistic is
  |BLEU(system) − BLEU(baseline)|, so a system clearly *worse* than the baseline gets a small p too (read the sign
  of Δ), and, by MultEval's convention that sacrebleu follows, a system identical to the baseline gets
  1 / (samples + 1), not 1;
- the paper's **one-tailed paired t-test** (Section 6.3: "* p < 0.05, ** p < 0.01"). The paper does not say what
  the samples are; here they are **per-sentence BLEU** (sacrebleu ``sentence_score``: exponential smoothing,
  effective n-gram order), one pair per test sentence, so n is the number of sentences and the test is
  H1: mean(sBLEU(system) − sBLEU(baseline)) > 0 with Student's t distribution, n − 1 degrees of freedom.

Markers: ``*`` for p < 0.05, ``**`` for p < 0.01.

These tests compare single outputs. The sweep's tables (:mod:`sarnmt.sweep.seed_tests`) compare cells of several
training runs: there the markers are a seed-aware test, Welch's t on the seed means with the test set's resampling
variance added (one-sided; runs and test sentences both vary, after Koehn 2004 and Clark et al. 2011), and this module's
t-test is the sentence-level test with each sentence's score averaged over a cell's seeds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.significance import estimate_ci

from sarnmt.errors import check_range
from sarnmt.evaluation.bleu import bleu_metric

# the most bootstrap resamples or randomisation trials `score` runs (n_bootstrap, n_randomization): each one's score
# is kept (8 bytes; about 20 µs to compute), so a million take 8 MB per array and some 20 s per system and test
MAX_RESAMPLES = 1_000_000
# sentences drawn per block of resamples: the indices (8 bytes each) and their gathered statistics (40 bytes) of one
# block, about 50 MB, are all the resampling holds, whatever the counts and the test set's size
BLOCK_DRAWS = 1 << 20


def marker(p_value: float | None) -> str:
    """``**`` for p < 0.01, ``*`` for p < 0.05, else empty."""
    if p_value is None:
        return ""
    return "**" if p_value < 0.01 else "*" if p_value < 0.05 else ""


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes §6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def student_t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t distribution with ``df`` degrees of freedom."""
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def paired_t_test(system: Sequence[float], baseline: Sequence[float]) -> tuple[float, float]:
    """One-tailed paired t-test of H1: mean(system − baseline) > 0.  :returns: ``(t, p)``."""
    if len(system) != len(baseline) or len(system) < 2:
        raise ValueError(f"paired t-test needs two equally long samples of >= 2, got {len(system)}, {len(baseline)}")
    diffs = [s - b for s, b in zip(system, baseline, strict=True)]
    n = len(diffs)
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    if var == 0.0:
        return (math.inf, 0.0) if mean > 0 else (-math.inf if mean < 0 else 0.0, 1.0)
    t = mean / math.sqrt(var / n)
    return t, student_t_sf(t, n - 1)


def sentence_bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: str, lowercase: bool) -> list[float]:
    """Per-sentence BLEU (exp smoothing, effective order), the t-test's samples."""
    metric = BLEU(tokenize=tokenize, lowercase=lowercase, force=True, effective_order=True)
    return [metric.sentence_score(h, [r]).score for h, r in zip(hyps, refs, strict=True)]


@dataclass
class SystemResult:
    """One system's row.  ``p_*`` are None for the baseline."""

    name: str
    bleu: float
    ci: float
    p_bootstrap: float | None = None
    p_randomization: float | None = None
    t_statistic: float | None = None
    p_t_test: float | None = None


def _seed() -> int | None:
    """sacrebleu's seed: ``SACREBLEU_SEED`` (12345 by default; ``none``: from the operating system)."""
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    return None if seed.lower() == "none" else int(seed)


def _block_rows(sentences: int) -> int:
    """Resamples per block: about :data:`BLOCK_DRAWS` drawn sentences, a multiple of 32 (sacrebleu draws the
    randomisation's coin flips 32 to a 32-bit word, so blocks of whole words draw exactly its sequence)."""
    return max(32, BLOCK_DRAWS // max(sentences, 1) // 32 * 32)


def bootstrap_scores(stats: np.ndarray, metric: BLEU, n_samples: int, seed: int | None) -> np.ndarray:
    """The corpus BLEU of ``n_samples`` bootstrap resamples of the sentences, drawn block by block: sacrebleu's
    ``_bootstrap_resample`` and ``_paired_bs_test`` (the same generator, draws and float32 sums, hence the same
    scores), in memory bounded by the block instead of ``n_samples × sentences``.

    :param stats: per-sentence statistics, shape (sentences, k), float32.
    """
    rng = np.random.default_rng(seed)
    n, scores, step = len(stats), np.empty(n_samples), _block_rows(len(stats))
    for start in range(0, n_samples, step):
        rows = min(step, n_samples - start)
        sums = stats[rng.choice(n, size=(rows, n), replace=True)].sum(axis=1)
        scores[start : start + rows] = [metric._compute_score_from_stats(row).score for row in sums]
    return scores


def randomization_p(
    baseline: np.ndarray, system: np.ndarray, metric: BLEU, n_samples: int, seed: int | None, observed: float
) -> float:
    """sacrebleu's paired approximate randomisation (``_paired_ar_test``: the same coin flips, drawn block by
    block): the share of trials whose |Δ| exceeds ``observed``, MultEval's (c + 1) / (n + 1).

    :param baseline: per-sentence statistics, shape (sentences, k), integers.  :param system: the same.
    """
    rng = np.random.default_rng(seed)
    n, exceeded, step = len(baseline), 0, _block_rows(len(baseline))
    for start in range(0, n_samples, step):
        rows = min(step, n_samples - start)
        pos = rng.integers(2, size=(rows, n), dtype=bool)
        neg = ~pos
        shuf_a, shuf_b = pos @ baseline + neg @ system, neg @ baseline + pos @ system
        scores_a = np.array([metric._aggregate_and_compute(x).score for x in shuf_a[:, None]])
        scores_b = np.array([metric._aggregate_and_compute(x).score for x in shuf_b[:, None]])
        exceeded += int(np.sum(np.abs(scores_a - scores_b) > observed))
    return (exceeded + 1) / (n_samples + 1)


def check_samples(n_bootstrap: int, n_randomization: int) -> None:
    """:raises InputError: for a resample count below 1 or above :data:`MAX_RESAMPLES`, naming the key."""
    why = "each resample's score is kept to compute the interval and p-value: about 8 bytes and 20 µs each"
    check_range("n_bootstrap", n_bootstrap, 1, MAX_RESAMPLES, why)
    check_range("n_randomization", n_randomization, 1, MAX_RESAMPLES, why)


def compare_systems(
    names: Sequence[str],
    systems: Sequence[Sequence[str]],
    refs: Sequence[str],
    tokenize: str = "13a",
    lowercase: bool = False,
    n_bootstrap: int = 1000,
    n_randomization: int = 10_000,
) -> tuple[list[SystemResult], str]:
    """BLEU, 95% CI and p-values of every system against ``systems[0]``: sacrebleu's numbers
    (:class:`sacrebleu.significance.PairedTest`, the same seed and draws), resampled in blocks of
    :data:`BLOCK_DRAWS` drawn sentences (memory bounded by the block, not by ``n_bootstrap × sentences``).

    :param n_bootstrap: bootstrap resamples (1 to :data:`MAX_RESAMPLES`).
    :param n_randomization: randomisation trials (1 to :data:`MAX_RESAMPLES`).
    :returns: one result per system and the sacrebleu BLEU signature, with the seed and the counts used
        (``bs:``, and ``ar:`` when there are systems to compare).

    The counts and ``tokenize`` are trusted: ``score`` checks them where they enter (:func:`check_samples`,
    :data:`~sarnmt.evaluation.bleu.TOKENIZERS`).
    """
    assert 1 <= n_bootstrap <= MAX_RESAMPLES and 1 <= n_randomization <= MAX_RESAMPLES, "unchecked resample counts"
    metric = bleu_metric(refs, tokenize, lowercase)
    seed = _seed()
    paired_seed = seed if seed else None  # PairedTest's rule (a seed of 0 draws from the operating system)
    stats = [metric._extract_corpus_statistics(list(hyps), None) for hyps in systems]
    base_scores = bootstrap_scores(np.array(stats[0], dtype="float32"), metric, n_bootstrap, seed)
    signature = metric.get_signature()
    signature.update("seed", str(seed).lower())
    signature.update("bs", n_bootstrap)
    if len(systems) > 1:
        signature.update("ar", n_randomization)
    base = metric._aggregate_and_compute(stats[0])
    results = [SystemResult(names[0], base.score, float(estimate_ci(base_scores)[1]))]
    if len(systems) == 1:
        return results, str(signature)
    if paired_seed != seed or seed is None:
        base_scores = bootstrap_scores(np.array(stats[0], dtype="float32"), metric, n_bootstrap, paired_seed)
    base_sentences = sentence_bleu(systems[0], refs, tokenize, lowercase)
    for name, hyps, sys_stats in zip(names[1:], systems[1:], stats[1:], strict=True):
        score = metric._aggregate_and_compute(sys_stats).score
        observed = abs(base.score - score)
        sys_scores = bootstrap_scores(np.array(sys_stats, dtype="float32"), metric, n_bootstrap, paired_seed)
        diffs = np.abs(sys_scores - base_scores)
        p_bootstrap = (int(np.sum(diffs - diffs.mean() > observed)) + 1) / (n_bootstrap + 1)
        integers = np.array(stats[0]), np.array(sys_stats)
        p_randomization = randomization_p(*integers, metric, n_randomization, paired_seed, observed)
        t, p_t = paired_t_test(sentence_bleu(hyps, refs, tokenize, lowercase), base_sentences)
        results.append(
            SystemResult(name, score, float(estimate_ci(sys_scores)[1]), p_bootstrap, p_randomization, t, p_t)
        )
    return results, str(signature)


def markdown_table(results: Sequence[SystemResult], signature: str) -> str:
    """A Markdown table; BLEU carries the paper's markers (from the t-test), each p-value its own."""

    def p(value: float | None) -> str:
        return "—" if value is None else f"{value:.4f}{marker(value)}"

    base = results[0].bleu
    lines = [
        "| system | BLEU | 95% CI | Δ | p (paired bootstrap) | p (approx. randomisation) | p (one-tailed t-test) |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(results):
        delta = "—" if k == 0 else f"{r.bleu - base:+.2f}"
        lines.append(
            f"| {r.name} | {r.bleu:.2f}{marker(r.p_t_test)} | ±{r.ci:.2f} | {delta} | {p(r.p_bootstrap)} "
            f"| {p(r.p_randomization)} | {p(r.p_t_test)} |"
        )
    lines.append("")
    lines.append("BLEU (paper style): " + " / ".join(f"{r.bleu:.1f}" for r in results))
    lines.append(f"signature: {signature}")
    lines.append(
        "markers: * p < 0.05, ** p < 0.01 (BLEU column: the paper's one-tailed paired t-test over per-sentence BLEU); "
        "bootstrap and randomisation test |Δ| (two-sided: read the sign of Δ)"
    )
    return "\n".join(lines)
