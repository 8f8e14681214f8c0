"""The jobs a set of tables needs at a scale: one per (language pair, row, seed), each trained once for every
table that needs it, and a job rebuilt from its id (``<pair>.<row>.s<seed>``, which names its folders) by the sweep's
job entry point."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sarnmt.sweep.spec import TABLES_DIR, Row, Scale, SpecError, Table, available_tables, load_table


@dataclass(frozen=True)
class Job:
    """One training run and its evaluation on every test set of its pair.

    :param train: the train overrides, in order: scale, pair, row, seed (later ones win), then the user's extras.
    """

    scale: str
    pair: str
    row: str
    seed: int
    train: tuple[str, ...]
    tests: dict[str, str]
    tables: tuple[int, ...] = field(default=(), compare=False)
    task: str = "translation"

    @property
    def id(self) -> str:
        return job_id(self.pair, self.row, self.seed)


def job_id(pair: str, row: str, seed: int) -> str:
    return f"{pair}.{row}.s{seed}"


def parse_job_id(text: str) -> tuple[str, str, int]:
    parts = text.split(".")
    if len(parts) != 3 or not parts[2].startswith("s") or not parts[2][1:].isdigit():
        raise SpecError(f"job id {text!r} is not <pair>.<row>.s<seed> (e.g. es_en.baseline.s1)")
    return parts[0], parts[1], int(parts[2][1:])


def row_registry(tables: list[Table]) -> dict[str, Row]:
    """Every row key of the given tables with its definition; one key must mean one model everywhere."""
    rows: dict[str, Row] = {}
    for table in tables:
        for row in table.rows:
            if row.key in rows and (rows[row.key].train, rows[row.key].seeds, rows[row.key].by_scale) != (
                row.train,
                row.seeds,
                row.by_scale,
            ):
                raise SpecError(
                    f"row {row.key!r} is defined differently in {table.path} and another table "
                    f"({row.train}, {row.seeds} vs {rows[row.key].train}, {rows[row.key].seeds})"
                )
            rows.setdefault(row.key, row)
    return rows


def make_job(
    scale: Scale, pair: str, row: Row, seed: int, extra: tuple[str, ...] = (), tables: tuple[int, ...] = ()
) -> Job:
    p = scale.pairs[scale.job_pair(pair)]
    sized = row.by_scale.get(scale.name, ())
    # data_order: per_seed gives each seed its own batch order (a language model reads one stream in corpus order)
    order = (f"data.order_seed={seed}",) if scale.data_order == "per_seed" and row.task == "translation" else ()
    train = (*scale.train_for(row.task), *p.train, *row.train, *sized, f"seed={seed}", *order, *extra)
    return Job(scale.name, p.key, row.key, seed, train, dict(p.tests), tuple(tables), row.task)


def seeds_of(scale: Scale, row: Row) -> tuple[int, ...]:
    if row.seeds not in scale.seeds:
        raise SpecError(
            f"row {row.key!r} asks for seed list {row.seeds!r}; scale {scale.name} has {sorted(scale.seeds)}"
        )
    return scale.seeds[row.seeds]


def plan_jobs(tables: list[Table], scale: Scale, extra: tuple[str, ...] = ()) -> list[Job]:
    """Every job the tables need at this scale, each once, in table order (baseline rows first)."""
    registry = row_registry(tables)
    jobs: dict[str, Job] = {}
    for table in tables:
        for column in table.columns:
            if column.pair not in scale.pairs:
                raise SpecError(
                    f"table {table.number} needs language pair {column.pair!r}, which scale "
                    f"{scale.name} does not define ({scale.path}); its pairs: {sorted(scale.pairs)}"
                )
            if column.test not in scale.pairs[column.pair].tests:
                raise SpecError(
                    f"table {table.number} needs test set {column.test!r} of {column.pair}, which "
                    f"{scale.path} does not map to a split"
                )
        order = sorted(table.rows, key=lambda r: r.key != table.baseline)
        for pair in dict.fromkeys(c.pair for c in table.columns):
            for seed_index in range(max(len(seeds_of(scale, r)) for r in table.rows)):
                for row in order:
                    seeds = seeds_of(scale, registry[row.key])
                    if seed_index >= len(seeds):
                        continue
                    job = make_job(scale, pair, registry[row.key], seeds[seed_index], extra)
                    known = jobs.get(job.id)
                    jobs[job.id] = Job(
                        **{**vars(job), "tables": tuple(sorted({*(known.tables if known else ()), table.number}))}
                    )
    return list(jobs.values())


def job_from_id(scale: Scale, text: str, extra: tuple[str, ...] = (), tables_dir: Path = TABLES_DIR) -> Job:
    """The job of an id at a scale (the row's definition comes from whichever table has it)."""
    pair, row_key, seed = parse_job_id(text)
    tables = [load_table(n, tables_dir) for n in available_tables(tables_dir)]
    registry = row_registry(tables)
    if row_key not in registry:
        raise SpecError(f"job {text!r}: no table has a row {row_key!r}; rows: {sorted(registry)}")
    serves = [
        t.number
        for t in tables
        if any(r.key == row_key for r in t.rows)
        and any(scale.job_pair(c.pair) == pair for c in t.columns if c.pair in scale.pairs)
    ]
    return make_job(scale, pair, registry[row_key], seed, extra, tables=tuple(serves))
