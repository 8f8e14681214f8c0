"""Trees over a sentence: Penn Treebank brackets, Algorithm 1 of the paper (§8.2, Figure 4) and the branching
baselines (footnote 4).

A :class:`Tree` is a label and children, each a sub-tree or a word. Its *constituents* are the word spans
``(start, end)`` (end exclusive) of its nodes; ParsEval (:mod:`sarnmt.analysis.parseval`) compares them.

**Algorithm 1 as it is read here.** The paper prints::

    i <- 0;  while max(A[:, i]) = 0 or i < n do i <- i + 1;  tree.addChild(s[0:i])
    if i < n: SPLIT(subtree, A[i:n][i:n], s[i:n]); tree.addChild(subtree)

Taken literally the loop never stops before ``i = n`` (``i < n`` alone keeps it going), so every sentence would be
one flat phrase; and with the softmax weights of a real model no column of ``A`` is ever exactly 0, so ``max(A[:,
i]) = 0`` cannot be the test either. The text says what the loop is for: the algorithm "splits the sentence into
two sub-phrases every time the focus of attention changes to a new word, from left to right", and Figure 4 shows
right-nested trees whose left children are multi-word phrases. The reading implemented:

1. *Focus*: each prediction's focus is the history item with the largest weight (``A`` binarised by a row-wise
   argmax). A word is *focused* when it is the focus of at least one later prediction. The zero slot before the
   first word (item 0 of :mod:`sarnmt.cli.translate`'s attention rows) is not a word: a prediction that focuses it
   splits nothing.
2. *Loop*: ``i <- 1; while i < n and word i is not focused: i <- i + 1`` (``and``, not ``or``, and starting from
   the second word: with ``i = 0`` a focused first word would give an empty left phrase and the recursion would
   not shrink). ``s[0:i]`` becomes the left child, a flat phrase (a single word stays a bare leaf), and the rest is
   split again.
3. *The sub-matrix*: passing ``A[i:n, i:n]`` down changes nothing once ``A`` is binarised (a focus from a row
   ``>= i`` onto a column ``>= i`` survives the cut, and causality forbids rows ``< i`` from pointing at columns
   ``>= i``), so the recursion splits the sentence before every focused word, left to right.

The result: phrases ``s[b_k : b_{k+1}]`` between consecutive focused words ``b_1 < b_2 < ...``, nested to the
right: ``(X p_1 (X p_2 (... p_m)))``. The recomputed-argmax alternative (the focus of each prediction searched
again inside ``A[i:n, i:n]``) would split more, down to right-branching trees when every row keeps a focus.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclass(frozen=True)
class Tree:
    """:param label: the node's label ('' allowed, as PTB files' outer brackets).  :param children: sub-trees and
    words, left to right (at least one)."""

    label: str
    children: tuple[Tree | str, ...]

    def leaves(self) -> list[str]:
        """The words, left to right."""
        return [node for node in _preorder(self) if not isinstance(node, Tree)]

    def spans(self) -> list[tuple[int, int]]:
        """Every node's word span ``(start, end)``, end exclusive, in pre-order (single words included)."""
        out: list[tuple[int, int]] = []
        stack: list[tuple[Tree, int, int]] = [(self, 0, 0)]  # (node, index of its span in out, next child)
        out.append((0, 0))
        end = 0
        while stack:
            node, index, child = stack.pop()
            if child == len(node.children):
                out[index] = (out[index][0], end)
                continue
            stack.append((node, index, child + 1))
            item = node.children[child]
            if isinstance(item, Tree):
                out.append((end, end))
                stack.append((item, len(out) - 1, 0))
            else:
                end += 1
        return out

    def brackets(self) -> str:
        """Penn Treebank bracket form on one line: ``(S (NP (D la) (N pamo)) (V jaluta))``."""
        parts: list[str] = []
        stack: list[Tree | str] = [self]
        while stack:
            item = stack.pop()
            if isinstance(item, Tree):
                parts.append(f"({item.label} " if item.label else "( ")
                stack.append(_CLOSE)
                for k in range(len(item.children) - 1, -1, -1):
                    stack.append(item.children[k])
                    if k:
                        stack.append(_SPACE)
            else:
                parts.append(item)
        return "".join(parts)

    def depth(self) -> int:
        """The longest path from this node down to a word, in nodes (a node over words only: 1)."""
        deepest, stack = 0, [(self, 1)]
        while stack:
            node, level = stack.pop()
            deepest = max(deepest, level)
            stack.extend((c, level + 1) for c in node.children if isinstance(c, Tree))
        return deepest

    # the dataclass's own __eq__, __hash__ and __repr__ would recurse: compare and show trees by their brackets
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tree) and self.brackets() == other.brackets()

    def __hash__(self) -> int:
        return hash(self.brackets())

    def __repr__(self) -> str:
        return f"Tree({self.brackets()!r})"


class _Mark(str):
    """A piece of bracket text, not a word (told apart by type in :meth:`Tree.brackets`)."""


_CLOSE, _SPACE = _Mark(")"), _Mark(" ")


def _preorder(tree: Tree) -> list[Tree | str]:
    """Every node and word of ``tree``, in pre-order, without recursion."""
    out: list[Tree | str] = []
    stack: list[Tree | str] = [tree]
    while stack:
        item = stack.pop()
        out.append(item)
        if isinstance(item, Tree):
            stack.extend(reversed(item.children))
    return out


