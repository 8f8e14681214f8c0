"""Table 7 (§8.3): sentences where system A scores higher than system B by sentence BLEU, and sentences where it
scores lower, each with its source, reference and both outputs, the words where the two outputs differ marked.

Sentence BLEU is sacrebleu's (exp smoothing, effective order; the tokenisation and case of the corpus score,
:func:`sarnmt.evaluation.significance.sentence_bleu`). The differing spans come from a word alignment of the two
outputs (``difflib.SequenceMatcher`` over whitespace tokens): a word of one output that is not matched in the other
is marked (the paper italicises the baseline's). Markdown marks with ``*…*`` (the text's own Markdown characters
escaped), HTML with ``<em>`` (the text HTML-escaped).
"""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass

from sarnmt.evaluation.significance import sentence_bleu

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")  # what can change the meaning inside a table cell


@dataclass
class Example:
    """One test sentence.  :param line: 1-based line number.  :param bleu: (A, B) sentence BLEU.
    :param marks: (A, B): per output word, whether it differs from the other output."""

    line: int
    source: str
    reference: str
    outputs: tuple[str, str]
    bleu: tuple[float, float]
    marks: tuple[list[bool], list[bool]]


def differing(a: list[str], b: list[str]) -> tuple[list[bool], list[bool]]:
    """Per word of ``a`` and of ``b``: True where it is not part of a matching block of the two."""
    marks_a, marks_b = [True] * len(a), [True] * len(b)
    for block in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks():
        marks_a[block.a : block.a + block.size] = [False] * block.size
        marks_b[block.b : block.b + block.size] = [False] * block.size
    return marks_a, marks_b


def select(
    sources: list[str],
    refs: list[str],
    hyps_a: list[str],
    hyps_b: list[str],
    count: int,
    tokenize: str = "13a",
    lowercase: bool = False,
    min_words: int = 1,
    max_words: int = 1000,
) -> dict[str, list[Example]]:
    """The ``count`` sentences with the largest BLEU gain of A over B (``better``) and the ``count`` with the largest
    loss (``worse``); ties by line order. Only references of ``min_words`` to ``max_words`` words are considered."""
    scores_a = sentence_bleu(hyps_a, refs, tokenize, lowercase)
    scores_b = sentence_bleu(hyps_b, refs, tokenize, lowercase)
    lines = [i for i, r in enumerate(refs) if min_words <= len(r.split()) <= max_words]
    gains = {i: scores_a[i] - scores_b[i] for i in lines}

    def example(i: int) -> Example:
        a, b = hyps_a[i].split(), hyps_b[i].split()
        return Example(i + 1, sources[i], refs[i], (hyps_a[i], hyps_b[i]), (scores_a[i], scores_b[i]), differing(a, b))

    better = sorted((i for i in lines if gains[i] > 0), key=lambda i: (-gains[i], i))[:count]
    worse = sorted((i for i in lines if gains[i] < 0), key=lambda i: (gains[i], i))[:count]
    return {"better": [example(i) for i in better], "worse": [example(i) for i in worse]}


def _marked(text: str, marks: list[bool], escape, open_: str, close: str) -> str:
    """The words of ``text`` escaped, runs of marked words wrapped in ``open_ … close``."""
    out, run = [], []
    for word, marked in zip(text.split(), marks, strict=True):
        if marked:
            run.append(escape(word))
            continue
        if run:
            out.append(open_ + " ".join(run) + close)
            run = []
        out.append(escape(word))
    if run:
        out.append(open_ + " ".join(run) + close)
    return " ".join(out)


def _md(text: str) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def markdown(selected: dict[str, list[Example]], names: tuple[str, str]) -> str:
    """Table 7 as Markdown: a section per direction, a table per sentence."""
    a, b = names
    heads = {"better": f"{a} better than {b}", "worse": f"{a} worse than {b}"}
    parts = []
    for key, examples in selected.items():
        parts.append(f"**{_md(heads[key])}** (sentence BLEU; words where the two outputs differ in *italics*)\n")
        if not examples:
            parts.append("(none)\n")
        for ex in examples:
            parts.append(
                f"| line {ex.line} | | BLEU |\n|---|---|---:|\n"
                f"| S | {_md(ex.source)} | |\n| R | {_md(ex.reference)} | |\n"
                f"| {_md(b)} | {_marked(ex.outputs[1], ex.marks[1], _md, '*', '*')} | {ex.bleu[1]:.1f} |\n"
                f"| {_md(a)} | {_marked(ex.outputs[0], ex.marks[0], _md, '*', '*')} | {ex.bleu[0]:.1f} |\n"
            )
    return "\n".join(parts)


def html_page(selected: dict[str, list[Example]], names: tuple[str, str], title: str) -> str:
    """Table 7 as a self-contained HTML page (every text HTML-escaped)."""
    a, b = (html.escape(n) for n in names)
    esc = html.escape
    rows = []
    for key, examples in selected.items():
        head = f"{a} better than {b}" if key == "better" else f"{a} worse than {b}"
        rows.append(f'<tr><th colspan="3" class="part">{head}</th></tr>')
        for ex in examples:
            rows += [
                f'<tr class="first"><td>S</td><td>{esc(ex.source)}</td><td>line {ex.line}</td></tr>',
                f"<tr><td>R</td><td>{esc(ex.reference)}</td><td></td></tr>",
                f"<tr><td>{b}</td><td>{_marked(ex.outputs[1], ex.marks[1], esc, '<em>', '</em>')}</td>"
                f"<td>{ex.bleu[1]:.1f}</td></tr>",
                f"<tr><td>{a}</td><td>{_marked(ex.outputs[0], ex.marks[0], esc, '<em>', '</em>')}</td>"
                f"<td>{ex.bleu[0]:.1f}</td></tr>",
            ]
    style = (
        "body{font-family:sans-serif} table{border-collapse:collapse} td,th{padding:2px 8px;text-align:left}"
        " tr.first td{border-top:1px solid #999} th.part{background:#eee} em{color:#b00}"
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{esc(title)}</title><style>{style}</style>'
        f"</head><body><h3>{esc(title)}</h3><p>Sentence BLEU in the last column; words where the two outputs "
        f"differ in <em>italics</em>.</p><table>\n" + "\n".join(rows) + "\n</table></body></html>\n"
    )
