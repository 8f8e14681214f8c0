"""Table 1 and Table 4 at scale mini with some of their runs: the committed En→De records (15 runs at one commit)
copied into a temporary results folder, plus synthetic records for cells with fewer runs than their seeds (a row
with 2 of its 3 seeds, one with 1) and a De→En column with some cells only. A cell with fewer seeds than planned
says how many ran and its Δ is tested on the runs there are, at their counts (5 v 2, 5 v 3, 3 v 2); a cell with one
run is labelled untestable; a cell with none says not run and the footer counts the jobs without a record; the
power line uses the comparisons' own run counts."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from sarnmt.cli.tables import render_tables
from sarnmt.sweep import stats
from sarnmt.sweep.cells import TableSettings
from sarnmt.sweep.job import JobSettings, job_config
from sarnmt.sweep.plan import plan_jobs
from sarnmt.sweep.records import gzip_bytes, write_json
from sarnmt.sweep.seed_tests import Resampling
from sarnmt.sweep.spec import load_scale, load_table

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "sweeps" / "results" / "mini" / "records"
METRICS = ("bleu", "bleu_tok", "bleu_tok_lc")
# the synthetic jobs: (pair, row) -> seeds that have a record; every other job of Tables 1 and 4 at mini is not run
SYNTHETIC = {
    ("en_de", "memory_rnn"): (1, 2),  # 2 of 3 seeds: tested at 2 v 5
    ("en_de", "self_attentive_rnn"): (1,),  # 1 of 3: one run, no seed variance, no test
    ("es_en", "baseline"): (1, 2, 3),  # 3 of 5
    ("es_en", "mean_residual"): (1, 2, 3, 4, 5),  # 5 v 3
    ("es_en", "self_attentive_rnn"): (1, 2),  # 2 v 3
    ("es_en", "self_attentive_content"): (4,),  # 1 of 5
}


def synthetic_stats(base: np.ndarray, seed: int, keep: float) -> np.ndarray:
    """A run's per-sentence BLEU statistics: the matched n-grams of ``base`` thinned binomially at ``keep`` (each
    run its own draw), lengths and totals kept."""
    out = base.copy()
    out[:, 2:6] = np.random.default_rng(seed).binomial(base[:, 2:6], keep)
    return out


@pytest.fixture(scope="module")
def partial(tmp_path_factory) -> Path:
    """A results folder: the committed En→De records and the synthetic ones of :data:`SYNTHETIC`."""
    results = tmp_path_factory.mktemp("partial")
    (results / "records").mkdir()
    for path in RECORDS.glob("en_de.*"):
        shutil.copy(path, results / "records" / path.name)
    template = json.loads((RECORDS / "en_de.baseline.s1.json").read_text())
    sentences = json.loads(gzip.open(RECORDS / "en_de.baseline.s1.sentences.json.gz").read())
    base = np.asarray(sentences["nt14"]["bleu_tok"], dtype=np.int64)
    settings = JobSettings(Path("/nonexistent"), results)
    jobs = plan_jobs([load_table(1), load_table(4)], load_scale("mini"))
    for number, job in enumerate(jobs):
        if job.seed not in SYNTHETIC.get((job.pair, job.row), ()):
            continue
        runs = {
            test: synthetic_stats(base, 100 * number + k, 0.97 + 0.005 * job.seed) for k, test in enumerate(job.tests)
        }
        path = settings.record_path(job)
        path.with_name(f"{job.id}.sentences.json.gz").write_bytes(
            gzip_bytes(json.dumps({t: {m: r.tolist() for m in METRICS} for t, r in runs.items()}).encode())
        )
        record = {
            **template,
            "job": job.id,
            "pair": job.pair,
            "row": job.row,
            "seed": job.seed,
            "config_hash": job_config(job, settings)[1],
            "commit": "d" * 40,
            "source_hash": "e" * 16,
            "config": {},
            "tests": {
                t: {"scores": {m: {"score": stats.corpus_score(r, m)} for m in METRICS}} for t, r in runs.items()
            },
        }
        write_json(path, record)
    return results


def render(results: Path, number: int) -> tuple[str, dict[str, list[str]], list[dict[str, str]]]:
    """Table ``number`` at mini: its Markdown, its rows by label (the cells), its CSV as dicts."""
    settings = TableSettings(resampling=Resampling(2000))
    text = render_tables([number], "mini", results, plot=False, out=open(os.devnull, "w"), settings=settings)[number]
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| model")
    }
    lines = (results / "tables" / f"table{number}.csv").read_text().splitlines()
    header = lines[0].split(",")
    return text, rows, [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]


def csv_row(csv: list[dict[str, str]], row: str, column: str) -> dict[str, str]:
    return next(r for r in csv if r["row"] == row and r["column"] == column)


def test_a_partial_table_1_says_what_ran_tests_what_there_is_and_counts_what_did_not(partial):
    text, rows, csv = render(partial, 1)
    # columns: |Θ|, then per column the cell, Δ and the paper's number
    en_de, en_de_delta, es_en, es_en_delta = (lambda r: (r[2], r[3], r[5], r[6]))(rows["+ Memory RNN"])
    assert en_de.endswith("(2 of 3 seeds); 1 not run") and en_de_delta.endswith(" at 2 v 5 runs")
    assert es_en == "3 not run" and es_en_delta == "—"
    cells = rows["+ Self-attentive RNN"]
    assert cells[2].endswith("(1 of 3 seeds); 2 not run") and " ± " not in cells[2]
    assert cells[3].endswith(", n/a (1 run)") and "[" not in cells[3] and " runs" not in cells[3]  # no test: no count
    assert cells[5].endswith("(2 of 3 seeds); 1 not run") and cells[6].endswith(" at 2 v 3 runs")
    assert rows["NMT baseline"][5].endswith("(3 of 5 seeds); 2 not run")
    mean = rows["+ Mean residual connections"]
    assert mean[5].endswith(" (5)") and mean[6].endswith(" at 5 v 3 runs") and "[" in mean[6]
    assert mean[3] == "+0.24 [-0.55, +1.03]"  # a complete comparison reads as before
    sac = rows["+ Self-attentive residual connections"]
    assert sac[5].endswith("(1 of 5 seeds); 4 not run") and sac[6].endswith(", n/a (1 run)")
    # the CSV: the tests ran at the counts there are, a one-run cell has none
    assert csv_row(csv, "memory_rnn", "en_zh")["seed_test"] == "Welch + shared test-set variance"
    assert csv_row(csv, "memory_rnn", "en_zh")["n"] == "2" and csv_row(csv, "memory_rnn", "en_zh")["p_seed"]
    assert (
        csv_row(csv, "mean_residual", "es_en")["seeds_done"] == "5" and csv_row(csv, "mean_residual", "es_en")["p_seed"]
    )
    one = csv_row(csv, "self_attentive_rnn", "en_zh")
    assert one["seed_test"] == "n/a (1 run)" and one["p_seed"] == "" and one["power_detects"] == ""
    assert csv_row(csv, "memory_rnn", "es_en")["missing"] == "3"
    # the footer: the jobs without a record, counted once per set of runs and per row
    assert (
        "Not run: 13 of 42 jobs have no record (Multi30K En→De: 3 of 21, + Memory RNN 1, + Self-attentive RNN 2; "
        "Multi30K De→En: 10 of 21, NMT baseline 2, + Memory RNN 3, + Self-attentive RNN 1, "
        "+ Self-attentive residual connections 4)"
    ) in text
    # the power line: each comparison at its own run counts, one-run cells left out
    assert "+ Memory RNN at 2 v 5 detects Δ +" in text and "+ Mean residual connections at 5 v 3 detects Δ +" in text
    assert "+ Self-attentive RNN at 2 v 3 detects Δ +" in text
    assert "+ Self-attentive RNN at 1 v" not in text and "at 1 v 3" not in text.split("Power, simulated")[1]


def test_table_4_renders_both_rows_with_the_content_and_scope_row_not_run(partial):
    text, rows, _ = render(partial, 4)
    assert rows["Content+Scope"][2] == "3 not run" and rows["Content+Scope"][5] == "3 not run"
    assert rows["Content"][2].endswith(" (5)") and rows["Content"][5].endswith("(1 of 5 seeds); 4 not run")
    assert "Not run: " in text and "Content+Scope 3" in text


def test_the_footer_says_which_column_ran_at_which_commit_where_they_differ(partial, tmp_path):
    """The En→De column ran at the committed records' commit and the synthetic one, the De→En column at the synthetic
    one alone: a line per column names its commits. The committed records alone (one commit in every column with
    runs) keep the one list of commits and no column line."""
    text, _, _ = render(partial, 1)
    lines = [line for line in text.splitlines() if "Commits of " in line]
    both, synthetic = "59bab309d73bfa2, ddddddddddddddd", "ddddddddddddddd"
    assert lines == [
        f"- Commits of Multi30K En→De test2016: {both}.",
        f"- Commits of Multi30K De→En test2016: {synthetic}.",
    ], lines
    assert f"commits: {both}." in text
    (tmp_path / "records").mkdir()
    for path in RECORDS.glob("en_de.*"):
        shutil.copy(path, tmp_path / "records" / path.name)
    text, _, _ = render(tmp_path, 1)
    assert "Commits of " not in text and "commits: 59bab309d73bfa2." in text
