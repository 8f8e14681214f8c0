"""Drawing trees (Figure 4): several trees of one sentence stacked, e.g. Algorithm 1's, the gold tree and the
right-branching one, words along the bottom and each node above the middle of its children."""

from __future__ import annotations

from pathlib import Path

from sarnmt.analysis.figures import pyplot, save
from sarnmt.analysis.trees import Tree

UNLABELLED = {"", "X"}  # the label of the built trees' nodes, not drawn


def _depth(tree: Tree | str) -> int:
    return 1 + max(_depth(c) for c in tree.children) if isinstance(tree, Tree) else 0


def leaf_positions(words: list[str]) -> list[float]:
    """Each word's centre, in character widths, so that long words do not overlap: a word takes its length (at
    least 3) plus 2 of space."""
    positions, left = [], 0.0
    for word in words:
        width = max(len(word), 3) + 2
        positions.append(left + width / 2)
        left += width
    return positions


def _draw(ax, tree: Tree | str, first_leaf: int, depth: int, bottom: int, xs: list[float]) -> tuple[float, float, int]:
    """Draw ``tree`` whose first word is word ``first_leaf``, words at ``xs``.  :returns: its (x, y) and the next
    word index."""
    if not isinstance(tree, Tree):
        ax.text(xs[first_leaf], bottom, tree, ha="center", va="top", fontsize=8)
        return xs[first_leaf], float(bottom), first_leaf + 1
    points, nxt = [], first_leaf
    for child in tree.children:
        x, y, nxt = _draw(ax, child, nxt, depth + 1, bottom, xs)
        points.append((x, y))
    x, y = (points[0][0] + points[-1][0]) / 2, float(-depth)
    for cx, cy in points:
        ax.plot([x, cx], [y, cy + (0.12 if cy == bottom else 0.0)], color="0.35", linewidth=0.8)
    if tree.label not in UNLABELLED:
        ax.text(x, y, tree.label, ha="center", va="bottom", fontsize=6.5, color="tab:blue")
    ax.plot([x], [y], marker="o", markersize=2.5, color="0.2")
    return x, y, nxt


def plot_trees(trees: list[tuple[str, Tree | str]], stem: Path, title: str) -> list[Path]:
    """One panel per ``(caption, tree)``, all over the same words.  :returns: the PNG and SVG paths."""
    plt = pyplot()
    words = max((t.leaves() if isinstance(t, Tree) else [t] for _, t in trees), key=len)
    xs = leaf_positions(words)
    span = xs[-1] + (max(len(words[-1]), 3) + 2) / 2
    depths = [_depth(t) for _, t in trees]
    heights = [0.3 * d + 0.9 for d in depths]
    fig, axes = plt.subplots(
        len(trees),
        1,
        figsize=(max(5.0, 0.075 * span + 0.5), sum(heights)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, (caption, tree), depth in zip(axes[:, 0], trees, depths, strict=True):
        bottom = -(depth + 1)
        _draw(ax, tree, 0, 0, bottom, xs)
        ax.set_xlim(0, span)
        ax.set_ylim(bottom - 0.9, 0.6)
        ax.set_title(caption, fontsize=9, loc="left")
        ax.set_axis_off()
    fig.suptitle(title, fontsize=10)
    return save(fig, stem)
