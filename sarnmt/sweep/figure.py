"""A table's figure: one panel per column with every seed's score, the mean, the markers and the seed-aware
interval of the difference from the baseline (written beside the table as ``table<N>.png``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from sarnmt.sweep.render import heading, markers
from sarnmt.sweep.seed_tests import METHOD
from sarnmt.sweep.spec import METRICS, Scale, Table

AXIS_LABELS = {"ppl": "test perplexity (lower is better)"}


def plot(table: Table, scale: Scale, cells: dict, path: Path, method: str = METHOD) -> None:
    """One panel per column: every seed's score as a dot per row, the mean as a bar, the markers above, and the
    seed-aware 95% interval of the difference drawn around the mean (or n/a); ``method`` names the seed-aware test
    (:data:`sarnmt.sweep.seed_tests.SEED_TESTS`). A column is named by what ran where the scale says, the paper's
    column in brackets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1,
        len(table.columns),
        figsize=(4.2 * len(table.columns) + (3.0 if len(table.columns) == 1 else 0.0), 0.7 * len(table.rows) + 2.0),
        squeeze=False,
        sharey=True,
    )
    labels = [r.label for r in table.rows]
    for ax, column in zip(axes[0], table.columns, strict=True):
        base = cells[table.baseline, column.key].score
        values = []  # what the x axis must show: every seed's score and every interval's ends
        for y, row in enumerate(table.rows):
            cell = cells[row.key, column.key]
            if cell.score is None:
                why = f"mixed code: {cell.code}" if cell.mixed else "no runs"
                ax.text(0.02, y, why, va="center", transform=ax.get_yaxis_transform(), color="0.5")
                continue
            colour = "C3" if row.key == table.baseline else "C0"
            ax.barh(y, cell.score.mean, color=colour, alpha=0.25, height=0.6)
            ax.plot(cell.score.scores, [y] * len(cell.score.scores), "o", color=colour, ms=5)
            c = cell.score.comparison
            values += cell.score.scores
            if c is not None and c.low is not None and base is not None:  # the interval of the difference, at base
                ends = [base.mean + c.low, base.mean + c.high]
                ax.plot(ends, [y - 0.38] * 2, "-|", color="0.3", lw=1, ms=5)
                values += ends
            ax.text(
                cell.score.mean, y + 0.33, f"{cell.score.mean:.2f}{markers(cell)}", ha="center", va="bottom", fontsize=8
            )
        if values:
            low, high = min(values), max(values)
            pad = max(0.5, 0.15 * (high - low))
            ax.set_xlim(max(0.0, low - 3 * pad), high + pad)
        ran = scale.ran(column.pair, column.test)
        title = f"{ran} (paper: {column.label})" if ran else f"{column.label}: {scale.pairs[column.pair].label}"
        ax.set_title(textwrap.fill(title, 38), fontsize=8)
        ax.set_xlabel(AXIS_LABELS.get(column.metric, METRICS[column.metric].split(" on ")[0]))
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(labels)), labels)
    axes[0][0].invert_yaxis()
    fig.suptitle(
        f"{heading(table, scale)} — scale {scale.name}\n"
        + textwrap.fill(
            "dots: seeds; bars: mean; whiskers: the baseline's mean + the 95% interval of the difference "
            f"({method}); † ‡ seed-aware test, * ** sentence-level t-test; one-sided",
            60 * len(table.columns) + (40 if len(table.columns) == 1 else 0),
            break_on_hyphens=False,
        ),
        fontsize=8,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
