"""Writing figures: matplotlib's Agg backend (no display needed), each figure as PNG and SVG."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (imported on first use: the commands that draw nothing stay light)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, stem: Path, dpi: int = 130) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg`` and close the figure.  :returns: the two paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.parent / f"{stem.name}.png", stem.parent / f"{stem.name}.svg"]  # not with_suffix: names hold dots
    fig.savefig(paths[0], dpi=dpi, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    pyplot().close(fig)
    return paths
