"""How many seeds a row would need: the footer's power line (:mod:`sarnmt.sweep.footer`), from the seed spread
pooled over a table's cells and the gain the paper reports."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from statistics import NormalDist

POWER_ALPHA, POWER = 0.05, 0.8


def pooled_sd(cells: Sequence[Sequence[float]]) -> tuple[float, int] | None:
    """The pooled sample sd over seeds of several cells' scores, sqrt(sum (n_i - 1) s_i^2 / sum (n_i - 1)), and
    its degrees of freedom; cells with one run add nothing; None without any cell of two runs."""
    parts = [(len(c) - 1, statistics.variance(c)) for c in cells if len(c) > 1]
    df = sum(d for d, _ in parts)
    if not df:
        return None
    return math.sqrt(sum(d * v for d, v in parts) / df), df


def seeds_for_power(sd: float, effect: float, alpha: float = POWER_ALPHA, power: float = POWER) -> int | None:
    """Seeds per system for a one-sided two-sample comparison of seed means at level ``alpha`` to detect a true
    difference ``effect`` with probability ``power`` when the seed sd is ``sd``: n = 2((z_(1-alpha) + z_power) sd /
    effect)^2 rounded up, at least 2 (the normal approximation; None for an effect <= 0)."""
    if effect <= 0:
        return None
    z = NormalDist().inv_cdf(1.0 - alpha) + NormalDist().inv_cdf(power)
    return max(2, math.ceil(2.0 * (z * sd / effect) ** 2))
