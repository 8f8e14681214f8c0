"""A table as text: Markdown, LaTeX (booktabs) and CSV, the formats every table of the reproduction is written in.

Tables 1-4 (:mod:`sarnmt.sweep.render`) and Table 5, the human evaluation (:mod:`sarnmt.human.export`), build their
cells as strings and lay them out here, so the tables read alike: a bold title line, the grid, then the notes as a
bullet list (Markdown) or the caption (LaTeX).

Their text comes partly from records and databases made elsewhere (a commit, an annotator's comment), so both
outputs that a program reads as more than text are escaped: every LaTeX special character of plain text
(:func:`tex`: ``\\ { } $ & # ^ _ ~ %``), and in CSV every cell that a spreadsheet would run as a formula
(:func:`csv_cell`, the OWASP rule: one starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a
leading ``'``; a number such as ``-0.52`` stays a number).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence

ALIGN = {"l": "---", "r": "---:", "c": ":---:"}
TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "^": r"\textasciicircum{}",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "%": r"\%",
}
_TEX = re.compile("|".join(map(re.escape, TEX_SPECIAL)))
# a formula's first character, in ASCII and in the full-width forms spreadsheets also read (U+FF1D = and so on)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_MARKUP = {"|": "\\|", "<": "&lt;", ">": "&gt;", "&": "&amp;", "`": "\\`", "*": "\\*", "_": "\\_"}
_MARKUP_RE = re.compile("|".join(map(re.escape, _MARKUP)))
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def tex(text: str) -> str:
    """Plain text as LaTeX: each of ``\\ { } $ & # ^ _ ~ %`` escaped (in one pass, so an escape is never escaped
    again); the result is set as that text, never read as a command."""
    return _TEX.sub(lambda m: TEX_SPECIAL[m.group()], text)


def record_text(value: object) -> str:
    """Text from a record made elsewhere (a commit, a CPU's name) as one inert line of Markdown that a terminal
    prints as it is: control characters (an ANSI escape's ESC, a line break that would start a forged note) as
    ``\\xNN``, and ``| < > & ` * _`` escaped, so it can neither end a table cell nor open an HTML tag."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))
    return _MARKUP_RE.sub(lambda m: _MARKUP[m.group()], text)


def csv_cell(value: object) -> object:
    """``value`` safe to open in a spreadsheet: text starting with ``= + - @`` (or their full-width forms), a tab, a
    carriage return or a line feed (a formula, ``+cmd|"/c calc"!A1``) gets a leading ``'`` so it is shown as text
    (OWASP, CSV injection); numbers, and text that is one (``-0.52``, ``+1.3e-2``), are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def markdown(
    title: str, head: Sequence[str], align: str, rows: Sequence[Sequence[str]], notes: Sequence[str] = ()
) -> str:
    """A Markdown table below ``title``, the notes as a bullet list after it.

    :param align: one letter per column, ``l`` / ``r`` / ``c``.
    """
    if len(align) != len(head):
        raise ValueError(f"align {align!r} has {len(align)} letters for {len(head)} columns")
    lines = [title, "", "| " + " | ".join(head) + " |", "|" + "|".join(ALIGN[a] for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    if notes:
        lines += [""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def latex(colspec: str, head: Sequence[str], rows: Sequence[Sequence[str]], caption: str) -> str:
    """A ``table`` float with a booktabs ``tabular``; every string is LaTeX already (see :func:`tex`)."""
    lines = [
        r"\begin{table}[t]",
        r"\centering\small",
        rf"\begin{{tabular}}{{{colspec}}}",
        r"\toprule",
        " & ".join(head) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{caption}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def csv_text(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """CSV with ``\\n`` line ends, quoted where needed, every cell through :func:`csv_cell`."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(h) for h in header])
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return buffer.getvalue()
