"""Figure 3 (§8.1): one sentence's attention matrices, one column of panels per model.

Top row: the target self-attention as the paper draws it, "with the vertical axis indicating the previous words"
(the history items: ``<s>`` for the zero slot, then the output words) and the predicted words along the
horizontal axis; a darker cell is a larger weight. Bottom row: the source attention (source pieces vertically,
predicted words horizontally). A model without a target self-attention gets a note in its top panel instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sarnmt.analysis.figures import pyplot, save

START = "<s>"  # the label of the zero slot


@dataclass
class Panel:
    """One model's matrices for the sentence.  :param name: the model.  :param source: source pieces (+ EOS).
    :param target: predicted pieces (+ EOS).  :param self_attention: (n, n) or None.  :param src_attention: (n, S)
    or None."""

    name: str
    source: list[str]
    target: list[str]
    self_attention: np.ndarray | None
    src_attention: np.ndarray | None


def history_labels(target: list[str]) -> list[str]:
    """The history items of an n-row matrix: the zero slot, then the first n - 1 predicted words."""
    return [START, *target[:-1]]


def _heatmap(ax, matrix: np.ndarray, rows: list[str], cols: list[str], title: str, fontsize: float) -> object:
    image = ax.imshow(matrix, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=fontsize)
    ax.set_yticks(range(len(rows)), rows, fontsize=fontsize)
    ax.set_title(title, fontsize=9)
    ax.tick_params(length=2)
    return image


def plot(panels: list[Panel], kinds: list[str], stem: Path, title: str) -> list[Path]:
    """Draw ``kinds`` (``self`` and/or ``source``) for every panel.  :returns: the PNG and SVG paths."""
    plt = pyplot()
    longest = max(max(len(p.target), len(p.source)) for p in panels)
    cell = 0.26 if longest <= 30 else 0.18
    fontsize = 8 if longest <= 30 else 6
    width = max(3.2, cell * longest + 1.2)
    fig, axes = plt.subplots(
        len(kinds),
        len(panels),
        figsize=(width * len(panels) + 1.0, width * len(kinds)),
        squeeze=False,
        layout="constrained",
    )
    image = None

    def _missing(ax, text: str) -> None:
        """A panel for what the model does not have: its note in the middle, no axes."""
        ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, transform=ax.transAxes)
        ax.set_axis_off()

    for col, panel in enumerate(panels):
        for row, kind in enumerate(kinds):
            ax = axes[row][col]
            if kind == "self":
                if panel.self_attention is None:
                    _missing(ax, f"{panel.name}:\nno target self-attention")
                    continue
                image = _heatmap(
                    ax,
                    panel.self_attention.T,
                    history_labels(panel.target),
                    panel.target,
                    f"{panel.name}: target self-attention",
                    fontsize,
                )
                ax.set_ylabel("previous words", fontsize=8)
            else:
                if panel.src_attention is None:
                    _missing(ax, f"{panel.name}:\nno source attention")
                    continue
                image = _heatmap(
                    ax, panel.src_attention.T, panel.source, panel.target, f"{panel.name}: source attention", fontsize
                )
                ax.set_ylabel("source words", fontsize=8)
            ax.set_xlabel("predicted words", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    fig.suptitle(title, fontsize=10)
    return save(fig, stem)
