"""A table's cells as Markdown, LaTeX and CSV (laid out by :mod:`sarnmt.sweep.formats`), beside the paper's numbers
(the figure of the per-seed scores: :mod:`sarnmt.sweep.figure`).

A cell reads ``mean ± sd (n)``: the mean corpus score over the row's seeds, their sample standard deviation and how
many seeds ran; ``not run`` (no record), ``stale``, ``broken``, ``corrupt`` and ``mixed code`` runs are counted in
the cell, never averaged in; ``unpinned`` and ``dirty`` runs are averaged and counted (:mod:`sarnmt.sweep.cells`).
Every test is one-sided (H1: the row is better than the baseline of its column). Markers after the value: ``†``/``‡``
the seed-aware test, Welch's test on the seed means with the test set's resampling variance added (p < 0.05 / 0.01;
Welch 1947, Koehn 2004, Clark et al. 2011: :mod:`sarnmt.sweep.seed_tests`), ``*``/``**`` the paper's paired
t-test, sentence-level with seeds pooled. Beside each column, ``Δ [95%]``: the difference from the baseline and the
test's 95% interval of it, or ``n/a (1 run)`` where a side has one run. ``N cap reached``: runs that ended at their
epoch cap without the patience rule firing (:func:`sarnmt.sweep.cells.cap_reached`), averaged but flagged.
The footer names the tests, the resamples and the generator seed, and says how many seeds would detect the paper's
gains (:mod:`sarnmt.sweep.footer`).
"""

from __future__ import annotations

from sarnmt.sweep import formats, power, seed_tests
from sarnmt.sweep.cells import Cell, TableSettings
from sarnmt.sweep.footer import DEFAULT, footer, is_lm, method_notes, row_powers
from sarnmt.sweep.formats import tex
from sarnmt.sweep.spec import Scale, Table


def seed_marker(cell: Cell) -> str:
    """``‡`` / ``†`` from the seed-aware test, empty otherwise (no test, or one run: see :func:`delta_text`); ``‡``
    only with :data:`~sarnmt.sweep.seed_tests.RUNS_FOR_P01` or more runs a side (below, the test's rate at nominal
    0.01 is above 0.01), so p < 0.01 at 2 runs a side prints ``†``."""
    c = cell.score.comparison if cell.score else None
    if c is None or c.p_seed is None:
        return ""
    if c.p_seed < 0.01 and min(c.runs) >= seed_tests.RUNS_FOR_P01:
        return "‡"
    return "†" if c.p_seed < 0.05 else ""


def t_marker(cell: Cell) -> str:
    """``**`` / ``*`` from the paper's t-test, sentence-level with seeds pooled."""
    c = cell.score.comparison if cell.score else None
    if c is None:
        return ""
    return "**" if c.p_t_test < 0.01 else "*" if c.p_t_test < 0.05 else ""


def markers(cell: Cell) -> str:
    return seed_marker(cell) + t_marker(cell)


def _latex_markers(text: str) -> str:
    for plain, latex in (
        ("†", r"$^\dagger$"),
        ("‡", r"$^\ddagger$"),
        ("±", r"$\pm$"),
        ("Δ", r"$\Delta$"),
        ("²", "$^2$"),
    ):
        text = text.replace(plain, latex)
    return text


def code_status(cell: Cell) -> str:
    """The code that ran the cell: ``pinned``, ``unpinned``, ``mixed code: N commits`` (not averaged) or ``mixed
    code averaged: N commits``; ``, dirty`` where a run had uncommitted changes; empty without runs."""
    if not cell.counted:
        return ""
    if cell.mixed:
        status = f"mixed code: {cell.code}"
    elif cell.mixed_averaged:
        status = f"mixed code averaged: {cell.code}"
    else:
        status = "unpinned" if cell.unpinned else "pinned"
    return status + (", dirty" if cell.dirty else "")


def cell_text(cell: Cell, latex: bool = False) -> str:
    parts = []
    if cell.score is not None:
        sd = cell.score.sd
        value = f"{cell.score.mean:.2f}" + (f" ± {sd:.2f}" if sd is not None else "")
        done = len(cell.records)
        count = str(done) if done == cell.expected else f"{done} of {cell.expected} seeds"
        parts.append(f"{value}{markers(cell)} ({count})")
    if cell.mixed:
        parts.append(f"mixed code: {cell.code}, {len(cell.mixed)} run{'s' * (len(cell.mixed) != 1)}")
    if cell.missing:
        parts.append(f"{cell.missing} not run")
    if cell.stale:
        parts.append(f"{len(cell.stale)} stale")
    if cell.broken:
        parts.append(f"{len(cell.broken)} broken")
    if cell.corrupt:
        parts.append(f"{len(cell.corrupt)} corrupt")
    if cell.mixed_averaged:
        parts.append(f"mixed code averaged: {cell.code}")
    if cell.unpinned:
        parts.append(f"{cell.unpinned} unpinned")
    if cell.dirty:
        parts.append(f"{cell.dirty} dirty")
    if cell.capped:
        parts.append(f"{cell.capped} cap reached")
    text = "; ".join(parts) if parts else "—"
    return _latex_markers(tex(text)) if latex else text


