"""Inter-annotator agreement on the pairwise comparisons that Table 5 counts.

The unit is one (item, pair of systems) comparison, labelled ``>``, ``=`` or ``<`` (the first system ranked
higher than, equal to or lower than the second), taken from ``ranked`` judgements only (skips and flags are not
ratings). With **two annotators**, Cohen's kappa over the comparisons of the items both ranked; with **three or
more**, Fleiss' kappa over the comparisons of the items every one of them ranked (Fleiss' needs the same number of
ratings per unit). Both are (P_o − P_e) / (1 − P_e): Cohen's P_e from each annotator's own label distribution,
Fleiss' from the pooled one. Kappa is undefined (``None``) when P_e = 1, i.e. every label is the same.

Written out here rather than imported: each is a few lines of arithmetic, and the libraries that have them
(statsmodels, scikit-learn) would bring SciPy and more for nothing else in the project.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LABELS = (">", "=", "<")


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa of two annotators' labels of the same units (in the same order)."""
    if len(first) != len(second):
        raise ValueError(f"the two annotators labelled {len(first)} and {len(second)} units")
    n = len(first)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    count_a, count_b = Counter(first), Counter(second)
    expected = sum(count_a[c] * count_b[c] for c in set(count_a) | set(count_b)) / (n * n)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def fleiss_kappa(units: Sequence[Sequence[str]]) -> float | None:
    """Fleiss' kappa: ``units[i]`` holds the m ≥ 2 labels that the m annotators gave unit i."""
    if not units:
        return None
    m = len(units[0])
    if m < 2 or any(len(u) != m for u in units):
        raise ValueError("Fleiss' kappa needs the same number (at least 2) of labels for every unit")
    n = len(units)
    counts = [Counter(u) for u in units]
    agreement = sum((sum(c * c for c in cnt.values()) - m) / (m * (m - 1)) for cnt in counts) / n
    pooled = Counter()
    for cnt in counts:
        pooled.update(cnt)
    expected = sum((c / (n * m)) ** 2 for c in pooled.values())
    return None if expected == 1 else (agreement - expected) / (1 - expected)


def compare(rank_a: int, rank_b: int) -> str:
    """``>`` when the first system is ranked higher (a smaller rank number, 1 = best), ``=`` or ``<``."""
    return ">" if rank_a < rank_b else "=" if rank_a == rank_b else "<"


@dataclass(frozen=True)
class Agreement:
    """:param method: ``Cohen's kappa`` or ``Fleiss' kappa`` (``None`` with fewer than two annotators).
    :param items: items in the computation; ``comparisons`` = items × system pairs."""

    method: str | None
    kappa: float | None
    annotators: int
    items: int
    comparisons: int

    def text(self) -> str:
        if self.method is None:
            n = self.annotators
            return f"not computed ({n} annotator{'' if n == 1 else 's'} with ranked items; it needs 2)"
        if self.items == 0:
            return f"not computed (no item ranked by all {self.annotators} annotators)"
        value = "undefined (every comparison has the same label)" if self.kappa is None else f"{self.kappa:.3f}"
        return (
            f"{self.method} = {value} over {self.comparisons} comparisons ({self.items} items ranked by all "
            f"{self.annotators} annotators)"
        )


def agreement(ranks: Mapping[str, Mapping[int, Mapping[str, int]]], pairs: Sequence[tuple[str, str]]) -> Agreement:
    """:param ranks: annotator → item → system → rank, ``ranked`` judgements only.
    :param pairs: the (first, second) system pairs compared, in table order."""
    raters = sorted(a for a, items in ranks.items() if items)
    if len(raters) < 2:
        return Agreement(None, None, len(raters), 0, 0)
    common = sorted(set.intersection(*(set(ranks[a]) for a in raters)))
    labels = {a: [compare(ranks[a][item][x], ranks[a][item][y]) for item in common for x, y in pairs] for a in raters}
    if len(raters) == 2:
        kappa = cohen_kappa(labels[raters[0]], labels[raters[1]])
        method = "Cohen's kappa"
    else:
        units = list(zip(*(labels[a] for a in raters), strict=True))
        kappa = fleiss_kappa(units)
        method = "Fleiss' kappa"
    return Agreement(method, kappa, len(raters), len(common), len(common) * len(pairs))
