"""One job of a table sweep: train (resuming when it can), evaluate the selected checkpoint the paper's way, write
the record last.

Folders (named from the job, never from the time):

- ``<runs_dir>/<job id>/``: the training run (checkpoints, logs), claimed for the job's config hash
  (:mod:`sarnmt.sweep.folders`: a folder of another hash is moved aside, never resumed). ``fit.json`` is written
  once training has ended (early stopping, or the step/epoch limit), so a job killed during evaluation does not
  train again.
- ``<results_dir>/records/<job id>.json`` (+ ``.sentences.json.gz``): the record; ``<results_dir>/hypotheses/<job
  id>/<test>.txt.gz`` and ``.tok.txt.gz``: the test translations (detokenised and tokenised).

Running a job again: a complete record with the current hash, written by this code (its source hash), means nothing
to do; otherwise training resumes from ``checkpoints/last.ckpt`` (written every few minutes, mid-epoch included; see
:mod:`sarnmt.training.resume`) or starts. A record of this config written by **other code** is run again on this code
(its run folder, when other code started it, is moved aside as ``<job id>.other-code-<source hash>``), so that a
cell's seeds are one code, unless ``allow_mixed_code=true`` keeps it. Which such jobs a sweep runs again is decided per
cell by :func:`sarnmt.sweep.launch.job_states`.

**The selected checkpoint** is the best by the validation rule of the scale (``validation=cost``: the lowest dev
cost, dl4mt's rule; ``validation=bleu``: the highest greedy dev BLEU). It is decoded with beam search (beam 5, scores
divided by the length with EOS: dl4mt's ``translate.py -n``) on every test set of the job's language pair and
scored with sacrebleu: ``bleu_tok`` / ``bleu_tok_lc`` (multi-bleu on tokenised text, cased / lowercased), ``bleu``
(NIST mteval-v13a style on detokenised text) and ``chrf``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from sarnmt.checkpoints.reading import load_model, saved_progress
from sarnmt.checkpoints.stored_config import run_trust
from sarnmt.decoding.split_translation import translate_split
from sarnmt.lm.run import train_lm
from sarnmt.sweep import stats as sentence_stats
from sarnmt.sweep.code import check_clean, code_identity
from sarnmt.sweep.folders import FolderInUse, clear_stale_run_lock, job_lock, now, take_folder
from sarnmt.sweep.lm_job import finish_lm_job
from sarnmt.sweep.plan import Job
from sarnmt.sweep.publish import publish_record
from sarnmt.sweep.records import (
    config_hash,
    read_record,
    write_json,
    write_lines_gz,
)
from sarnmt.training.run import train
from sarnmt.utils import json_bounds
from sarnmt.utils.compose import compose
from sarnmt.utils.device import pick_device
from sarnmt.utils.instantiate import instantiate_dict
from sarnmt.utils.runtime import finish_wandb

log = logging.getLogger("sarnmt")


@dataclass(frozen=True)
class JobSettings:
    """Where a job writes and how it logs.

    :param runs_dir: training runs, one folder per job (checkpoints: keep out of git).
    :param results_dir: records and hypotheses (small text files: publishable).
    :param logger: a ``logger=`` option of the train config (``csv``, ``wandb``, ...).
    :param eval_batch_size: sentences per beam-search batch.
    :param device: decoding device (``auto``: CUDA when available).
    :param allow_dirty: run from a checkout with uncommitted changes to the code (the record says so).
    :param allow_mixed_code: take a record of this config written by other code as complete (never on by default).
    """

    runs_dir: Path
    results_dir: Path
    logger: str = "csv"
    eval_batch_size: int = 64
    device: str = "auto"
    progress: bool = True
    allow_dirty: bool = False
    allow_mixed_code: bool = False

    def record_path(self, job: Job) -> Path:
        return self.results_dir / "records" / f"{job.id}.json"


def wandb_overrides(job: Job, settings: JobSettings, digest: str) -> list[str]:
    """One W&B run per job: group (the tables it serves and the scale, e.g. ``table1+4-mini``), job type, tags, and
    an id from the cell and its config hash, so that a resumed job continues its run and a changed config starts
    another."""
    group = f"table{'+'.join(str(t) for t in job.tables)}-{job.scale}" if job.tables else job.scale
    tags = [job.scale, job.pair, job.row, f"seed{job.seed}", *(f"table{t}" for t in job.tables)]
    run_id = f"{job.scale}-{job.pair}-{job.row}-s{job.seed}-{digest[:8]}".replace("_", "-")
    return [
        f"logger.wandb.group={group}",
        "logger.wandb.job_type=train",
        f"logger.wandb.tags=[{','.join(tags)}]",
        f"logger.wandb.name={job.id}",
        f"logger.wandb.id={run_id}",
        "logger.wandb.resume=allow",
    ]


def job_config(job: Job, settings: JobSettings) -> tuple[DictConfig, str]:
    """The job's resolved train config and its config hash."""
    folder = (settings.runs_dir / job.id).resolve()
    base = [*job.train, f"paths.output_dir={folder}", "test=false", f"logger={settings.logger}"]
    name = RUNNERS[job.task].config
    cfg = compose(name, base)
    digest = config_hash(cfg, job.tests)
    if settings.logger in ("wandb", "many"):
        cfg = compose(name, [*base, *wandb_overrides(job, settings, digest)])
    return cfg, digest


