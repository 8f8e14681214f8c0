"""The numbers that ``docs/reproducing.md`` and the README quote are the committed tables' (``sweeps/results/*/tables/
*.csv``), or, in a table of single runs, their records' (``sweeps/results/*/records/*.json``; the comment before
``RECORDS``).
So are those of the results folders' notes (``sweeps/results/*/README.md``, shown on the generated Results pages),
where the per-run tables and the longer readings of the mini scales are.

A markdown table in the docs that quotes the tables is preceded by a comment naming its source::

    <!-- from the tables: scale mini; rows baseline mean_residual; columns table2/nt14 table3/nt16 -->

(a column of ``table1.vs-mean_residual/es_en`` quotes the table rendered against another row, ``also_against``)

and has, per row, the row's label, its number of seeds (``5 / 3`` where its columns differ), then per named column
two cells: the mean ± sd over seeds (with the † or ‡ of the CSV's ``markers``, the seed-aware test's) and the
difference with the baseline with its 95% interval (empty for the baseline; ``Δ, n/a (1 run)`` where the row or
the baseline has one run), or ``–`` and an empty cell where the table has no such cell. The text after such a
table, up to the next heading or quoting table, may say "the smallest p_seed is X" and "No row is marked": both are
checked against the same cells. A failing check prints the row as the tables give it.

A table that quotes what the runs can detect (the footers' simulated power, the CSV's power columns) is preceded by

    <!-- power from the tables: scale mini; rows mean_residual self_attentive_content; columns table1/en_zh -->

and has, per row, the row's label, its runs against the baseline's (``5 v 5``), then per named column five cells:
the true Δ detected with power 0.8, the paper's Δ, the power at it, the seeds a side for power 0.8 at it and p,
the probability of the observed Δ under it (``–`` for the last four where the paper has no gain over the baseline).
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reproducing.md"
README = ROOT / "README.md"
PAGES = [DOC, README, *sorted((ROOT / "sweeps" / "results").glob("*/README.md"))]  # every page that quotes them
SOURCE = re.compile(r"<!-- from the tables: scale (\w+); rows ([\w ]+); columns ([\w/ .-]+) -->")
POWER = re.compile(r"<!-- power from the tables: scale (\w+); rows ([\w ]+); columns ([\w/ .-]+) -->")


def quoted_tables(
    doc: Path, pattern: re.Pattern = SOURCE
) -> list[tuple[str, list[str], list[str], list[list[str]], str]]:
    """Each quoting table of the page: (scale, row keys, columns, its body rows' cells, the text after it)."""
    text = doc.read_text(encoding="utf-8")
    found = []
    for match in pattern.finditer(text):
        scale, rows, columns = match.group(1), match.group(2).split(), match.group(3).split()
        lines = text[match.end() :].lstrip("\n").splitlines()
        table = list(itertools.takewhile(lambda line: line.startswith("|"), lines))
        rest = "\n".join(lines[len(table) :])
        after = re.split(r"\n#+ |<!-- from the tables|<!-- power from the tables", rest, maxsplit=1)[0]
        body = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in table[2:]]
        found.append((scale, rows, columns, body, after))
    return found


def table_cells(scale: str, name: str) -> dict[tuple[str, str], dict[str, str]]:
    path = ROOT / "sweeps" / "results" / scale / "tables" / f"{name}.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        return {(row["row"], row["column"]): row for row in csv.DictReader(handle)}


def expected_cells(cell: dict[str, str] | None) -> list[str]:
    """The two docs cells of one table cell: mean ± sd with the seed-aware marker, and Δ [95% interval]."""
    if cell is None or not cell["n"] or int(cell["n"]) == 0:
        return ["–", ""]
    mean = f"{float(cell['mean']):.2f}" + (f" ± {float(cell['sd']):.2f}" if cell["sd"] else "")
    seed_marker = "".join(m for m in cell["markers"] if m in "†‡")  # the rule: sarnmt.sweep.render.seed_marker
    mean += f" {seed_marker}" if seed_marker else ""
    if not cell["diff"]:
        return [mean, ""]
    if not cell["diff_lo"]:  # one run in the row or the baseline: no interval, the marker says why
        return [mean, f"{float(cell['diff']):+.2f}, {cell['seed_test']}"]
    diff, low, high = (float(cell[key]) for key in ("diff", "diff_lo", "diff_hi"))
    return [mean, f"{diff:+.2f} [{low:+.2f}, {high:+.2f}]"]


