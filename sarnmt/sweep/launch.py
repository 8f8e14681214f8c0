"""Planning and launching a sweep: which jobs a table needs, which are done, the corpora checked before any job
starts, and the Hydra multirun of :mod:`sarnmt.cli.sweep_job` (``sarnmt sweep-job``) that runs the rest with the
chosen launcher.

Launchers (``launcher=``):

- ``local``: Hydra's basic launcher, one job after another in one process;
- ``joblib``: ``hydra/launcher=joblib``, ``n_jobs`` jobs at once (default: one per visible GPU, job k on GPU
  k mod #GPUs; on a machine without GPUs, ``n_jobs`` CPU jobs with cores / ``n_jobs`` threads each);
- ``slurm``: submitit (:mod:`sarnmt.sweep.slurm`): one SLURM job per sweep job, named after its cell,
  ``trainer=slurm`` inside it (DDP over the SLURM tasks, no relaunch; GPUs or CPUs as allocated), requeued on
  preemption and time-outs. ``slurm.profile``: ``gpu`` (``sarnmt/conf/hydra/launcher/slurm.yaml``) or ``cpu``
  (``slurm_cpu.yaml``); ``slurm.partition``, ``slurm.cpus_per_task``, ... are plain overrides of its request
  (:data:`SLURM_SETTINGS`), ``slurm.setup_file`` a shell file sourced before each job starts.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf

from sarnmt.data.corpora.fetch import FetchError
from sarnmt.errors import UserError
from sarnmt.sweep.code import same_code, source_hash
from sarnmt.sweep.folders import folder_code, folder_hash
from sarnmt.sweep.job import JobSettings, job_config
from sarnmt.sweep.plan import Job
from sarnmt.sweep.records import read_record
from sarnmt.utils.compose import compose

LAUNCHERS = ("local", "joblib", "slurm")
SLURM_PROFILES = {"gpu": "slurm", "cpu": "slurm_cpu"}  # slurm.profile -> sarnmt/conf/hydra/launcher/<name>.yaml
# reproduce's plain slurm.<key> settings -> the launcher's (hydra.launcher.<key>); null keeps the profile's
SLURM_SETTINGS = {
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "time_min": "timeout_min",
    "nodes": "nodes",
    "tasks_per_node": "tasks_per_node",
    "gpus_per_node": "gpus_per_node",
    "cpus_per_task": "cpus_per_task",
    "mem_gb": "mem_gb",
    "max_requeues": "max_num_timeout",
    "signal_delay_s": "signal_delay_s",
}


class SweepError(UserError, RuntimeError):
    """A sweep that cannot start (a corpus missing, a bad launcher); the message says what to do."""


@dataclass
class JobState:
    """``state``: ``complete`` (skipped), ``evaluate`` (trained, not evaluated), ``resume`` (has a checkpoint),
    ``new``; ``note`` says why a record was not taken (stale, broken, other code) or why one of other code was."""

    job: Job
    digest: str
    state: str
    note: str = ""


def job_states(jobs: list[Job], settings: JobSettings) -> list[JobState]:
    """What each job needs, its seeds judged together: a cell (pair and row) must end up one code.

    A record of the job's config written by other code (another source hash, or none) is kept when nothing else of
    its cell runs now and the cell's records are one code; otherwise the job runs again on this code, since its cell
    would be mixed code (:mod:`sarnmt.sweep.cells`). ``allow_mixed_code`` keeps every such record.
    """
    source = source_hash()
    found = []
    for job in jobs:
        _, digest = job_config(job, settings)
        found.append((job, digest, read_record(settings.record_path(job), digest, source)))
    cells: dict[tuple[str, str], list] = {}
    for job, _, status in found:
        cells.setdefault((job.pair, job.row), []).append(status)
    states = []
    for job, digest, status in found:
        cell = cells[job.pair, job.row]
        note = status.reason if status.state in ("broken", "stale", "other_code") else ""
        if status.state == "other_code":
            codes = {s.record.get("source_hash") for s in cell if s.state in ("complete", "other_code")}
            runs_now = any(s.state not in ("complete", "other_code") for s in cell)
            if settings.allow_mixed_code or (len(codes) == 1 and not runs_now):
                why = "allow_mixed_code=true" if settings.allow_mixed_code else "its cell is one code"
                states.append(JobState(job, digest, "complete", f"{note}: kept, {why}"))
                continue
            note += ": runs again on this code, so that its cell is one code (allow_mixed_code=true keeps it)"
        folder = settings.runs_dir / job.id
        same_config = folder_hash(folder) == digest
        if same_config and status.state == "other_code":  # a folder other code started is moved aside
            same_config = same_code(folder_code(folder), {"source_hash": source})
        if status.state == "complete":
            state = "complete"
        elif same_config and (folder / "fit.json").is_file():
            state = "evaluate"
        elif same_config and (folder / "checkpoints" / "last.ckpt").is_file():
            state = "resume"
        else:
            state = "new"
        states.append(JobState(job, digest, state, note))
    return states


def check_corpora(jobs: list[Job], settings: JobSettings) -> list[str]:
    """Prepare (fetch, preprocess, cache) the corpus of every language pair the jobs need, before any job starts.

    :returns: one line per corpus. :raises SweepError: naming the pair and saying what to download and where.
    """
    lines, seen = [], set()
    for job in jobs:
        if job.pair in seen:
            continue
        seen.add(job.pair)
        cfg, _ = job_config(job, settings)
        name = cfg.data.get("corpus", cfg.data.get("_target_", "").rsplit(".", 1)[-1])
        try:
            datamodule = instantiate(cfg.data)
            datamodule.prepare_data()
        except (FetchError, FileNotFoundError, ValueError, OSError) as err:
            raise SweepError(
                f"language pair {job.pair} of scale {job.scale} needs corpus {name}, which is not available: {err}"
            ) from err
        report = getattr(datamodule, "report", None) or {}
        lines.append(f"{job.pair}: {name}" + (f" (cache {report['cache']})" if report.get("cache") else ""))
    return lines


def launcher_overrides(
    launcher: str, n_jobs: int | None, slurm: Mapping[str, Any] | None = None
) -> tuple[list[str], list[str]]:
    """``(Hydra overrides of the multirun, extra train overrides of every job)`` for a launcher; ``slurm``:
    reproduce's ``slurm`` settings (profile, request, setup)."""
    if launcher == "local":
        return ["hydra/launcher=basic"], []
    if launcher == "joblib":
        import torch

        gpus = torch.cuda.device_count()
        jobs = n_jobs or max(gpus, 1)
        args = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}", f"gpu_per_job={str(gpus > 0).lower()}"]
        if gpus == 0 and jobs > 1:  # CPU jobs side by side: share the cores instead of each taking all of them
            args.append(f"cpu_threads={max(1, (os.cpu_count() or 1) // jobs)}")
        return args, []
    if launcher == "slurm":
        return slurm_overrides(slurm or {}), ["trainer=slurm"]
    raise SweepError(f"unknown launcher {launcher!r}; valid launchers: {list(LAUNCHERS)}")