def run_job(job: Job, settings: JobSettings) -> dict[str, Any] | None:
    """Run (or skip, or resume) one job, holding its lock (:func:`sarnmt.sweep.folders.job_lock`).

    :returns: its record (None on a DDP rank other than 0, and when another process runs the job now).
    """
    cfg, digest = job_config(job, settings)
    code = {**code_identity(), "allow_dirty": settings.allow_dirty}
    source = None if settings.allow_mixed_code else code["source_hash"]
    status = read_record(settings.record_path(job), digest, source)
    if status.state == "complete":
        log.info("%s: complete record %s, skipped", job.id, status.path)
        return status.record
    check_clean(code, settings.allow_dirty, job.id)
    try:
        with job_lock(settings.runs_dir, job.id) as exclusive:
            status = read_record(settings.record_path(job), digest, source)  # finished by another sweep meanwhile?
            if status.state == "complete":
                log.info("%s: complete record %s, skipped", job.id, status.path)
                return status.record
            if status.state in ("broken", "stale", "other_code"):
                log.warning("%s; job %s runs again", status.reason, job.id)
            return _run(job, settings, cfg, digest, code, exclusive, replace=status.state == "other_code")
    except FolderInUse as busy:
        log.warning("%s", busy)
        return None


def _run(
    job: Job,
    settings: JobSettings,
    cfg: DictConfig,
    digest: str,
    code: dict[str, Any],
    exclusive: bool,
    replace: bool = False,
) -> dict[str, Any] | None:
    """``replace``: the job runs again because its record came from other code; a run folder that other code
    started is then moved aside rather than refused."""
    folder = settings.runs_dir / job.id
    take_folder(folder, job.id, digest, code, replace_other_code=replace)
    if exclusive:
        clear_stale_run_lock(folder)
    fit_path = folder / "fit.json"
    runner = RUNNERS[job.task]
    if fit_path.is_file():
        log.info("%s: training had ended (%s); evaluating", job.id, fit_path)
        with finish_wandb():
            return runner.finish(
                job, cfg, digest, json_bounds.load_file(fit_path), instantiate_dict(cfg.logger), settings, code
            )
    last = folder / "checkpoints" / "last.ckpt"
    if last.is_file():
        log.info("%s: resuming from %s", job.id, last)
        with open_dict(cfg):
            cfg.ckpt_path = str(last)
    outcome: dict[str, Any] = {}

    def after(trainer: L.Trainer, result: dict[str, Any]) -> dict[str, Any]:
        if not trainer.is_global_zero:
            return {}
        fit = fit_summary(trainer, result, last)
        write_json(fit_path, fit)
        outcome["record"] = runner.finish(job, cfg, digest, fit, trainer.loggers, settings, code)
        return {}

    runner.train(cfg, after=after)
    return outcome.get("record")


