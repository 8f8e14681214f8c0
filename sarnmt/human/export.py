"""Export a human evaluation: Table 5 (Markdown, LaTeX, CSV, laid out by :mod:`sarnmt.sweep.formats` as Tables 1-4
are, with the paper's numbers beside), the raw judgements (CSV) and the inter-annotator agreement (CSV).

**What Table 5 counts.** For each task (language pair) and each pair of its systems (first, second): among the
``ranked`` judgements, the percentage in which the first system's output got a better rank (``>``), the same rank
(``=``) or a worse rank (``<``) than the second's. Rows are the pairs (later system, earlier system) in the order the
systems were given to ``create`` — for ``baseline, mean_residual, self_attentive_content`` exactly the paper's rows.
**Several annotators**: each annotator's ranking of a sentence is one judgement and all are pooled, so ``n`` is
sentences × annotators (the paper had one annotator per pair, where n = sentences); agreement is reported beside
(:mod:`sarnmt.human.agreement`). **Skipped and flagged** items are not judgements of quality: they are left out of
the percentages and counted in the notes and in ``agreement.csv``.

**Spreadsheets.** A CSV cell of text (a comment, an annotator's, system's or task's name) that a spreadsheet would
run as a formula, one starting with ``=``, ``+``, ``-``, ``@`` (or their full-width forms), a tab, CR or LF, is
written with a ``'`` before it (:func:`inert`): shown as text, never run; a CR in it is written as LF. Numbers are
written as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from sarnmt.human.judgements import ExportError, Task, read_tasks
from sarnmt.sweep import formats
from sarnmt.sweep.formats import FORMULA_START, tex
from sarnmt.sweep.records import write_atomic
from sarnmt.sweep.spec import SPECS_DIR

PAPER_TABLE = SPECS_DIR / "human" / "table5.yaml"
SYMBOLS = (">", "=", "<")


def inert(text: str) -> str:
    """A text cell as a spreadsheet shows it but never runs it: a ``'`` before a leading character that would start
    a formula (``=HYPERLINK(...)``, ``+cmd``, ``@SUM(...)``, ``-2+3``, a tab or a line break). A CR (or CRLF) is
    written as LF: the CSV quotes a cell holding LF, but not one holding only CR, whose row would break."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "'" + text if text.startswith(FORMULA_START) else text


@dataclass(frozen=True)
class Paper:
    title: str
    systems: dict[str, str]
    pairs: dict[str, str]
    numbers: dict[tuple[str, str], dict[str, list[int]]]  # (first, second) → pair → [>, =, <]


def load_paper(path: Path = PAPER_TABLE) -> Paper:
    """:raises ExportError: the file is missing or malformed (naming the file and key)."""
    try:
        node = OmegaConf.to_container(OmegaConf.load(path))
    except Exception as err:  # missing file, YAML syntax: both name the file
        raise ExportError(f"{path}: cannot read the paper's Table 5 ({err})") from err
    try:
        numbers = {}
        for k, row in enumerate(node["paper"]):
            cells = {pair: list(v) for pair, v in row.items() if pair not in ("first", "second")}
            if any(len(v) != 3 for v in cells.values()):
                raise ExportError(f"{path}: paper[{k}]: each pair needs [>, =, <], got {cells}")
            numbers[row["first"], row["second"]] = cells
        return Paper(str(node["title"]), dict(node["systems"]), dict(node["pairs"]), numbers)
    except (KeyError, TypeError) as err:
        raise ExportError(f"{path}: missing or malformed key {err}") from err


def table_rows(tasks: list[Task]) -> list[tuple[str, str]]:
    """The (first, second) pairs of every task, each once, in order of first appearance."""
    rows: list[tuple[str, str]] = []
    for task in tasks:
        for a, b in task.pairs():
            if (a, b) not in rows and (b, a) not in rows:
                rows.append((a, b))
    return rows


def _cell(task: Task, first: str, second: str) -> tuple[int, int, int] | None:
    if first not in task.systems or second not in task.systems:
        return None
    return task.counts(first, second)


def _percent(counts: tuple[int, int, int] | None) -> list[str]:
    """``>``, ``=``, ``<`` in percent and n; dashes where the task lacks a system or has no ranked judgement."""
    if counts is None:
        return ["–"] * 4
    n = sum(counts)
    return [f"{100 * c / n:.1f}" for c in counts] + [str(n)] if n else ["–"] * 3 + ["0"]


def _paper_cell(paper: Paper, first: str, second: str, pair: str) -> list[int] | None:
    return paper.numbers.get((first, second), {}).get(pair)


def notes(tasks: list[Task], paper: Paper) -> list[str]:
    lines = [
        "Cells: the percentage of ranked judgements in which the first system's translation was ranked higher (>), "
        "equal to (=) or lower (<) than the second's; n: judgements counted (sentences × annotators: every "
        "annotator's ranking of a sentence counts once). Skipped and flagged items are left out.",
    ]
    for task in tasks:
        names = ", ".join(task.annotators()) or "none yet"
        lines.append(
            f"{paper.pairs.get(task.name, task.name)} (task {task.name}): {task.items} sentences, systems "
            f"{', '.join(task.systems)}; annotators: {names}; judgements: {task.count('ranked')} ranked, "
            f"{task.count('skipped')} skipped, {task.count('broken')} flagged as broken; agreement: "
            f"{task.agreement().text()}."
        )
    lines.append(
        "Paper: the paper's Table 5 (50 sentences per pair, one annotator); its text as this project has it gives "
        "two triples per row under three pair headings, read as En-Zh and Es-En (sarnmt/sweep/specs/human/table5.yaml)."
    )
    return lines


