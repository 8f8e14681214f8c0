"""Render the paper's tables from the sweep's records: ``python -m sarnmt tables table=1 scale=mini``.

Prints each table as Markdown and writes ``<results_dir>/tables/table<N>.{md,tex,csv,png}``; with ``wandb.log=true``
also logs it as a W&B Table in a summary run (group ``table<N>-<scale>``, job type ``summary``). The cells, the
significance tests and the formats are :mod:`sarnmt.sweep.cells`, :mod:`sarnmt.sweep.stats` and
:mod:`sarnmt.sweep.render`.

The markers are the seed-aware test, Welch's t on the seed means with the test set's variance shared by a system's
runs added (one-sided; :mod:`sarnmt.sweep.seed_tests`; ``significance.seed_test=v_sent`` the earlier test,
which the superseded mini8 scale keeps), and the paper's t-test, sentence-level with seeds pooled; the bootstrap
columns of the CSV draw ``significance.resamples`` resamples (10,000 by default) from numpy's generator seeded
``significance.seed``. A cell never averages runs of
different code unless ``allow_mixed_code=true`` (off by default), which the footer then states.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from hydra.utils import to_absolute_path
from omegaconf import DictConfig

from sarnmt.errors import UserError, reported
from sarnmt.sweep import figure, render, seed_tests
from sarnmt.sweep.cells import Cell, TableSettings, compare, read_cells
from sarnmt.sweep.records import write_atomic
from sarnmt.sweep.seed_tests import Resampling
from sarnmt.sweep.spec import Scale, Table, available_tables, load_scale, load_table
from sarnmt.utils.compose import hydra_main


def render_tables(
    numbers: list[int],
    scale_name: str,
    results_dir: Path,
    write: bool = True,
    plot: bool = True,
    out=None,
    wandb_settings: dict | None = None,
    settings: TableSettings | None = None,
    baseline: str | None = None,
) -> dict[int, str]:
    """:returns: ``{table number: Markdown}``; writes the files when ``write``. ``settings``: the resamples and
    generator seed of the bootstrap tests and ``allow_mixed_code`` (default: 10,000, 12345, off). ``baseline``: the
    row every other row is compared with instead of the table's baseline; its files are then
    ``table<N>.vs-<row>.*`` (:attr:`Table.stem`), so the published tables stay as they are. Without it, each table
    is also rendered against each row of its ``also_against`` (the orderings the paper claims between two of its
    rows); the Markdown returned is then the table's own."""
    settings = settings or TableSettings()
    out = out or sys.stdout  # the stream of the call, not of the import (tests run the command in their process)
    scale = load_scale(scale_name)
    settings = replace(settings, seed_test=settings.seed_test or scale.seed_test)  # the scale's test unless given
    options = (write, plot, out, wandb_settings, settings)
    rendered = {}
    for number in numbers:
        table = load_table(number)
        versions = (
            [table.compared_with(baseline)] if baseline else [table, *map(table.compared_with, table.also_against)]
        )
        read = read_cells(table, scale, results_dir, settings)  # the records, read once for every version
        texts = [render_one(v, scale, compare(v, read, settings), results_dir, *options) for v in versions]
        rendered[number] = texts[0]
        check_counted(number, scale_name, results_dir, read)
    return rendered


def check_counted(number: int, scale_name: str, results_dir: Path, cells: dict[tuple[str, str], Cell]) -> None:
    """A table none of whose records counts is a failure, never an empty table and success.

    :raises UserError: one line: how many records were broken, stale or corrupt, and the first reason."""
    if any(cell.counted for cell in cells.values()):
        return
    problems = [reason for cell in cells.values() for reason in (*cell.broken, *cell.stale, *cell.corrupt)]
    found = f"{len(problems)} records found, none usable; the first: {problems[0]}" if problems else "no records"
    raise UserError(f"table {number} at scale {scale_name}: no run counts in {results_dir}/records ({found})")


def render_one(
    table: Table,
    scale: Scale,
    cells: dict[tuple[str, str], Cell],
    results_dir: Path,
    write: bool,
    plot: bool,
    out,
    wandb_settings: dict | None,
    settings: TableSettings,
) -> str:
    """Print one table (its ``cells`` compared with its baseline row) and write
    ``<results_dir>/tables/<stem>.{md,tex,csv,png}``."""
    text = render.markdown(table, scale, cells, settings)
    print(text, file=out, flush=True)
    if write:
        folder = results_dir / "tables"
        write_atomic(folder / f"{table.stem}.md", text.encode())
        write_atomic(folder / f"{table.stem}.tex", render.latex(table, scale, cells, settings).encode())
        write_atomic(folder / f"{table.stem}.csv", render.csv_text(table, scale, cells, settings).encode())
        if plot:
            method = seed_tests.SEED_TESTS[settings.seed_test or "shared"]
            figure.plot(table, scale, cells, folder / f"{table.stem}.png", method)
        print(f"written: {folder}/{table.stem}.{{md,tex,csv{',png' if plot else ''}}}", file=out)
    if wandb_settings is not None:
        log_wandb(table.stem, scale.name, render.csv_text(table, scale, cells, settings), text, wandb_settings)
    return text


def log_wandb(stem: str, scale: str, csv_text: str, markdown: str, settings: dict) -> None:
    """One summary run per table (``stem``: ``table<N>``, or ``table<N>.vs-<row>``): the cells as a W&B Table, the
    Markdown as a text artifact of the run."""
    import csv

    import wandb

    rows = list(csv.reader(csv_text.splitlines()))
    run = wandb.init(
        project=settings["project"],
        group=f"{stem}-{scale}",
        job_type="summary",
        name=f"{stem}-{scale}",
        tags=[scale, stem.split(".")[0]],
        mode="offline" if settings.get("offline", True) else "online",
        dir=settings["save_dir"],
        reinit="finish_previous",
    )
    run.log({stem: wandb.Table(columns=rows[0], data=rows[1:])})
    run.summary["markdown"] = markdown
    run.finish()


def shown_path(path: str) -> Path:
    """``path`` relative to the working directory when it lies under it (the published footers name records as
    ``sweeps/results/mini/records/...``, not by one machine's absolute path), else absolute."""
    absolute = Path(to_absolute_path(path))
    return absolute.relative_to(Path.cwd()) if absolute.is_relative_to(Path.cwd()) else absolute


@hydra_main("tables")
def main(cfg: DictConfig) -> None:
    with reported():
        numbers = available_tables() if str(cfg.table) == "all" else [load_table(cfg.table).number]
        wandb_settings = None
        if cfg.wandb.log:
            wandb_settings = {**cfg.wandb, "save_dir": to_absolute_path(cfg.wandb.save_dir)}
            Path(wandb_settings["save_dir"]).mkdir(parents=True, exist_ok=True)
        render_tables(
            numbers,
            cfg.scale,
            shown_path(cfg.results_dir),
            cfg.write,
            cfg.plot,
            wandb_settings=wandb_settings,
            settings=TableSettings(
                Resampling(cfg.significance.resamples, cfg.significance.seed),
                allow_mixed_code=cfg.allow_mixed_code,
                seed_test=cfg.significance.get("seed_test"),
            ),
            baseline=cfg.baseline,
        )
