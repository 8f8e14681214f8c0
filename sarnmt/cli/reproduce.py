"""Reproduce the paper's tables: ``python -m sarnmt reproduce table=1 scale=mini [launcher=local|joblib|slurm]``.

Plan the jobs (:mod:`sarnmt.sweep.spec`), check the corpora before any job, skip the jobs with a complete record,
run the others as one Hydra multirun (:mod:`sarnmt.sweep.launch`), then render the tables from the records
(:mod:`sarnmt.cli.tables`). ``dry_run=true`` prints the plan, the multirun command and the launcher's settings. Running
the same command again continues where it stopped. :func:`reproduce` is a pure function of the config.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.utils import to_absolute_path
from omegaconf import DictConfig

from sarnmt.cli.tables import render_tables
from sarnmt.errors import reported
from sarnmt.sweep.cells import TableSettings
from sarnmt.sweep.folders import lock_holder
from sarnmt.sweep.job import JobSettings
from sarnmt.sweep.launch import (
    JobState,
    SweepError,
    check_corpora,
    format_command,
    job_states,
    launcher_overrides,
    launcher_settings,
    multirun_command,
)
from sarnmt.sweep.plan import Job, plan_jobs
from sarnmt.sweep.spec import Scale, Table, available_tables, load_scale, load_table
from sarnmt.utils.choices import group_choice
from sarnmt.utils.compose import hydra_main

log = logging.getLogger("sarnmt")


def table_numbers(value: Any) -> list[int]:
    if str(value) == "all":
        return available_tables()
    return [int(value)] if str(value).isdigit() else [load_table(value).number]  # load_table names the valid ones


def slurm_check():
    """:func:`sarnmt.sweep.slurm.check_slurm`, or a :class:`SweepError` when submitit's launcher is not installed."""
    try:
        from sarnmt.sweep.slurm import check_slurm
    except ImportError as err:
        raise SweepError(
            f"launcher=slurm needs hydra-submitit-launcher ({err}): pip install -e '.[slurm]' (make install does)"
        ) from err
    return check_slurm


def settings_of(cfg: DictConfig) -> JobSettings:
    return JobSettings(
        runs_dir=Path(to_absolute_path(cfg.runs_dir)),
        results_dir=Path(to_absolute_path(cfg.results_dir)),
        logger=group_choice(cfg, "logger"),
        eval_batch_size=cfg.eval_batch_size,
        progress=cfg.progress,
        allow_dirty=bool(cfg.allow_dirty),
        allow_mixed_code=bool(cfg.allow_mixed_code),
    )


def reproduce(cfg: DictConfig, out=None) -> dict[str, Any]:
    """:returns: ``{"jobs": [...states], "command": [...], "returncode": int | None, "tables": {n: markdown}}``."""
    out = out or sys.stdout  # the stream of the call, not of the import (tests run the command in their process)
    numbers = table_numbers(cfg.table)
    tables = [load_table(n) for n in numbers]
    scale = load_scale(cfg.scale)
    launcher_overrides(cfg.launcher, cfg.n_jobs, cfg.slurm)  # an unknown launcher fails here, before anything else
    settings = settings_of(cfg)
    jobs = plan_jobs(tables, scale, tuple(str(o) for o in cfg.overrides))
    states = job_states(jobs, settings)
    print_plan(numbers, tables, scale, settings, states, out)
    todo = [s.job for s in states if s.state != "complete"]
    overrides, extra = [str(o) for o in cfg.overrides], [str(o) for o in cfg.launcher_overrides]
    command = multirun_command(todo, scale.name, settings, cfg.launcher, cfg.n_jobs, overrides, extra, cfg.slurm)
    result: dict[str, Any] = {
        "jobs": [{"job": s.job.id, "state": s.state, "note": s.note} for s in states],
        "command": command if todo else [],
        "returncode": None,
        "tables": {},
    }
    if cfg.dry_run:
        return dry_run(command, todo, result, out)
    if todo:
        run_jobs(cfg, command, todo, jobs, settings, result, out)
    else:
        print("every job has a complete record: nothing to run", file=out)
    if cfg.render:
        table_settings = TableSettings(allow_mixed_code=settings.allow_mixed_code)
        result["tables"] = render_tables(numbers, scale.name, settings.results_dir, out=out, settings=table_settings)
    return result


def print_plan(
    numbers: list[int], tables: list[Table], scale: Scale, settings: JobSettings, states: list[JobState], out
) -> None:
    """The tables, the scale, the folders and each job's state (complete, evaluate, resume, new), counted."""
    described = "; ".join(dict.fromkeys(scale.describe(t.task) for t in tables))
    print(f"tables {', '.join(map(str, numbers))} at scale {scale.name}: {described}", file=out)
    print(f"{len(states)} jobs; records in {settings.results_dir}, runs in {settings.runs_dir}", file=out)
    for s in states:
        print(
            f"  {s.job.id:<45} {s.state:<9} tables {','.join(map(str, s.job.tables))}"
            + (f"  ({s.note})" if s.note else ""),
            file=out,
        )
    counts = Counter(s.state for s in states)
    print(", ".join(f"{counts[k]} {k}" for k in ("complete", "evaluate", "resume", "new") if counts[k]), file=out)


def dry_run(command: list[str], todo: list[Job], result: dict[str, Any], out) -> dict[str, Any]:
    """``dry_run=true``: the multirun command and the launcher's settings printed (and added to ``result``)."""
    print("dry run: nothing is run", file=out)
    if todo:
        print("command: " + format_command(command), file=out)
        result["launcher"] = launcher_settings(command)
        print("launcher: " + json.dumps(result["launcher"], default=str), file=out)
    return result


def run_jobs(
    cfg: DictConfig, command: list[str], todo: list[Job], jobs: list[Job], settings: JobSettings, result: dict, out
) -> None:
    """Run the ``todo`` jobs as one multirun (SLURM asked first, the corpora checked first when ``cfg.prepare``); the
    exit status in ``result["returncode"]``, the jobs another sweep holds in ``result["skipped"]``."""
    if cfg.launcher == "slurm":  # SLURM is here and takes the request, before any corpus or job
        answer = slurm_check()(launcher_settings(command))
        print(f"SLURM takes the request: {answer}", file=out, flush=True)
    if cfg.prepare:
        for line in check_corpora(todo, settings):
            print(f"corpus ready: {line}", file=out)
    print(f"running {len(todo)} jobs: {format_command(command)}", file=out, flush=True)
    result["returncode"] = subprocess.run(command, check=False).returncode
    missing = [s.job.id for s in job_states(jobs, settings) if s.state != "complete"]  # cells judged whole
    held = {job: holder for job in missing if (holder := lock_holder(settings.runs_dir, job))}
    result["skipped"] = held
    for job, holder in held.items():
        print(f"skipped {job}: being run by {holder} (another sweep)", file=out)
    if result["returncode"] != 0 or len(held) < len(missing):
        print(
            f"the multirun exited with {result['returncode']}; jobs without a record: "
            f"{[job for job in missing if job not in held]}. Run the same command again to resume them.",
            file=out,
        )


@hydra_main("reproduce")
def main(cfg: DictConfig) -> None:
    with reported():
        result = reproduce(cfg)
    if result["returncode"]:
        sys.exit(result["returncode"])