def delta_text(table: Table, cell: Cell, base: Cell | None = None) -> str:
    """``+0.82 [+0.10, +1.50]``: the difference from the baseline and its 95% interval (the seed-aware test's);
    ``+1.78, n/a (1 run)`` where a side has one run (no seed variance: it cannot be tested); ``baseline`` on the
    baseline's row. Where the row or its baseline ``base`` has fewer runs than its seeds, the test is of the runs
    there are and says so: ``+0.82 [+0.10, +1.50] at 2 v 5 runs``; a cell with no test says only why (its note
    names the side with one run; the cells beside it give each side's count)."""
    if cell.row.key == table.baseline:
        return "baseline"
    c = cell.score.comparison if cell.score else None
    if c is None:
        return "—"
    if c.seed_test_note is not None:
        return f"{c.difference:+.2f}, {c.seed_test_note}"
    partial = len(cell.records) < cell.expected or (base is not None and len(base.records) < base.expected)
    runs = f" at {c.runs[0]} v {c.runs[1]} runs" if partial else ""
    return f"{c.difference:+.2f} [{c.low:+.2f}, {c.high:+.2f}]{runs}"


def _parameters(table: Table, cells: dict, row_key: str) -> str:
    counts = [cells[row_key, c.key].parameters for c in table.columns]
    shown = list(dict.fromkeys(f"{n / 1e6:.2f}M" if n else "?" for n in counts))
    return " / ".join(shown)


def _size(table: Table, cells: dict, row_key: str) -> str:
    """A language model's d as run, and the paper's (Table 6)."""
    runs = {
        r.get("config", {}).get("model", {}).get("hidden_dim")
        for c in table.columns
        for r in cells[row_key, c.key].counted
    }
    shown = " / ".join(str(d) for d in sorted(runs, key=str)) or "?"
    paper = table.row(row_key).paper_d
    return shown + (f" ({paper})" if paper is not None else "")


def _sized(table: Table, cells: dict, row_key: str) -> list[str]:
    """The |Θ| cell, and the d cell for a language-model table."""
    sizes = [_parameters(table, cells, row_key)]
    return [*sizes, _size(table, cells, row_key)] if table.task == "lm" else sizes


def _paper(table: Table, row_key: str, column_key: str) -> str:
    value = table.paper.get(row_key, {}).get(column_key)
    return "–" if value is None else f"{value:.1f}" if value < 100 else str(value)


def column_names(table: Table, scale: Scale, column) -> tuple[str, str]:
    """A column's head and its paper column's: where the scale says what ran (a corpus standing in for the
    paper's), the column is named by it, ``Multi30K En→De test2016``, and the paper's column by the paper's name,
    ``paper: En-Zh``; else ``En-Zh (en_zh)`` and ``paper``."""
    ran = scale.ran(column.pair, column.test)
    return (ran, f"paper: {column.label}") if ran else (f"{column.label} ({column.pair})", "paper")


def heading(table: Table, scale: Scale) -> str:
    """The table's title, saying where columns are the same runs on other test sets (one experiment, not several):
    ``...; Multi30K En→De test2016, test2017: the same runs on 2 test sets``."""
    groups: dict[str, list] = {}
    for column in table.columns:
        groups.setdefault(scale.job_pair(column.pair), []).append(column)
    notes = []
    for pair, columns in groups.items():
        if len(columns) < 2:
            continue
        splits = dict.fromkeys(scale.pairs[pair].tests[scale.job_test(c.pair, c.test)] for c in columns)
        ran = scale.pairs[pair].ran
        tests = [scale.pairs[pair].test_names.get(scale.job_test(c.pair, c.test)) for c in columns]
        if ran and all(tests):  # Multi30K En→De test2016, test2017
            names = f"{ran} " + ", ".join(dict.fromkeys(tests))
        else:
            names = ", ".join(dict.fromkeys(column_names(table, scale, c)[0].split(" (")[0] for c in columns))
        sets = f"{len(splits)} test sets" if len(splits) > 1 else "one test set"
        notes.append(f"{names}: the same runs on {sets}")
    return table.heading + ("" if not notes else " (" + "; ".join(notes) + ")")


def _head(table: Table, scale: Scale, latex: bool = False) -> tuple[list[str], str]:
    sized = (
        ([r"$|\Theta|$", "$d$"] if latex else ["|Θ|", "d"]) if is_lm(table) else ([r"$|\Theta|$"] if latex else ["|Θ|"])
    )
    delta = r"$\Delta$ [95\%]" if latex else "Δ [95%]"
    head = ["Model" if latex else "model", *sized]
    for c in table.columns:
        name, paper = column_names(table, scale, c)
        head += [tex(name) if latex else name, delta, tex(paper) if latex else paper]
    return head, "l" + "r" * len(sized) + "lcr" * len(table.columns)