def source_cells(scale: str, rows: list[str], columns: list[str]) -> dict[str, list[dict[str, str] | None]]:
    """Per row, its cell in each column (None where that table has no such row); a name no table has fails."""
    tables = {name: table_cells(scale, name) for name in {column.split("/")[0] for column in columns}}
    keys = [tuple(column.split("/")) for column in columns]
    for name, column in keys:
        assert any(key[1] == column for key in tables[name]), f"{scale}: {name}.csv has no column {column}"
    for row in rows:
        assert any((row, column) in tables[name] for name, column in keys), f"{scale}: no quoted table has row {row}"
    return {row: [tables[name].get((row, column)) for name, column in keys] for row in rows}


def _name(doc: Path) -> str:
    return doc.relative_to(ROOT).as_posix()


QUOTED = [(doc, index, table) for doc in PAGES for index, table in enumerate(quoted_tables(doc), 1)]
POWERS = [(doc, index, table) for doc in PAGES for index, table in enumerate(quoted_tables(doc, POWER), 1)]


def test_the_pages_quote_the_tables():
    for doc in (DOC, README):
        assert quoted_tables(doc), f"{_name(doc)}: no table says where its numbers come from (<!-- from the tables)"
        assert quoted_tables(doc, POWER), f"{_name(doc)}: no table quotes the simulated power (<!-- power ...)"


@pytest.mark.parametrize(("doc", "index", "quoted"), QUOTED, ids=[f"{_name(d)}-{i}" for d, i, _ in QUOTED])
def test_each_quoted_row_is_the_tables(doc, index, quoted):
    scale, rows, columns, body, _ = quoted
    assert len(body) == len(rows), f"{_name(doc)}: table {index} has {len(body)} rows, its comment names {len(rows)}"
    table = source_cells(scale, rows, columns)
    for row, cells in zip(rows, body, strict=True):
        sources = table[row]
        seeds = list(dict.fromkeys(cell["n"] for cell in sources if cell is not None and cell["n"]))
        expected = [cells[0], " / ".join(seeds) or "0"]  # "5 / 3" where the columns' cells have different seeds
        for cell in sources:
            expected += expected_cells(cell)
        assert cells == expected, f"{_name(doc)}: row {row} should read | " + " | ".join(expected) + " |"


def _p(value: float) -> str:
    """A p as the footers print it (:func:`sarnmt.sweep.footer._p`)."""
    return "< 0.001" if value < 0.001 else f"{value:.3f}" if value < 0.01 else f"{value:.2f}"


def power_cells(cell: dict[str, str]) -> list[str]:
    """The five docs cells of one cell's simulated power."""
    if not cell["paper_delta"]:
        return [f"{float(cell['power_detects']):+.2f}", "–", "–", "–", "–"]
    return [
        f"{float(cell['power_detects']):+.2f}",
        f"{float(cell['paper_delta']):+.1f}",
        f"{float(cell['power_at_paper']):.2f}",
        cell["seeds_at_paper"],
        _p(float(cell["p_at_paper"])),
    ]


@pytest.mark.parametrize(("doc", "index", "quoted"), POWERS, ids=[f"{_name(d)}-{i}" for d, i, _ in POWERS])
def test_each_quoted_power_is_the_tables(doc, index, quoted):
    scale, rows, columns, body, _ = quoted
    assert len(body) == len(rows), f"{_name(doc)}: power table {index} has {len(body)} rows for {len(rows)}"
    table = source_cells(scale, rows, columns)
    for row, cells in zip(rows, body, strict=True):
        sources = table[row]
        assert all(cell is not None and cell["power_detects"] for cell in sources), f"{_name(doc)}: {row} has no power"
        runs = {cell["n"] for cell in sources}
        bases = {
            tables_cell["n"]
            for name, column in (c.split("/") for c in columns)
            for key, tables_cell in table_cells(scale, name).items()
            if key[1] == column and not tables_cell["diff"] and tables_cell["n"] not in ("", "0")
        }
        expected = [cells[0], " / ".join(f"{n} v {b}" for n in sorted(runs) for b in sorted(bases))]
        for cell in sources:
            expected += power_cells(cell)
        assert cells == expected, f"{_name(doc)}: row {row} should read | " + " | ".join(expected) + " |"


