"""A table's cells as Markdown, LaTeX, CSV (laid out by :mod:`sarnmt.sweep.formats`) and a PNG of the per-seed
scores, beside the paper's numbers.

A cell reads ``mean ± sd (n)``: the mean corpus BLEU over the row's seeds, their sample standard deviation and how
many seeds ran; ``missing``, ``stale`` and ``broken`` runs are counted in the cell, never averaged in. Markers after
a cell compare it with the baseline row of its column: ``*``/``**`` the paper's one-tailed paired t-test
(p < 0.05 / 0.01), ``†``/``‡`` the paired bootstrap (p < 0.05 / 0.01). The footer says what each test runs over.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from sarnmt.sweep import formats
from sarnmt.sweep.cells import Cell
from sarnmt.sweep.formats import tex
from sarnmt.sweep.spec import METRICS, Scale, Table

TESTS_NOTE = (
    "Significance against the baseline row of the same column: * p < 0.05, ** p < 0.01 by the paper's one-tailed "
    "paired t-test over test sentences (each sentence's BLEU averaged over the cell's seeds, paired with the "
    "baseline's); † p < 0.05, ‡ p < 0.01 by the paired bootstrap (1,000 resamples of the test sentences; in each, "
    "both cells' BLEU is the mean over their seeds of the resampled corpus BLEU). Cells: mean ± sample sd of corpus "
    "BLEU over seeds (the seed sets the initialisation and the dropout masks; the data order is the same), and the "
    "number of seeds."
)
PERPLEXITY_NOTE = (
    "Significance against the baseline row of the same column: * p < 0.05, ** p < 0.01 by a one-tailed paired "
    "t-test over test lines (each line's mean log-likelihood per word averaged over the cell's seeds, paired with "
    "the baseline's); † p < 0.05, ‡ p < 0.01 by the paired bootstrap (1,000 resamples of the test lines; in each, "
    "both cells' perplexity is the mean over their seeds of the resampled perplexity). Cells: mean ± sample sd of "
    "test perplexity over seeds (lower is better), and the number of seeds. d: the LSTM's hidden size (the paper's "
    "in brackets)."
)


AXIS_LABELS = {"ppl": "test perplexity (lower is better)"}


def tests_note(table: Table) -> str:
    return PERPLEXITY_NOTE if table.task == "lm" else TESTS_NOTE


def markers(cell: Cell) -> str:
    score = cell.score
    if score is None or score.p_t_test is None:
        return ""
    t = "**" if score.p_t_test < 0.01 else "*" if score.p_t_test < 0.05 else ""
    b = "‡" if score.p_bootstrap < 0.01 else "†" if score.p_bootstrap < 0.05 else ""
    return t + b


def cell_text(cell: Cell, latex: bool = False) -> str:
    parts = []
    if cell.score is not None:
        sd = cell.score.sd
        pm = r"$\pm$" if latex else "±"
        value = f"{cell.score.mean:.2f}" + (f" {pm} {sd:.2f}" if sd is not None else "")
        mark = markers(cell)
        if latex and mark:
            mark = mark.replace("†", r"$^\dagger$").replace("‡", r"$^\ddagger$")
        done = len(cell.records)
        count = str(done) if done == cell.expected else f"{done} of {cell.expected}"
        parts.append(f"{value}{mark} ({count})")
    if cell.missing:
        parts.append(f"{cell.missing} missing")
    if cell.stale:
        parts.append(f"{len(cell.stale)} stale")
    if cell.broken:
        parts.append(f"{len(cell.broken)} broken")
    return "; ".join(parts) if parts else "—"


def _parameters(table: Table, cells: dict, row_key: str) -> str:
    counts = [cells[row_key, c.key].parameters for c in table.columns]
    shown = list(dict.fromkeys(f"{n / 1e6:.2f}M" if n else "?" for n in counts))
    return " / ".join(shown)


def _size(table: Table, cells: dict, row_key: str) -> str:
    """A language model's d as run, and the paper's (Table 6)."""
    runs = {r["config"]["model"].get("hidden_dim") for c in table.columns for r in cells[row_key, c.key].records}
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


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _hardware(info: dict) -> str:
    text = str(info.get("cpu", "?")) + (f" ({info['cpu_count']} cores)" if info.get("cpu_count") else "")
    return text + (f", {info['gpu']}" if info.get("gpu") else "")


def footer(table: Table, scale: Scale, cells: dict) -> list[str]:
    lines = [f"Scale {scale.name}: {scale.describe(table.task)}."]
    for pair in dict.fromkeys(c.pair for c in table.columns):
        p = scale.pairs[pair]
        runs = scale.pairs[scale.job_pair(pair)]
        tests = ", ".join(
            f"{c.label} = split {runs.tests[scale.job_test(pair, c.test)]}" for c in table.columns if c.pair == pair
        )
        shared = f" (the runs of {runs.key})" if p.same_as else ""
        lines.append(f"{pair}: {p.label}{shared}; {tests}." + (f" {p.note}" if p.note else ""))
    for metric in dict.fromkeys(c.metric for c in table.columns):
        lines.append(f"{', '.join(c.label for c in table.columns if c.metric == metric)}: {METRICS[metric]}.")
    lines.append(tests_note(table))
    records = [r for cell in cells.values() for r in cell.records]
    if records:
        seconds = sorted({r["job"]: r.get("wall_seconds", {}).get("total", 0.0) for r in records}.values())
        commits = sorted({(r.get("commit") or "?")[:10] + ("+dirty" if r.get("dirty") else "") for r in records})
        hardware = sorted({_hardware(r.get("hardware", {})) for r in records})
        lines.append(
            f"{len(seconds)} runs, wall time per job {_duration(min(seconds))}-{_duration(max(seconds))} "
            f"(total {sum(seconds) / 3600:.2f} h); hardware: {'; '.join(hardware)}; "
            f"commits: {', '.join(commits)}."
        )
    problems = [reason for cell in cells.values() for reason in (*cell.stale, *cell.broken)]
    for reason in dict.fromkeys(problems):
        lines.append(f"Not counted: {reason}.")
    lines.append("Paper: the paper's number for the cell (its own corpora and scale).")
    return lines


def markdown(table: Table, scale: Scale, cells: dict) -> str:
    sized = ["|Θ|", "d"] if table.task == "lm" else ["|Θ|"]
    head = ["model", *sized] + [h for c in table.columns for h in (f"{c.label} ({c.pair})", "paper")]
    rows = [
        [row.label, *_sized(table, cells, row.key)]
        + [v for c in table.columns for v in (cell_text(cells[row.key, c.key]), _paper(table, row.key, c.key))]
        for row in table.rows
    ]
    title = f"**{table.title}** — scale `{scale.name}`"
    align = "l" + "r" * len(sized) + "lr" * len(table.columns)
    return formats.markdown(title, head, align, rows, footer(table, scale, cells))


def latex(table: Table, scale: Scale, cells: dict) -> str:
    sized = [r"$|\Theta|$", "$d$"] if table.task == "lm" else [r"$|\Theta|$"]
    head = ["Model", *sized] + [h for c in table.columns for h in (tex(c.label), "paper")]
    rows = [
        [tex(row.label), *_sized(table, cells, row.key)]
        + [
            v
            for c in table.columns
            for v in (tex(cell_text(cells[row.key, c.key], latex=True)), _paper(table, row.key, c.key))
        ]
        for row in table.rows
    ]
    caption = f"{tex(table.title)} (sarnmt, scale {scale.name}). {tex(tests_note(table))}"
    return formats.latex("l" + "r" * len(sized) + "lr" * len(table.columns), head, rows, caption)


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
    "scores",
    "p_t_test",
    "p_bootstrap",
    "paper",
    "parameters",
    "stale",
    "broken",
    "missing",
)


def csv_text(table: Table, scale: Scale, cells: dict) -> str:
    rows = []
    for row in table.rows:
        for column in table.columns:
            cell = cells[row.key, column.key]
            s = cell.score
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
                    "" if s is None else f"{s.mean:.4f}",
                    "" if s is None or s.sd is None else f"{s.sd:.4f}",
                    "" if s is None else ";".join(f"{v:.4f}" for v in s.scores),
                    "" if s is None or s.p_t_test is None else f"{s.p_t_test:.6f}",
                    "" if s is None or s.p_bootstrap is None else f"{s.p_bootstrap:.6f}",
                    table.paper.get(row.key, {}).get(column.key, ""),
                    cell.parameters or "",
                    len(cell.stale),
                    len(cell.broken),
                    cell.missing,
                ]
            )
    return formats.csv_text(CSV_HEADER, rows)


def plot(table: Table, scale: Scale, cells: dict, path: Path) -> None:
    """One panel per column: every seed's BLEU as a dot per row, the mean as a bar, markers above."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1,
        len(table.columns),
        figsize=(4.2 * len(table.columns) + (3.0 if len(table.columns) == 1 else 0.0), 0.55 * len(table.rows) + 1.6),
        squeeze=False,
        sharey=True,
    )
    labels = [r.label for r in table.rows]
    for ax, column in zip(axes[0], table.columns, strict=True):
        for y, row in enumerate(table.rows):
            cell = cells[row.key, column.key]
            if cell.score is None:
                ax.text(0.02, y, "no runs", va="center", transform=ax.get_yaxis_transform(), color="0.5")
                continue
            colour = "C3" if row.key == table.baseline else "C0"
            ax.barh(y, cell.score.mean, color=colour, alpha=0.25, height=0.6)
            ax.plot(cell.score.scores, [y] * len(cell.score.scores), "o", color=colour, ms=5)
            ax.text(
                cell.score.mean, y + 0.33, f"{cell.score.mean:.2f}{markers(cell)}", ha="center", va="bottom", fontsize=8
            )
        values = [v for row in table.rows if (s := cells[row.key, column.key].score) for v in s.scores]
        if values:
            low, high = min(values), max(values)
            pad = max(0.5, 0.15 * (high - low))
            ax.set_xlim(max(0.0, low - 3 * pad), high + pad)
        ax.set_title(textwrap.fill(f"{column.label}: {scale.pairs[column.pair].label}", 38), fontsize=8)
        ax.set_xlabel(AXIS_LABELS.get(column.metric, METRICS[column.metric].split(" on ")[0]))
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(labels)), labels)
    axes[0][0].invert_yaxis()
    fig.suptitle(f"{table.title} — scale {scale.name} (dots: seeds; bars: mean)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