def _rows(table: Table, cells: dict, latex: bool = False) -> list[list[str]]:
    def delta(cell: Cell) -> str:
        text = delta_text(table, cell, cells.get((table.baseline, cell.column.key)))
        return _latex_markers(tex(text)) if latex else text

    return [
        [tex(row.label) if latex else row.label, *_sized(table, cells, row.key)]
        + [
            v
            for c in table.columns
            for v in (
                cell_text(cells[row.key, c.key], latex),
                delta(cells[row.key, c.key]),
                _paper(table, row.key, c.key),
            )
        ]
        for row in table.rows
    ]


def markdown(table: Table, scale: Scale, cells: dict, settings: TableSettings = DEFAULT) -> str:
    head, align = _head(table, scale)
    title = f"**{heading(table, scale)}** — scale `{scale.name}`"
    return formats.markdown(title, head, align, _rows(table, cells), footer(table, scale, cells, settings))


def latex(table: Table, scale: Scale, cells: dict, settings: TableSettings = DEFAULT) -> str:
    head, align = _head(table, scale, latex=True)
    notes = " ".join(tex(n) for n in method_notes(table, cells, settings, scale))
    caption = f"{tex(heading(table, scale))} (sarnmt, scale {scale.name}). {_latex_markers(notes)}"
    return formats.latex(align, head, _rows(table, cells, latex=True), caption)


CSV_HEADER = (
    "table",
    "scale",
    "row",
    "column",
    "pair",
    "test",
    "metric",
    "seeds_expected",
    "seeds_done",
    "mean",
    "sd",
    "n",
    "scores",
    "diff",
    "diff_lo",
    "diff_hi",
    "p_seed",
    "seed_df",
    "seed_test",
    "p_two_level",
    "p_t",
    "p_boot_sentence",
    "markers",
    "code",
    "unpinned",
    "dirty",
    "cap_reached",
    "commits",
    "paper",
    "parameters",
    "stale",
    "broken",
    "corrupt",
    "mixed",
    "missing",
    "resamples",
    "generator_seed",
    "ran",
    "paper_column",
    "p_seed_v_sent",
    "power_detects",
    "paper_delta",
    "power_at_paper",
    "p_at_paper",
    "seeds_at_paper",
)


def _number(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def csv_text(table: Table, scale: Scale, cells: dict, settings: TableSettings = DEFAULT) -> str:
    """One line per cell; the power columns (``power_detects`` ... ``seeds_at_paper``: :func:`footer.row_powers`)
    are empty for a table rendered with the earlier test (mini8), whose power line is the old one."""
    rows = []
    powers = {} if (settings.seed_test or "shared") == "v_sent" else row_powers(table, cells)
    for row in table.rows:
        for column in table.columns:
            cell = cells[row.key, column.key]
            s = cell.score
            c = s.comparison if s else None
            found = powers.get((row.key, column.key))
            rows.append(
                [
                    table.number,
                    scale.name,
                    row.key,
                    column.key,
                    column.pair,
                    column.test,
                    column.metric,
                    cell.expected,
                    len(cell.records),
                    _number(s.mean if s else None),
                    _number(s.sd if s else None),
                    len(s.scores) if s else 0,
                    "" if s is None else ";".join(f"{v:.4f}" for v in s.scores),
                    _number(c.difference if c else None),
                    _number(c.low if c else None),
                    _number(c.high if c else None),
                    _number(c.p_seed if c else None, 6),
                    _number(c.df if c else None, 2),
                    "" if c is None else c.seed_test_note or seed_tests.SEED_TESTS[settings.seed_test or "shared"],
                    _number(c.p_two_level if c else None, 6),
                    _number(c.p_t_test if c else None, 6),
                    _number(c.p_sentence if c else None, 6),
                    markers(cell),
                    code_status(cell),
                    cell.unpinned,
                    cell.dirty,
                    cell.capped,
                    ";".join(sorted({(r.get("commit") or "?")[:10] for r in cell.counted})),
                    table.paper.get(row.key, {}).get(column.key, ""),
                    cell.parameters or "",
                    len(cell.stale),
                    len(cell.broken),
                    len(cell.corrupt),
                    len(cell.mixed),
                    cell.missing,
                    settings.resampling.resamples,
                    settings.resampling.seed,
                    scale.ran(column.pair, column.test) or "",
                    column.label,
                    _number(c.p_v_sent if c else None, 6),
                    _number(found.detects if found else None),
                    _number(found.paper if found else None, 2),
                    _number(found.power if found else None),
                    _number(found.p if found else None, 6),
                    "" if found is None or found.paper is None else found.seeds or f">{power.MAX_SEEDS}",
                ]
            )
    return formats.csv_text(CSV_HEADER, rows)