def slurm_overrides(slurm: Mapping[str, Any]) -> list[str]:
    """The multirun's ``hydra/launcher`` and ``hydra.launcher.*`` overrides for reproduce's ``slurm`` settings."""
    profile = slurm.get("profile") or "gpu"
    if profile not in SLURM_PROFILES:
        raise SweepError(f"unknown slurm.profile {profile!r}; valid profiles: {list(SLURM_PROFILES)}")
    args = [f"hydra/launcher={SLURM_PROFILES[profile]}"]
    for key, target in SLURM_SETTINGS.items():
        value = slurm.get(key)
        if value is None:
            continue
        if key in ("tasks_per_node", "nodes", "cpus_per_task") and int(value) < 1:
            raise SweepError(f"slurm.{key}={value}: a job needs at least 1")
        if key == "gpus_per_node" and profile == "gpu" and int(value) < 1:
            raise SweepError(
                f"slurm.gpus_per_node={value} with slurm.profile=gpu (one task per GPU): for jobs without GPUs use "
                "slurm.profile=cpu (its tasks per node: slurm.tasks_per_node)"
            )
        args.append(f"hydra.launcher.{target}={_quote(value) if isinstance(value, str) else value}")
    # the lines as written: ${HOME} in a line is the shell's, not an OmegaConf interpolation
    raw = OmegaConf.to_container(slurm, resolve=False) if OmegaConf.is_config(slurm) else slurm
    setup = [str(line) for line in raw.get("setup") or []]
    if slurm.get("setup_file"):
        path = Path(str(slurm["setup_file"])).expanduser().resolve()
        if not path.is_file():
            raise SweepError(f"slurm.setup_file={slurm['setup_file']}: no such file ({path})")
        setup.append(f"source {shlex.quote(str(path))}")
    if setup:
        args.append(f"hydra.launcher.setup=[{','.join(_quote(line) for line in setup)}]")
    return args


def _quote(value: str) -> str:
    """A Hydra quoted string holding ``value`` as it is: ``=``, ``,``, spaces, quotes, and ``${...}``, which stays a
    shell expansion instead of becoming an OmegaConf interpolation."""
    return "'" + value.replace("'", "\\'").replace("${", "\\${") + "'"


def _list(values: list[str]) -> str:
    """A Hydra list of quoted strings (an override such as ``trainer=gpu`` holds a ``=``)."""
    return "[" + ",".join("'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in values) + "]"


def multirun_command(
    jobs: list[Job],
    scale: str,
    settings: JobSettings,
    launcher: str,
    n_jobs: int | None = None,
    train_overrides: list[str] | None = None,
    hydra_overrides: list[str] | None = None,
    slurm: Mapping[str, Any] | None = None,
) -> list[str]:
    """The ``python -m sarnmt sweep-job --multirun ...`` command that runs ``jobs``."""
    hydra_args, extra_train = launcher_overrides(launcher, n_jobs, slurm)
    if not settings.progress:  # no progress bars in the jobs' logs either
        extra_train = [*extra_train, "trainer.enable_progress_bar=false", "callbacks.progress_bar=null"]
    return [
        sys.executable,
        "-m",
        "sarnmt",
        "sweep-job",
        "--multirun",
        f"scale={scale}",
        "job=" + ",".join(j.id for j in jobs),
        f"overrides={_list([*(train_overrides or []), *extra_train])}",
        f"logger={settings.logger}",
        f"runs_dir={settings.runs_dir}",
        f"results_dir={settings.results_dir}",
        f"eval_batch_size={settings.eval_batch_size}",
        f"progress={str(settings.progress).lower()}",
        f"allow_dirty={str(settings.allow_dirty).lower()}",
        f"allow_mixed_code={str(settings.allow_mixed_code).lower()}",
        *hydra_args,
        *(hydra_overrides or []),
    ]


def launcher_settings(command: list[str]) -> dict[str, Any]:
    """The launcher config the multirun would use (``hydra.launcher``), composed without running anything."""
    overrides = [a for a in command[command.index("--multirun") + 1 :] if not a.startswith("job=")]
    cfg = compose("sweep_job", [*overrides, "job=dry-run", "hydra.job.name=sweep_job"], return_hydra_config=True)
    return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)


def format_command(command: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in ["python", *command[1:]])
