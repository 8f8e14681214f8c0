"""A table's cells from the job records: which runs count, their mean and spread over seeds, and their
significance against the baseline row.

A cell (row, column) expects one job per seed of its row's seed list, at the column's language pair; its runs are
the jobs' records whose config hash is the one the current config gives. A record with another hash is **stale** and
a record that cannot be read is **broken**: both are counted and shown, never averaged in. Scores are read for the
column's test set and metric; significance (:mod:`sarnmt.sweep.stats`) compares the cell's runs with the baseline
row's runs of the same column, sentence by sentence.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sarnmt.sweep import stats
from sarnmt.sweep.job import JobSettings, job_config
from sarnmt.sweep.plan import make_job, row_registry, seeds_of
from sarnmt.sweep.records import read_record, read_sentence_stats
from sarnmt.sweep.spec import Column, Row, Scale, Table

log = logging.getLogger("sarnmt")


@dataclass
class Cell:
    row: Row
    column: Column
    expected: int
    records: list[dict] = field(default_factory=list)
    stats: list[np.ndarray] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    score: stats.CellScore | None = None

    @property
    def missing(self) -> int:
        return self.expected - len(self.records) - len(self.stale) - len(self.broken)

    @property
    def parameters(self) -> int | None:
        return self.records[0]["parameters"] if self.records else None


def collect(table: Table, scale: Scale, results_dir: Path) -> dict[tuple[str, str], Cell]:
    """Every cell of ``table`` at ``scale``, filled from ``results_dir/records``."""
    # runs_dir only names paths.output_dir, which the config hash leaves out
    settings = JobSettings(runs_dir=Path("/nonexistent"), results_dir=results_dir)
    registry = row_registry([table])
    cells: dict[tuple[str, str], Cell] = {}
    digests: dict[str, str] = {}
    for row in table.rows:
        seeds = seeds_of(scale, registry[row.key])
        for column in table.columns:
            cell = Cell(row, column, len(seeds))
            for seed in seeds:
                job = make_job(scale, column.pair, registry[row.key], seed)
                if job.id not in digests:
                    digests[job.id] = job_config(job, settings)[1]
                status = read_record(settings.record_path(job), digests[job.id])
                if status.state == "stale":
                    cell.stale.append(status.reason)
                elif status.state == "broken":
                    cell.broken.append(status.reason)
                elif status.state == "complete":
                    name = scale.job_test(column.pair, column.test)
                    if name not in status.record["tests"]:
                        cell.broken.append(f"{status.path} has no test set {name!r}")
                        continue
                    width = stats.METRIC_SCORERS[column.metric].width  # BLEU: 10 integers a sentence; ppl: 2 a line
                    try:
                        sentence = np.asarray(read_sentence_stats(status.path)[name][column.metric], dtype=np.float64)
                        if sentence.ndim != 2 or sentence.shape[1] != width:
                            raise ValueError(f"shape {sentence.shape}, expected (sentences, {width})")
                    except (ValueError, KeyError, TypeError) as err:
                        cell.broken.append(f"{status.path}: sentence statistics unusable ({err})")
                        continue
                    cell.records.append(status.record)
                    cell.stats.append(sentence)
            if cell.records:
                cell.score = stats.cell_score(cell.stats, column.metric)
            cells[row.key, column.key] = cell
    for column in table.columns:
        base = cells[table.baseline, column.key]
        for row in table.rows:
            cell = cells[row.key, column.key]
            if row.key == table.baseline or not cell.records or not base.records:
                continue
            try:
                cell.score.p_t_test, cell.score.p_bootstrap = stats.compare(cell.stats, base.stats, column.metric)
            except ValueError as err:  # runs on test sets of different sizes: the cell is shown without markers
                log.warning("%s / %s: no significance test against the baseline: %s", row.key, column.key, err)
    return cells
