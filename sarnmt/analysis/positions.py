"""Figure 2 (§8.1): where each prediction's target self-attention peaks, as a position relative to the word
being predicted, one curve per model.

The paper: "We selected, at each prediction, the preceding word with maximal weight, and counted its relative
position. We normalized the count by the number of previous words at the time of each prediction."

Prediction r (0-based: the word ``target[r]``, or the final EOS) attends over history items ``0..r`` (layout of
:mod:`~sarnmt.decoding.attention_file`): item c >= 1 is the word ``target[c - 1]``, at relative position
``c - 1 - r`` (item r is the previous word, -1), and item 0 is the zero slot before the first word. The zero slot is
not a word: a prediction whose largest weight is on it is counted apart (``start``), not at a relative position
(at -(r + 1) it would spread over every distance). Per relative position -k:

- ``count[k]``: predictions whose largest weight is at -k;
- ``weighted[k]``: the same predictions, each counted 1/m, m = r + 1 the number of items it chose among (the
  paper's normalisation, read literally); ``percent[k] = 100 · weighted[k] / (Σ weighted + start_weighted)`` is the
  curve drawn (with ``start_percent``, the zero slot's share, the percentages sum to 100);
- ``opportunities[k]``: predictions that could have chosen -k (r >= k), and ``rate[k] = count[k] /
  opportunities[k]``, the other reading of "normalised by the number of previous words" (in the CSV, not drawn).

The first prediction (r = 0) has only the zero slot and chooses nothing: it is left out. Peaks further back than
``max_distance`` (50, the paper's maximum length) are counted in ``beyond`` and left out of the percentages. Models
without a target self-attention (the baseline; the mean residual, whose weights are uniform by definition, eq. 9)
have no curve. The Memory RNN and the self-attentive RNN attend over decoder states s_i: item i is the state at word i.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sarnmt.analysis.figures import pyplot, save


@dataclass
class Distribution:
    """Index k of each array is relative position -k (index 0 unused).  :param start: peaks on the zero slot.
    :param start_weighted: those peaks counted 1/m each.  :param beyond: peaks further than ``max_distance``.
    :param predictions: predictions counted (first predictions left out)."""

    count: np.ndarray
    weighted: np.ndarray
    opportunities: np.ndarray
    start: int
    start_weighted: float
    beyond: int
    predictions: int

    @property
    def total(self) -> float:
        return float(self.weighted.sum()) + self.start_weighted

    @property
    def percent(self) -> np.ndarray:
        return 100.0 * self.weighted / self.total if self.total else np.zeros_like(self.weighted)

    @property
    def start_percent(self) -> float:
        return 100.0 * self.start_weighted / self.total if self.total else 0.0

    @property
    def rate(self) -> np.ndarray:
        return np.divide(self.count, self.opportunities, out=np.zeros_like(self.weighted), where=self.opportunities > 0)

    @property
    def farthest(self) -> int:
        """The largest k with an opportunity (the longest history seen, up to ``max_distance``)."""
        nonzero = np.flatnonzero(self.opportunities)
        return int(nonzero[-1]) if nonzero.size else 1


def distribution(matrices: Iterable[np.ndarray], max_distance: int = 50) -> Distribution:
    """Count the peaks of every row of every matrix.

    :param matrices: target self-attention matrices, each (n, n) or (n, n + 1), row r over items 0..r.
    """
    count = np.zeros(max_distance + 1)
    weighted = np.zeros(max_distance + 1)
    opportunities = np.zeros(max_distance + 1)
    start = beyond = predictions = 0
    start_weighted = 0.0
    for matrix in matrices:
        matrix = np.asarray(matrix)
        for r in range(1, matrix.shape[0]):
            items = r + 1
            item = int(matrix[r, :items].argmax())
            predictions += 1
            opportunities[1 : min(r, max_distance) + 1] += 1
            if item == 0:
                start += 1
                start_weighted += 1.0 / items
                continue
            k = r + 1 - item  # item c is at relative position c - 1 - r = -k
            if k > max_distance:
                beyond += 1
                continue
            count[k] += 1
            weighted[k] += 1.0 / items
    return Distribution(count, weighted, opportunities, start, start_weighted, beyond, predictions)


def write_csv(path: Path, dists: dict[str, Distribution]) -> None:
    """One row per (model, relative position) with every measure, and one for the zero slot."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["model", "relative_position", "count", "weighted", "percent", "opportunities", "rate"])
        for name, dist in dists.items():
            start = [dist.start, f"{dist.start_weighted:.6f}", f"{dist.start_percent:.4f}", "", ""]
            writer.writerow([name, "zero slot", *start])
            for k in range(1, dist.farthest + 1):
                writer.writerow(
                    [
                        name,
                        -k,
                        int(dist.count[k]),
                        f"{dist.weighted[k]:.6f}",
                        f"{dist.percent[k]:.4f}",
                        int(dist.opportunities[k]),
                        f"{dist.rate[k]:.6f}",
                    ]
                )


def plot(dists: dict[str, Distribution], stem: Path, title: str, log_scale: bool = False) -> list[Path]:
    """The curves of Figure 2, relative position -1 (left) to the farthest seen."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    farthest = max(d.farthest for d in dists.values())
    markers = "os^Dv<>p"
    for i, (name, dist) in enumerate(dists.items()):
        ks = np.arange(1, farthest + 1)
        ax.plot(
            -ks,
            dist.percent[ks],
            marker=markers[i % len(markers)],
            markersize=3.5,
            linewidth=1.3,
            label=f"{name} ({dist.predictions:,} predictions; {dist.start_percent:.1f}% on the zero slot)",
        )
    ax.set_xlim(-0.5, -farthest - 0.5)  # -1 on the left, as the paper's "-1 to -50"
    ax.set_xlabel("relative position of the previous word with the largest self-attention weight")
    ax.set_ylabel("% of predictions (each counted 1 / #previous words)")
    if log_scale:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, stem)
