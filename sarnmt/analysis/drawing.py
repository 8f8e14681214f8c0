"""Drawing trees (Figure 4): several trees of one sentence stacked, e.g. Algorithm 1's, the gold tree and the
right-branching one, words along the bottom and each node above the middle of its children. Trees are walked without
recursion; a tree deeper than :data:`MAX_DRAWN_DEPTH` gets a panel saying so instead of a drawing."""

from __future__ import annotations

from pathlib import Path

from sarnmt.analysis.figures import pyplot, save
from sarnmt.analysis.trees import Tree

UNLABELLED = {"", "X"}  # the label of the built trees' nodes, not drawn


MAX_DRAWN_DEPTH = 500  # a deeper tree's panel says so instead (its figure would pass matplotlib's size limit)


def _depth(tree: Tree | str) -> int:
    return tree.depth() if isinstance(tree, Tree) else 0


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
    """Draw ``tree`` whose first word is word ``first_leaf``, words at ``xs`` (without recursion).  :returns: its
    (x, y) and the next word index."""
    if not isinstance(tree, Tree):
        ax.text(xs[first_leaf], bottom, tree, ha="center", va="top", fontsize=8)
        return xs[first_leaf], float(bottom), first_leaf + 1
    nxt = first_leaf
    stack: list[tuple[Tree, int, list[tuple[float, float]]]] = [(tree, depth, [])]  # node, its depth, children drawn
    while True:
        node, level, points = stack[-1]
        if len(points) < len(node.children):
            child = node.children[len(points)]
            if isinstance(child, Tree):
                stack.append((child, level + 1, []))
            else:
                ax.text(xs[nxt], bottom, child, ha="center", va="top", fontsize=8)
                points.append((xs[nxt], float(bottom)))
                nxt += 1
            continue
        stack.pop()
        x, y = (points[0][0] + points[-1][0]) / 2, float(-level)
        for cx, cy in points:
            ax.plot([x, cx], [y, cy + (0.12 if cy == bottom else 0.0)], color="0.35", linewidth=0.8)
        if node.label not in UNLABELLED:
            ax.text(x, y, node.label, ha="center", va="bottom", fontsize=6.5, color="tab:blue")
        ax.plot([x], [y], marker="o", markersize=2.5, color="0.2")
        if not stack:
            return x, y, nxt
        stack[-1][2].append((x, y))


def plot_trees(trees: list[tuple[str, Tree | str]], stem: Path, title: str) -> list[Path]:
    """One panel per ``(caption, tree)``, all over the same words.  :returns: the PNG and SVG paths."""
    plt = pyplot()
    words = max((t.leaves() if isinstance(t, Tree) else [t] for _, t in trees), key=len)
    xs = leaf_positions(words)
    span = xs[-1] + (max(len(words[-1]), 3) + 2) / 2
    depths = [_depth(t) for _, t in trees]
    heights = [0.3 * min(d, MAX_DRAWN_DEPTH) + 0.9 if d <= MAX_DRAWN_DEPTH else 0.9 for d in depths]
    fig, axes = plt.subplots(
        len(trees),
        1,
        figsize=(max(5.0, 0.075 * span + 0.5), sum(heights)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, (caption, tree), depth in zip(axes[:, 0], trees, depths, strict=True):
        if depth > MAX_DRAWN_DEPTH:
            ax.text(0, 0, f"{depth:,} levels deep: not drawn (at most {MAX_DRAWN_DEPTH})", fontsize=8, va="center")
            ax.set_xlim(0, span)
            ax.set_ylim(-0.5, 0.5)
            ax.set_title(caption, fontsize=9, loc="left")
            ax.set_axis_off()
            continue
        bottom = -(depth + 1)
        _draw(ax, tree, 0, 0, bottom, xs)
        ax.set_xlim(0, span)
        ax.set_ylim(bottom - 0.9, 0.6)
        ax.set_title(caption, fontsize=9, loc="left")
        ax.set_axis_off()
    fig.suptitle(title, fontsize=10)
    return save(fig, stem)