def fit_summary(trainer: L.Trainer, result: dict[str, Any], last: Path) -> dict[str, Any]:
    """What training ended with: the selected checkpoint, steps, epochs, time."""
    callback = trainer.checkpoint_callback
    best = callback.best_model_path if callback is not None else ""
    steps, epochs = trainer.global_step, trainer.current_epoch
    if (steps == 0 or not best) and last.is_file():  # ddp_spawn leaves the parent's trainer at step 0
        steps, epochs = saved_progress(last)
    if not best:
        log.warning("no validation selected a checkpoint; evaluating the last one, %s", last)
        best = str(last)
    score = callback.best_model_score if callback is not None else None
    return {
        "best_model_path": str(Path(best).resolve()),
        "monitor": getattr(callback, "monitor", None),
        "best_model_score": None if score is None else float(score),
        "steps": int(steps),
        "epochs": int(epochs),
        "train_seconds": round(float(result.get("train_seconds", 0.0)), 1),
        "parameters": result["parameters"],
        "stopped_early": bool(getattr(trainer, "should_stop", False)),
        "ended": now(),
    }


def finish_job(
    job: Job,
    cfg: DictConfig,
    digest: str,
    fit: dict[str, Any],
    loggers: list,
    settings: JobSettings,
    code: dict[str, Any],
) -> dict[str, Any]:
    """Decode every test set with the selected checkpoint, score it, write hypotheses and statistics, log the
    scores, and write the record (last). ``code``: the code that ran (:func:`sarnmt.sweep.code.code_identity`)."""
    start = time.perf_counter()
    device = pick_device(settings.device)
    loaded = load_model(fit["best_model_path"], device, trust=run_trust(cfg))  # its own checkpoint: what cfg names
    datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("test")
    search = instantiate(cfg.decoding)
    hyp_dir = settings.results_dir / "hypotheses" / job.id
    tests, stats = {}, {}
    for name, split in job.tests.items():
        output = translate_split(
            loaded.net,
            loaded.src_codec or datamodule.src_codec,
            loaded.tgt_codec or datamodule.tgt_codec,
            datamodule.sources(split),
            datamodule.references(split),
            search,
            settings.eval_batch_size,
            device,
            progress=settings.progress,
            desc=f"{job.id} {name}",
            bleu_tokenize=datamodule.bleu_tokenize,
        )
        plain, tokenized = hyp_dir / f"{name}.txt.gz", hyp_dir / f"{name}.tok.txt.gz"
        write_lines_gz(plain, output.plain)
        write_lines_gz(tokenized, output.tokenized)
        stats[name] = {
            metric: sentence_stats.sentence_statistics(
                output.plain if metric == "bleu" else output.tokenized,
                output.references if metric == "bleu" else output.references_tokenized,
                metric,
                tokenize=output.bleu_tokenize if metric == "bleu" else None,
            )
            for metric in sentence_stats.METRIC_SETTINGS
        }
        tests[name] = {
            "split": split,
            "sentences": len(output.plain),
            "decoding_seconds": round(output.seconds, 1),
            "scores": {k: v.as_dict() for k, v in output.scores().items()},
            "hypotheses": str(plain.relative_to(settings.results_dir)),
            "hypotheses_tokenized": str(tokenized.relative_to(settings.results_dir)),
        }
    evaluate_seconds = round(time.perf_counter() - start, 1)
    extra = {"decoding": search.settings()}
    path = settings.record_path(job)
    return publish_record(
        job, cfg, digest, fit, loggers, path, datamodule.name, tests, stats, evaluate_seconds, extra, code
    )


@dataclass(frozen=True)
class Runner:
    """What a task's jobs compose (``sarnmt/conf/<config>.yaml``), how they train, and how they are evaluated."""

    config: str
    train: Callable[..., dict[str, Any]]
    finish: Callable[..., dict[str, Any]]


RUNNERS = {
    "translation": Runner("train", train, finish_job),
    "lm": Runner("lm", train_lm, finish_lm_job),
}