@pytest.mark.parametrize(("doc", "index", "quoted"), QUOTED, ids=[f"{_name(d)}-{i}" for d, i, _ in QUOTED])
def test_the_text_after_a_table_states_its_markers(doc, index, quoted):
    scale, rows, columns, _, after = quoted
    p_values = [
        float(cell["p_seed"])
        for cells in source_cells(scale, rows, columns).values()
        for cell in cells
        if cell is not None and cell["p_seed"]
    ]
    said = re.search(r"smallest p_seed is ([0-9.]+)", after)
    if said:
        smallest = f"{min(p_values):.2f}" if p_values else "none"
        assert smallest == said.group(1), f"{_name(doc)}: the smallest p_seed is {smallest}"
    if "No row is marked" in after:
        assert all(p >= 0.05 for p in p_values), f"{_name(doc)}: a row is marked (p_seed {min(p_values):.3f})"


# A table of single runs quotes their records instead: its comment names each row's record as folder:job (the
# folder under sweeps/results/, the job's id) and the columns after the row's label: ``updates`` (the selected
# checkpoint's update / the last update, as "2,700 / 3,100"), ``cost`` (the selected checkpoint's dev cost) and
# metric/test (a test set's score, as bleu/nt14 or bleu_tok/nt14), each to 2 decimals.
RECORDS = re.compile(r"<!-- from the records: rows ([\w:. ]+); columns ([\w/ ]+) -->")


def quoted_runs(doc: Path) -> list[tuple[list[str], list[str], list[list[str]]]]:
    """Each table of the page that quotes records: (its rows' folder:job, its columns, its body rows' cells)."""
    text = doc.read_text(encoding="utf-8")
    found = []
    for match in RECORDS.finditer(text):
        lines = text[match.end() :].lstrip("\n").splitlines()
        table = list(itertools.takewhile(lambda line: line.startswith("|"), lines))
        body = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in table[2:]]
        found.append((match.group(1).split(), match.group(2).split(), body))
    return found


def record_cells(source: str, columns: list[str]) -> list[str]:
    """The cells a row quoting the record ``folder:job`` should hold in ``columns``."""
    folder, job = source.split(":")
    path = ROOT / "sweeps" / "results" / folder / "records" / f"{job}.json"
    assert path.is_file(), f"no record {path.relative_to(ROOT)}"
    record = json.loads(path.read_text(encoding="utf-8"))
    selected = record["selected_checkpoint"]
    cells = []
    for column in columns:
        if column == "updates":
            step = int(re.search(r"step(\d+)", selected["file"]).group(1))
            cells.append(f"{step:,} / {record['steps']:,}")
        elif column == "cost":
            cells.append(f"{selected['score']:.2f}")
        else:
            metric, test = column.split("/")
            cells.append(f"{record['tests'][test]['scores'][metric]['score']:.2f}")
    return cells


RUNS = [(doc, index, table) for doc in PAGES for index, table in enumerate(quoted_runs(doc), 1)]


@pytest.mark.parametrize(("doc", "index", "quoted"), RUNS, ids=[f"{_name(d)}-{i}" for d, i, _ in RUNS])
def test_each_quoted_run_is_its_record(doc, index, quoted):
    sources, columns, body = quoted
    assert len(body) == len(sources), f"{_name(doc)}: run table {index} has {len(body)} rows for {len(sources)} records"
    for source, cells in zip(sources, body, strict=True):
        expected = [cells[0], *record_cells(source, columns)]
        assert cells == expected, f"{_name(doc)}: the row of {source} should read | " + " | ".join(expected) + " |"