def _label(paper: Paper, first: str, second: str) -> str:
    return f"{paper.systems.get(first, first)} vs. {paper.systems.get(second, second)}"


def markdown(tasks: list[Task], paper: Paper) -> str:
    head = ["first vs. second"]
    for task in tasks:
        head += [f"{paper.pairs.get(task.name, task.name)} >", "=", "<", "n", "paper > / = / <"]
    body = []
    for first, second in table_rows(tasks):
        row = [_label(paper, first, second)]
        for task in tasks:
            cell = _paper_cell(paper, first, second, task.name)
            row += _percent(_cell(task, first, second)) + [" / ".join(map(str, cell)) if cell else "–"]
        body.append(row)
    return formats.markdown(f"**{paper.title}**", head, "l" + "rrrrl" * len(tasks), body, notes(tasks, paper))


def latex(tasks: list[Task], paper: Paper) -> str:
    head = ["System"]
    for task in tasks:
        head += [rf"{tex(paper.pairs.get(task.name, task.name))} $>$", "$=$", "$<$", "$n$", "paper"]
    body = []
    for first, second in table_rows(tasks):
        row = [tex(_label(paper, first, second))]
        for task in tasks:
            cell = _paper_cell(paper, first, second, task.name)
            row += _percent(_cell(task, first, second)) + ["/".join(map(str, cell)) if cell else "--"]
        body.append([c.replace("–", "--") for c in row])
    caption = tex(paper.title + ". " + " ".join(notes(tasks, paper)))
    return formats.latex("l" + "rrrrl" * len(tasks), head, body, caption)


def csv_text(tasks: list[Task], paper: Paper) -> str:
    header = [
        "task",
        "first",
        "second",
        "higher",
        "equal",
        "lower",
        "n",
        "pct_higher",
        "pct_equal",
        "pct_lower",
        "paper_higher",
        "paper_equal",
        "paper_lower",
    ]
    rows = []
    for first, second in table_rows(tasks):
        for task in tasks:
            counts = _cell(task, first, second)
            if counts is None:
                continue
            n = sum(counts)
            cell = _paper_cell(paper, first, second, task.name) or ["", "", ""]
            pcts = [f"{100 * c / n:.4f}" if n else "" for c in counts]
            rows.append([inert(task.name), inert(first), inert(second), *counts, n, *pcts, *cell])
    return formats.csv_text(header, rows)


def judgements_csv(tasks: list[Task]) -> str:
    """Every judgement: item id, position and line, the order shown (system names), the ranks as shown and per
    system, and the times."""
    header = [
        "task",
        "item",
        "position",
        "line",
        "annotator",
        "status",
        "shown_order",
        "ranks",
        "ranks_by_system",
        "comment",
        "shown_at",
        "submitted_at",
        "seconds",
        "submissions",
    ]
    rows = [
        [
            inert(task.name),
            j["item"],
            j["position"],
            j["line"],
            inert(j["annotator"]),
            j["status"],
            inert(" ".join(j["order"])),
            "" if j["ranks"] is None else " ".join(map(str, j["ranks"])),
            "" if j["by_system"] is None else inert(" ".join(f"{s}={r}" for s, r in j["by_system"].items())),
            inert(j["comment"]),
            inert(j["shown_at"] or ""),
            j["submitted_at"],
            "" if j["seconds"] is None else j["seconds"],
            j["submissions"],
        ]
        for task in tasks
        for j in task.judgements
    ]
    return formats.csv_text(header, rows)


def agreement_csv(tasks: list[Task]) -> str:
    header = ["task", "method", "kappa", "annotators", "items", "comparisons", "ranked", "skipped", "flagged"]
    rows = []
    for task in tasks:
        a = task.agreement()
        kappa = "" if a.kappa is None else f"{a.kappa:.6f}"
        rows.append(
            [
                inert(task.name),
                a.method or "",
                kappa,
                a.annotators,
                a.items,
                a.comparisons,
                task.count("ranked"),
                task.count("skipped"),
                task.count("broken"),
            ]
        )
    return formats.csv_text(header, rows)


def export(db: str | Path, output_dir: str | Path | None, paper_table: Path = PAPER_TABLE) -> dict[str, str]:
    """Render everything; write ``table5.{md,tex,csv}``, ``judgements.csv`` and ``agreement.csv`` into
    ``output_dir`` (each to a temporary name, then renamed) unless it is ``None``.

    :returns: file name → text.
    """
    tasks = read_tasks(db)
    if not tasks:
        raise ExportError(f"{db} holds no task")
    paper = load_paper(paper_table)
    files = {
        "table5.md": markdown(tasks, paper),
        "table5.tex": latex(tasks, paper),
        "table5.csv": csv_text(tasks, paper),
        "judgements.csv": judgements_csv(tasks),
        "agreement.csv": agreement_csv(tasks),
    }
    if output_dir is not None:
        for name, text in files.items():
            write_atomic(Path(output_dir) / name, text.encode("utf-8"))
    return files
