"""A table's cells from the job records: which runs count, their mean and spread over seeds, which code ran them,
and their significance against the baseline row.

A cell (row, column) expects one job per seed of its row's seed list, at the column's language pair; its runs are
the jobs' records whose config hash is the one the current config gives. A record with another hash is **stale**, a
record that cannot be read or fails the records' schema (:func:`sarnmt.sweep.records.schema_problem`: a score that
is not a finite number, a seed that is not a whole number, a file name that is not its own job, ...) is **broken**,
and so is one whose per-sentence statistics are missing (no file, or no entry for the column's test set and metric),
unreadable or not finite; one whose statistics hold a negative count or give a score more than 0.01 from the score
it states is **corrupt**. All three are counted in their cell and named under the table (a corrupt one with a
warning), never averaged in, and the table is still rendered: a run is never dropped unnoticed, nor does one bad
record refuse the whole table.

**Code.** A record written since runs were pinned carries ``commit``, ``dirty``, ``source_hash`` (a hash of the
source that ran) and ``allow_dirty``. A cell's runs count as one code when they share one ``source_hash``; a cell
whose runs have several is **mixed code**: shown like a stale cell ("mixed code: 2 commits", with the number of
runs), counted, never averaged, unless the table is rendered with ``allow_mixed_code=true`` (:class:`TableSettings`;
the footer then says so). A record without ``source_hash`` (written before runs were pinned) is **unpinned**: counted
in its cell and averaged, since the published mini records are such; an unpinned run beside pinned ones is one more
code (its code cannot be shown to be theirs), so such a cell is mixed code. A run from a checkout with uncommitted
changes (``dirty``) is counted in its cell.

**How a run ended.** A run whose patience rule never fired (``stopped_early`` false: it ended at its epoch cap) or
whose selected checkpoint is its last update (the step in ``selected_checkpoint.file``, ``...-step000900-...``,
equal to ``steps``) has not been shown to have stopped improving: it is **cap reached** (:func:`cap_reached`),
averaged in its cell but flagged there and counted in the footer, never silently mixed with runs the patience rule
stopped (which the footer counts as **stopped by patience**, not as converged). A record without these fields
(synthetic, or older than them) is not flagged.

Scores are read for the column's test set and metric; significance (:mod:`sarnmt.sweep.seed_tests`) compares the
cell's runs with the baseline row's runs of the same column: Welch's test on the seed means with the test set's
variance shared by a system's runs added, and the sentence-level tests with seeds pooled. A stale record's reason
names the settings in which its config differs from the sweep's
(:func:`~sarnmt.sweep.records.config_difference`: a run in bf16 among fp32 ones says both precisions).
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from sarnmt.errors import InputError
from sarnmt.sweep import seed_tests, stats
from sarnmt.sweep.job import JobSettings, job_config
from sarnmt.sweep.plan import make_job, row_registry, seeds_of
from sarnmt.sweep.records import RecordStatus, config_difference, read_record, read_sentence_stats
from sarnmt.sweep.spec import Column, Row, Scale, Table

log = logging.getLogger("sarnmt")

# resamples that keep the Monte Carlo standard error of a bootstrap p near 0.05 below 0.005: 0.05 x 0.95 / 0.005^2
MIN_RESAMPLES = 1_900
# a record states its scores to 4 decimals; statistics that give a score further from it are not its run's
SCORE_TOLERANCE = 0.01


@dataclass(frozen=True)
class TableSettings:
    """How a table is computed: the bootstrap's resamples and generator seed, whether a cell may average runs
    of different code (``allow_mixed_code``, never on by default; the footer states it where it was used), and which
    seed-aware test marks it (``seed_test``: None takes the scale's, :attr:`sarnmt.sweep.spec.Scale.seed_test`)."""

    resampling: seed_tests.Resampling = seed_tests.Resampling()
    allow_mixed_code: bool = False
    seed_test: str | None = None  # shared or v_sent (seed_tests.SEED_TESTS); None: the scale's (shared but mini8)

    def __post_init__(self) -> None:
        if self.seed_test is not None and self.seed_test not in seed_tests.SEED_TESTS:
            raise InputError(
                f"significance.seed_test={self.seed_test!r}: shared (the tables' test), v_sent (the earlier test) or "
                "null (the scale's)"
            )
        n = self.resampling.resamples
        if not isinstance(n, int) or isinstance(n, bool) or n < MIN_RESAMPLES:
            raise InputError(
                f"significance.resamples={n!r}: at least {MIN_RESAMPLES:,} keep the Monte Carlo error of p near 0.05 "
                "below 0.005 (10,000 by default)"
            )
        if not isinstance(self.resampling.seed, int) or isinstance(self.resampling.seed, bool):
            raise InputError(f"significance.seed={self.resampling.seed!r}: give an integer")


@dataclass
class Cell:
    """A cell's runs: ``records``/``stats``/``paths`` those averaged; ``mixed`` the records of a mixed-code cell
    (counted, not averaged); ``stale``/``broken``/``corrupt`` the reasons of the runs not counted; ``not_run`` the
    jobs of its seeds that have no record (the footer counts them, a job once however many columns it serves)."""

    row: Row
    column: Column
    expected: int
    records: list[dict] = field(default_factory=list)
    stats: list[np.ndarray] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    mixed: list[dict] = field(default_factory=list)
    mixed_averaged: bool = False
    score: seed_tests.CellScore | None = None
    not_run: list[str] = field(default_factory=list)

    @property
    def missing(self) -> int:
        left_out = len(self.stale) + len(self.broken) + len(self.corrupt)
        return self.expected - len(self.records) - len(self.mixed) - left_out

    @property
    def counted(self) -> list[dict]:
        """Every current record of the cell, averaged or not."""
        return self.records + self.mixed

    @property
    def parameters(self) -> int | None:
        return self.counted[0]["parameters"] if self.counted else None

    @property
    def unpinned(self) -> int:
        return sum(1 for r in self.counted if not r.get("source_hash"))

    @property
    def dirty(self) -> int:
        return sum(1 for r in self.counted if r.get("dirty"))

    @property
    def capped(self) -> int:
        """How many of the cell's runs reached their epoch cap without the patience rule firing."""
        return sum(1 for r in self.counted if cap_reached(r))

    @property
    def code(self) -> str:
        """How many versions of the code ran the cell: ``N commits``, or ``N source hashes`` where the commits are
        fewer (uncommitted changes)."""
        return code_versions(self.counted)


STEP = re.compile(r"step(\d+)")


def cap_reached(record: dict) -> bool:
    """Whether a run ended at its epoch cap rather than because it stopped improving: its ``stopped_early`` is
    false, or its selected checkpoint (``selected_checkpoint.file``, ``epoch007-step000900-cost36.913.ckpt``) is at
    its last update (``steps``). False for a record without ``stopped_early`` (synthetic or older records)."""
    if "stopped_early" not in record:
        return False
    if not record["stopped_early"]:
        return True
    found = STEP.search(str((record.get("selected_checkpoint") or {}).get("file", "")))
    return found is not None and "steps" in record and int(found.group(1)) >= int(record["steps"])


def code_versions(records: list[dict]) -> str:
    """``"2 commits"``: how many distinct commits ran ``records``, or ``"2 source hashes"`` when fewer commits than
    source hashes (an unpinned record counts as a source hash of its own)."""
    commits = {r.get("commit") for r in records}
    hashes = {r.get("source_hash") or None for r in records}
    if len(commits) >= len(hashes):
        return f"{len(commits)} commit{'s' * (len(commits) != 1)}"
    return f"{len(hashes)} source hashes"


def _sentences_path(record_path: Path) -> Path:
    return record_path.with_name(record_path.name.removesuffix(".json") + ".sentences.json.gz")


def _stated_score(status: RecordStatus, name: str, metric: str) -> float | None:
    """The score a record states for the cell (None: it states none); the records' schema has checked that it is
    finite (:func:`sarnmt.sweep.records.schema_problem`)."""
    scores = status.record["tests"][name].get("scores")
    score = scores.get(metric) if isinstance(scores, dict) else None
    return score.get("score") if isinstance(score, dict) else score


def _sentence_stats(status: RecordStatus, name: str, metric: str, width: int) -> np.ndarray | str:
    """The record's per-sentence statistics for the cell, or why they are unusable (a broken run): unreadable,
    without an entry for the test set and metric, of the wrong shape or not finite."""
    try:
        table = read_sentence_stats(status.path)
    except ValueError as err:
        return f"{status.path}: sentence statistics unusable ({err})"
    if not isinstance(table, dict) or not isinstance(table.get(name), dict) or metric not in table[name]:
        return (
            f"{status.path}: its per-sentence statistics ({_sentences_path(status.path).name}) have no {metric} "
            f"entry for test set {name!r}; evaluate the job again"
        )
    try:
        sentence = np.asarray(table[name][metric], dtype=np.float64)
        if sentence.ndim != 2 or sentence.shape[1] != width:
            raise ValueError(f"shape {sentence.shape}, expected (sentences, {width})")
    except (ValueError, TypeError) as err:
        return f"{status.path}: sentence statistics unusable ({err})"
    if not np.isfinite(sentence).all():
        return f"{status.path}: its per-sentence {metric} statistics on test set {name!r} are not finite"
    score = stats.corpus_score(sentence, metric)
    if not math.isfinite(score):
        return f"{status.path}: its {metric} score from the sentence statistics on test set {name!r} is {score}"
    return sentence


def corruption(
    status: RecordStatus, name: str, metric: str, sentence: np.ndarray, recorded: float | None
) -> str | None:
    """Why a record's per-sentence statistics cannot be its run's (None when they can): a negative count, or a
    corpus score from them more than :data:`SCORE_TOLERANCE` from ``recorded``, the score the record states."""
    negative = int((sentence < 0).sum())
    if negative:
        return f"{status.path}: corrupt: {negative} negative counts in its per-sentence {metric} statistics on {name!r}"
    if recorded is None:
        return None
    computed = stats.corpus_score(sentence, metric)
    if not abs(computed - recorded) <= SCORE_TOLERANCE:
        return (
            f"{status.path}: corrupt: its per-sentence {metric} statistics on {name!r} give {computed:.4f}, the record "
            f"states {recorded:.4f}"
        )
    return None


def read_cells(table: Table, scale: Scale, results_dir: Path, settings: TableSettings) -> dict[tuple[str, str], Cell]:
    """Every cell of ``table`` at ``scale`` filled from ``results_dir/records``, not yet compared with any row: read
    once, they serve the table against each of its reference rows (:func:`compare`)."""
    # runs_dir only names paths.output_dir, which the config hash leaves out
    job_settings = JobSettings(runs_dir=Path("/nonexistent"), results_dir=results_dir)
    registry = row_registry([table])
    cells: dict[tuple[str, str], Cell] = {}
    configs: dict[str, tuple[DictConfig, str]] = {}
    for row in table.rows:
        seeds = seeds_of(scale, registry[row.key])
        for column in table.columns:
            cell = Cell(row, column, len(seeds))
            for seed in seeds:
                job = make_job(scale, column.pair, registry[row.key], seed)
                if job.id not in configs:
                    configs[job.id] = job_config(job, job_settings)
                cfg, digest = configs[job.id]
                status = read_record(job_settings.record_path(job), digest)
                if status.state == "missing":
                    cell.not_run.append(job.id)
                _add_run(cell, status, digest, scale, cfg)
            if len({r.get("source_hash") or None for r in cell.records}) > 1:
                if settings.allow_mixed_code:
                    cell.mixed_averaged = True
                else:
                    cell.mixed, cell.records, cell.stats, cell.paths = cell.records, [], [], []
            if cell.records:
                cell.score = seed_tests.CellScore([float(s) for s in cell_scores(cell)])
            cells[row.key, column.key] = cell
    return cells


def compare(table: Table, read: dict[tuple[str, str], Cell], settings: TableSettings) -> dict[tuple[str, str], Cell]:
    """The cells of :func:`read_cells`, each with its comparison against its column's cell of ``table.baseline``
    (copies: ``read`` is left as it was, for another reference row)."""
    cells = {
        key: replace(cell, score=replace(cell.score, comparison=None) if cell.score else None)
        for key, cell in read.items()
    }
    for column in table.columns:
        base = cells[table.baseline, column.key]
        for row in table.rows:
            cell = cells[row.key, column.key]
            if row.key == table.baseline or not cell.records or not base.records:
                continue
            try:
                cell.score.comparison = seed_tests.compare_cells(
                    cell.stats, base.stats, column.metric, settings.resampling, settings.seed_test or "shared"
                )
            except ValueError as err:  # runs on test sets of different sizes: the cell is shown without markers
                log.warning("%s / %s: no significance test against the baseline: %s", row.key, column.key, err)
    return cells


def cell_scores(cell: Cell) -> np.ndarray:
    """The corpus score of each of the cell's runs, from its per-sentence statistics (each finite: a run whose
    statistics give no finite score is broken, :func:`_sentence_stats`)."""
    return stats.corpus_scores(np.stack([s.sum(axis=0) for s in cell.stats]), cell.column.metric)


def _add_run(cell: Cell, status: RecordStatus, digest: str, scale: Scale, expected: DictConfig | None = None) -> None:
    """Count one job's record in ``cell``: averaged, or stale, broken or corrupt with the reason (a stale record's
    names the settings in which it differs from the sweep's config,
    :func:`~sarnmt.sweep.records.config_difference`: two precisions, say)."""
    column = cell.column
    if status.state == "broken" and status.record is not None and not _sentences_path(status.path).is_file():
        if status.record.get("config_hash") != digest:  # another config's record: stale, whatever it lacks
            cell.stale.append(
                f"record {status.path} has config hash {status.record.get('config_hash')}, the sweep's config gives "
                f"{digest}" + config_difference(status.record, expected)
            )
            return
        cell.broken.append(
            f"{status.path}: its per-sentence statistics {_sentences_path(status.path)} are missing; evaluate the "
            "job again (the sweep does) or move the record away"
        )
        return
    if status.state == "stale":
        cell.stale.append(status.reason + config_difference(status.record or {}, expected))
    elif status.state == "broken":
        cell.broken.append(status.reason)
    elif status.state == "complete":
        name = scale.job_test(column.pair, column.test)
        if name not in status.record["tests"]:
            cell.broken.append(f"{status.path} has no test set {name!r}")
            return
        if any(r["seed"] == status.record["seed"] for r in cell.records + cell.mixed):
            cell.broken.append(f"{status.path}: a second record of seed {status.record['seed']} in this cell")
            return
        recorded = _stated_score(status, name, column.metric)
        sentence = _sentence_stats(status, name, column.metric, stats.METRIC_SCORERS[column.metric].width)
        if isinstance(sentence, str):
            cell.broken.append(sentence)
            return
        corrupt = corruption(status, name, column.metric, sentence, recorded)
        if corrupt is not None:
            log.warning("%s", corrupt)
            cell.corrupt.append(corrupt)
            return
        cell.records.append(status.record)
        cell.stats.append(sentence)
        cell.paths.append(status.path)
