"""Algorithm 1's trees for a test set, scored with ParsEval against gold trees beside the branching baselines
(§8.2 and footnote 4), and the report that prints the paper's 0.56 and 0.45 beside them.

Gold trees come one per line in Penn Treebank bracket form, aligned with the analysed sentences (the toy corpus
writes its own, ``python -m sarnmt analyze toy_gold``; for real data, a parser's output made elsewhere). A line
whose tree does not parse, or whose words are not the sentence's, is an error naming the line; a sentence with no
words (an empty translation) needs an empty gold line and is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

from sarnmt.analysis import AnalysisError
from sarnmt.analysis.parseval import PAPER_PRECISION, Counts, compare
from sarnmt.analysis.trees import Tree, algorithm1, left_branching, parse_brackets, right_branching
from sarnmt.decoding.attention_file import AttentionRecord

KINDS = {  # tree kind -> how it is built from (words, record)
    "algorithm1": lambda words, record: algorithm1(words, record.tgt_attention),
    "right_branching": lambda words, record: right_branching(words),
    "left_branching": lambda words, record: left_branching(words),
}
CAPTIONS = {"algorithm1": "Algorithm 1", "right_branching": "right-branching", "left_branching": "left-branching"}


def read_gold(lines: Sequence[str], path: str, sentences: Sequence[list[str]]) -> list[Tree | str | None]:
    """Parse the gold trees and check them against the sentences' words.

    :param lines: the gold file's lines.  :param sentences: the analysed sentences' words, one list per line.
    :raises AnalysisError: naming ``path`` and the line: a count that differs, a tree that does not parse, words
        that differ from the sentence's.
    """
    if len(lines) != len(sentences):
        raise AnalysisError(
            f"gold trees {path} have {len(lines)} lines but there are {len(sentences)} sentences "
            f"(one tree per sentence, in order)"
        )
    trees: list[Tree | str | None] = []
    for number, (line, words) in enumerate(zip(lines, sentences, strict=True), start=1):
        where = f"gold trees {path} line {number}"
        if not words:
            if line.strip():
                raise AnalysisError(f"{where}: a tree for an empty sentence")
            trees.append(None)
            continue
        try:
            tree = parse_brackets(line)
        except ValueError as err:
            raise AnalysisError(f"{where}: {err}") from err
        leaves = tree.leaves()
        if leaves != words:
            at = next(
                (i for i, (a, b) in enumerate(zip(leaves, words, strict=False)) if a != b), min(len(leaves), len(words))
            )
            theirs = leaves[at] if at < len(leaves) else "(end)"
            ours = words[at] if at < len(words) else "(end)"
            raise AnalysisError(
                f"{where}: its words differ from the sentence's at word {at + 1}: {theirs!r} in the "
                f"tree, {ours!r} in the sentence ({len(leaves)} vs {len(words)} words)"
            )
        trees.append(tree)
    return trees


def build_trees(records: Sequence[AttentionRecord], kind: str) -> list[Tree | str | None]:
    """Each record's tree of ``kind`` (a key of :data:`KINDS`), None for an empty sentence."""
    return [KINDS[kind](r.words, r) if r.words else None for r in records]


def score_kinds(
    records: Sequence[AttentionRecord], gold: Sequence[Tree | str | None], kinds: Sequence[str]
) -> dict[str, dict[str, Counts]]:
    """ParsEval counts per tree kind, with (``whole``) and without (``inner``) the whole-sentence span."""
    out = {}
    for kind in kinds:
        counts = {"whole": Counts(), "inner": Counts()}
        for tree, reference in zip(build_trees(records, kind), gold, strict=True):
            if tree is None or reference is None:
                continue
            counts["whole"] += compare(tree, reference, whole_sentence=True)
            counts["inner"] += compare(tree, reference, whole_sentence=False)
        out[kind] = counts
    return out


def markdown(scores: dict[str, dict[str, dict[str, Counts]]], shared_sentences: bool = False) -> str:
    """One row per (model, tree kind): precision / recall / F1 with and without the whole-sentence span, and the
    paper's precision beside.  :param shared_sentences: every model analysed the same sentences (teacher forcing on
    one target file), so the branching trees are the same for all: their rows are given once, last."""
    lines = [
        "| model | trees | P | R | F1 | P (no whole-sentence span) | R | F1 | paper P (§8.2) | sentences |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def row(model: str, kind: str, counts: dict[str, Counts]) -> str:
        whole, inner = counts["whole"], counts["inner"]
        paper = PAPER_PRECISION.get(kind)
        return (
            f"| {model} | {CAPTIONS[kind]} | {whole.precision:.3f} | {whole.recall:.3f} | {whole.f1:.3f} | "
            f"{inner.precision:.3f} | {inner.recall:.3f} | {inner.f1:.3f} | "
            f"{'' if paper is None else f'{paper:.2f}'} | {whole.sentences} |"
        )

    for model, kinds in scores.items():
        lines += [
            row(model, kind, counts) for kind, counts in kinds.items() if kind == "algorithm1" or not shared_sentences
        ]
    if shared_sentences and scores:
        last = next(reversed(scores.values()))
        lines += [row("(every model)", kind, counts) for kind, counts in last.items() if kind != "algorithm1"]
    return "\n".join(lines)
