"""A table as text: Markdown, LaTeX (booktabs) and CSV, the formats every table of the reproduction is written in.

Tables 1-4 (:mod:`sarnmt.sweep.render`) and Table 5, the human evaluation (:mod:`sarnmt.human.export`), build their
cells as strings and lay them out here, so the tables read alike: a bold title line, the grid, then the notes as a
bullet list (Markdown) or the caption (LaTeX).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

ALIGN = {"l": "---", "r": "---:", "c": ":---:"}


def tex(text: str) -> str:
    """Escape the characters of plain text that LaTeX reads as commands (``& _ % #``)."""
    return text.replace("&", r"\&").replace("_", r"\_").replace("%", r"\%").replace("#", r"\#")


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
    """CSV with ``\\n`` line ends, quoted where needed."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()