def parse_brackets(text: str) -> Tree:
    """A tree in Penn Treebank bracket form (one tree; labels optional, as in ``( (S ...))``), parsed without
    recursion, so a tree of any depth is read (a deep gold tree cannot exhaust Python's stack).

    :raises ValueError: saying what is wrong and at which character.
    """
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]
    if not tokens:
        raise ValueError("empty tree")
    if tokens[0][0] != "(":
        raise ValueError(f"a tree starts with '(', found {tokens[0][0]!r}")
    tree, pos = _parse(tokens, 0)
    if pos != len(tokens):
        raise ValueError(f"text after the tree at character {tokens[pos][1]}: {tokens[pos][0]!r}")
    return tree


def _parse(tokens: list[tuple[str, int]], pos: int) -> tuple[Tree, int]:
    """The tree whose ``(`` is ``tokens[pos]`` and the position after its ``)``: a stack of open nodes (start
    character, label, children) instead of recursion."""
    open_nodes: list[tuple[int, str, list[Tree | str]]] = []
    while True:
        token, start = tokens[pos]
        if token == "(":
            pos += 1
            label = ""
            if pos < len(tokens) and tokens[pos][0] not in "()":
                label = tokens[pos][0]
                pos += 1
            open_nodes.append((start, label, []))
        elif token == ")":
            start, label, children = open_nodes.pop()
            pos += 1
            if children:
                node = Tree(label, tuple(children))
            elif label:  # "(w)": a bare word in brackets, as some parsers print leaves without a tag
                node = Tree("", (label,))
            else:
                raise ValueError(f"empty brackets at character {start}")
            if not open_nodes:
                return node, pos
            open_nodes[-1][2].append(node)
        else:
            open_nodes[-1][2].append(token)
            pos += 1
        if pos == len(tokens):
            raise ValueError(f"unbalanced brackets: the '(' at character {open_nodes[-1][0]} is never closed")


def flat(words: Sequence[str], label: str = "X") -> Tree | str:
    """A flat phrase of ``words`` (a single word stays a bare leaf)."""
    return words[0] if len(words) == 1 else Tree(label, tuple(words))


def right_branching(words: Sequence[str]) -> Tree | str:
    """Footnote 4: "dividing iteratively one word and the rest of the sentence, from left to right":
    ``(X w1 (X w2 (... (X w_{n-1} w_n))))``."""
    tree: Tree | str = words[-1]
    for word in reversed(words[:-1]):
        tree = Tree("X", (word, tree))
    return tree


def left_branching(words: Sequence[str]) -> Tree | str:
    """The mirror image: ``((((w1 w2) w3) ...) w_n)``."""
    tree: Tree | str = words[0]
    for word in words[1:]:
        tree = Tree("X", (tree, word))
    return tree


def focus(weights: np.ndarray) -> np.ndarray:
    """Each prediction's focus: the argmax history item of each row.

    :param weights: target self-attention, shape (R, I): row r is prediction r's weights over history items
        ``0..r`` (item 0 the zero slot, item j the j-th output word), the layout of ``translate``'s attention file.
    :returns: shape (R,), item indices (ties: the first).
    """
    return np.asarray(weights).argmax(axis=1)


def split_points(weights: np.ndarray, n_words: int) -> list[int]:
    """Word positions (0-based, ``1 <= p < n_words``) that begin a new phrase: the focused words (see the module
    docstring), in order.  :param weights: as in :func:`focus`."""
    items = focus(weights)
    return sorted({int(item) - 1 for item in items if 2 <= item <= n_words})  # item j is word j - 1


def algorithm1(words: Sequence[str], weights: np.ndarray) -> Tree | str:
    """The paper's Algorithm 1 (as read in the module docstring): split before every focused word, left to right.

    :param words: the sentence (n words, no EOS).  :param weights: its target self-attention, shape (R, I) with
        n + 1 rows over items 0..n with the EOS prediction, n rows over items 0..n - 1 without it (a hypothesis the
        length limit stopped: no prediction saw its last word), as in :func:`focus`.
    :returns: ``(X p_1 (X p_2 (... p_m)))``, each phrase ``p_k`` flat (or a bare word).
    """
    if not words:
        raise ValueError("algorithm1: an empty sentence has no tree")
    weights = np.asarray(weights)
    if weights.ndim != 2 or min(weights.shape) < len(words):
        raise ValueError(
            f"algorithm1: {len(words)} words need a self-attention matrix of at least "
            f"{len(words)} x {len(words)}, got {weights.shape}"
        )
    bounds = [0, *split_points(weights, len(words)), len(words)]
    phrases = [flat(words[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    tree = phrases[-1]
    for phrase in reversed(phrases[:-1]):
        tree = Tree("X", (phrase, tree))
    return tree


def brackets(tree: Tree | str) -> str:
    """Bracket form of a tree or of a one-word sentence (``(X w)``)."""
    return tree.brackets() if isinstance(tree, Tree) else f"(X {tree})"


def leaves(tree: Tree | str) -> list[str]:
    return tree.leaves() if isinstance(tree, Tree) else [tree]
