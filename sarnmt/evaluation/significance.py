"""Significance of BLEU differences between systems, the first system being the baseline.

Three paired tests:

- **paired bootstrap resampling** (Koehn 2004) and **paired approximate randomisation** (Riezler & Maxwell 2005),
  both sacrebleu's own :class:`sacrebleu.significance.PairedTest` (seeded by ``SACREBLEU_SEED``, 12345 by default);
  the bootstrap run also gives every system's 95% confidence interval. Both are **two-sided**: their statistic is
  |BLEU(system) − BLEU(baseline)|, so a system clearly *worse* than the baseline gets a small p too (read the sign
  of Δ), and, by MultEval's convention that sacrebleu follows, a system identical to the baseline gets
  1 / (samples + 1), not 1;
- the paper's **one-tailed paired t-test** (Section 6.3: "* p < 0.05, ** p < 0.01"). The paper does not say what
  the samples are; here they are **per-sentence BLEU** (sacrebleu ``sentence_score``: exponential smoothing,
  effective n-gram order), one pair per test sentence, so n is the number of sentences and the test is
  H1: mean(sBLEU(system) − sBLEU(baseline)) > 0 with Student's t distribution, n − 1 degrees of freedom.

Markers: ``*`` for p < 0.05, ``**`` for p < 0.01.

These tests compare single outputs. The sweep's tables (:mod:`sarnmt.sweep.stats`) compare cells of several training
runs: there the markers are a seed-aware two-level bootstrap over runs and test sentences (one-sided; Koehn 2004,
Clark et al. 2011), and this module's t-test is the sentence-level test with each sentence's score averaged over a
cell's seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from sarnmt.evaluation.bleu import bleu_metric


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


def compare_systems(
    names: Sequence[str],
    systems: Sequence[Sequence[str]],
    refs: Sequence[str],
    tokenize: str = "13a",
    lowercase: bool = False,
    n_bootstrap: int = 1000,
    n_randomization: int = 10_000,
) -> tuple[list[SystemResult], str]:
    """BLEU, 95% CI and p-values of every system against ``systems[0]``.

    :returns: one result per system and the sacrebleu BLEU signature.
    """
    named = [(name, list(hyps)) for name, hyps in zip(names, systems, strict=True)]
    results, signature = [], ""
    if len(named) == 1:
        metric = bleu_metric(refs, tokenize, lowercase)
        score = metric.corpus_score(named[0][1], None, n_bootstrap=n_bootstrap)
        ci = score._ci if score._ci is not None else 0.0
        return [SystemResult(named[0][0], score.score, ci)], str(metric.get_signature())
    metrics = {"BLEU": bleu_metric(refs, tokenize, lowercase)}
    sigs, boot = PairedTest(named, metrics, None, test_type="bs", n_samples=n_bootstrap)()
    _, rand = PairedTest(named, metrics, None, test_type="ar", n_samples=n_randomization)()
    signature = str(sigs["BLEU"])
    base_sentences = sentence_bleu(named[0][1], refs, tokenize, lowercase)
    for k, (name, hyps) in enumerate(named):
        row = SystemResult(name, boot["BLEU"][k].score, boot["BLEU"][k].ci)
        if k > 0:
            row.p_bootstrap, row.p_randomization = boot["BLEU"][k].p_value, rand["BLEU"][k].p_value
            row.t_statistic, row.p_t_test = paired_t_test(
                sentence_bleu(hyps, refs, tokenize, lowercase), base_sentences
            )
        results.append(row)
    return results, signature


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
