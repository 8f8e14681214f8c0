"""Run one job of a table sweep: ``python -m sarnmt sweep-job scale=mini job=en_de.baseline.s1``.

The multirun target of ``python -m sarnmt reproduce`` (a Hydra launcher runs one of these per job: one after another,
in parallel with joblib, or as SLURM jobs with submitit). :func:`sweep_job` is a pure function of the config; what a
job does is :func:`sarnmt.sweep.job.run_job`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import to_absolute_path
from omegaconf import DictConfig

from sarnmt.errors import check_range, reported
from sarnmt.sweep.job import JobSettings, run_job
from sarnmt.sweep.plan import job_from_id
from sarnmt.sweep.spec import load_scale
from sarnmt.utils.allocation import cpus_per_task
from sarnmt.utils.choices import group_choice
from sarnmt.utils.compose import hydra_main
from sarnmt.utils.threads import apply_threads

log = logging.getLogger("sarnmt")


def sweep_job(cfg: DictConfig) -> dict[str, Any] | None:
    """:returns: the job's record (None on DDP ranks other than 0).  :raises InputError: for ``eval_batch_size``
    below 1, before the job trains (its one check: the decoding batches trust it)."""
    check_range("eval_batch_size", cfg.eval_batch_size, 1, whole=True)
    extra = [str(o) for o in cfg.overrides]
    device = cfg.device
    # inside a SLURM job: the task's CPUs; OMP_NUM_THREADS too, else Lightning's DDP sets cores / processes
    apply_threads(cfg.cpu_threads or cpus_per_task(), "cpu_threads")
    if cfg.gpu_per_job:
        count = torch.cuda.device_count()
        if count == 0:
            raise ValueError("gpu_per_job=true but no CUDA device is visible")
        index = (HydraConfig.get().job.num if HydraConfig.initialized() else 0) % count
        extra, device = [*extra, f"trainer.devices=[{index}]"], f"cuda:{index}"
    job = job_from_id(load_scale(cfg.scale), cfg.job, tuple(extra))
    settings = JobSettings(
        runs_dir=Path(to_absolute_path(cfg.runs_dir)),
        results_dir=Path(to_absolute_path(cfg.results_dir)),
        logger=group_choice(cfg, "logger"),
        eval_batch_size=cfg.eval_batch_size,
        device=device,
        progress=cfg.progress,
        allow_dirty=bool(cfg.allow_dirty),
        allow_mixed_code=bool(cfg.allow_mixed_code),
    )
    return run_job(job, settings)


@hydra_main("sweep_job")
def main(cfg: DictConfig) -> None:
    with reported():
        record = sweep_job(cfg)
    if record is not None:
        scores = ", ".join(
            f"{t} {metric} {v['scores'][metric]['score']:.2f}"
            for t, v in record["tests"].items()
            for metric in ("bleu_tok", "ppl")
            if metric in v["scores"]
        )
        print(f"{record['job']}: {scores}", flush=True)
