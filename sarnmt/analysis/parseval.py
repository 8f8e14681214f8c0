"""Unlabelled ParsEval (Black et al., 1991) as the paper applies it (§8.2): precision and recall of the
constituents of a tree against those of a gold tree, "excluding single words".

A constituent is a word span ``(start, end)``; labels are ignored. Spans are compared as sets per sentence (a unary
chain, ``(NP (N w1 w2))``, counts once), and the counts are summed over the corpus before dividing (micro average,
as ``evalb``). The whole-sentence span is in every tree, so it always matches: ``whole_sentence=True`` counts it
(``evalb`` does, and the paper only says single words are excluded), ``False`` leaves it out, which lowers every
precision and makes the differences between tree kinds plainer. Reports give both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sarnmt.analysis.trees import Tree

# §8.2: Algorithm 1's trees reach 0.56 precision, right-branching trees 0.45 (Es-En, against the Stanford parser)
PAPER_PRECISION = {"algorithm1": 0.56, "right_branching": 0.45}


@dataclass
class Counts:
    """Summed span counts.  :param matched: predicted spans also in the gold tree.  :param predicted: spans of the
    predicted trees.  :param gold: spans of the gold trees.  :param sentences: sentences counted."""

    matched: int = 0
    predicted: int = 0
    gold: int = 0
    sentences: int = 0

    def __iadd__(self, other: Counts) -> Counts:
        self.matched += other.matched
        self.predicted += other.predicted
        self.gold += other.gold
        self.sentences += other.sentences
        return self

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "f1": round(self.f1, 4),
            "matched": self.matched,
            "predicted": self.predicted,
            "gold": self.gold,
            "sentences": self.sentences,
        }


def constituents(tree: Tree | str, whole_sentence: bool = True) -> set[tuple[int, int]]:
    """The spans of ``tree`` that ParsEval compares: two words or more; the whole sentence's if ``whole_sentence``.
    A bare word (a one-word sentence) has none."""
    if not isinstance(tree, Tree):
        return set()
    spans = {(a, b) for a, b in tree.spans() if b - a >= 2}
    if not whole_sentence:
        spans.discard((0, len(tree.leaves())))
    return spans


def compare(predicted: Tree | str, gold: Tree | str, whole_sentence: bool = True) -> Counts:
    """One sentence's counts.  :raises ValueError: when the two trees' words differ."""
    words = predicted.leaves() if isinstance(predicted, Tree) else [predicted]
    gold_words = gold.leaves() if isinstance(gold, Tree) else [gold]
    if words != gold_words:
        raise ValueError(f"the trees are over different words: {' '.join(words)!r} vs {' '.join(gold_words)!r}")
    ours, theirs = constituents(predicted, whole_sentence), constituents(gold, whole_sentence)
    return Counts(matched=len(ours & theirs), predicted=len(ours), gold=len(theirs), sentences=1)


def score(pairs: Iterable[tuple[Tree | str, Tree | str]], whole_sentence: bool = True) -> Counts:
    """Corpus counts over ``(predicted, gold)`` pairs (micro average)."""
    total = Counts()
    for predicted, gold in pairs:
        total += compare(predicted, gold, whole_sentence)
    return total
