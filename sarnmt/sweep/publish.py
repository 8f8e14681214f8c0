"""The last step of every job of a table sweep, translation or language model: its scores logged and its record
written, atomically and last (:mod:`sarnmt.sweep.records`).

A record holds the job's keys, the resolved config and its hash, the code that ran (commit, whether the checkout was
clean, the source hash: :mod:`sarnmt.sweep.code`), |Θ|, the hardware, wall time, steps and
epochs, the selected checkpoint, and per test set every score; the per-sentence (or per-line) statistics the
significance tests need go beside it, written first, so that a record exists only when everything it points at does.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sarnmt.sweep.folders import now
from sarnmt.sweep.plan import Job
from sarnmt.sweep.records import RECORD_VERSION, gzip_bytes, hardware, write_atomic, write_json

log = logging.getLogger("sarnmt")
SHOWN_METRICS = ("bleu_tok", "bleu", "ppl")  # the scores the log line names


def publish_record(
    job: Job,
    cfg: DictConfig,
    digest: str,
    fit: dict[str, Any],
    loggers: list,
    path: Path,
    data_name: str,
    tests: dict[str, dict[str, Any]],
    stats: dict[str, dict[str, list]],
    evaluate_seconds: float,
    extra: dict[str, Any],
    code: dict[str, Any],
) -> dict[str, Any]:
    """Log ``final/<test>/<metric>`` to the job's loggers, write the statistics and then the record to ``path``.

    :param fit: what training ended with (:func:`sarnmt.sweep.job.fit_summary`).
    :param tests: per test set, ``{"split", ..., "scores": {metric: {"score": float, ...}}}``.
    :param stats: per test set and metric, the per-item statistics (:mod:`sarnmt.sweep.stats`).
    :param extra: task-specific entries (the translation jobs' search settings), placed before ``tests``.
    :param code: ``{"commit", "dirty", "source_hash", "allow_dirty"}`` of the code that trained and evaluated.
    """
    final = {f"final/{t}/{m}": v["scores"][m]["score"] for t, v in tests.items() for m in v["scores"]}
    for logger in loggers:
        logger.log_metrics(final, step=fit["steps"])
        if hasattr(logger, "experiment") and hasattr(logger.experiment, "summary"):
            logger.experiment.summary.update(final)
    record = {
        "version": RECORD_VERSION,
        "job": job.id,
        "scale": job.scale,
        "pair": job.pair,
        "row": job.row,
        "seed": job.seed,
        "tables": list(job.tables),
        "config_hash": digest,
        "overrides": list(job.train),
        "data": data_name,
        "parameters": fit["parameters"],
        "commit": code["commit"],
        "dirty": code["dirty"],
        "source_hash": code["source_hash"],
        "allow_dirty": code["allow_dirty"],
        "hardware": hardware(),
        "steps": fit["steps"],
        "epochs": fit["epochs"],
        "stopped_early": fit["stopped_early"],
        "selected_checkpoint": {
            "file": Path(fit["best_model_path"]).name,
            "monitor": fit["monitor"],
            "score": fit["best_model_score"],
        },
        "wall_seconds": {
            "train": fit["train_seconds"],
            "evaluate": evaluate_seconds,
            "total": round(fit["train_seconds"] + evaluate_seconds, 1),
        },
        **extra,
        "tests": tests,
        "finished": now(),
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    sentences = path.with_name(f"{job.id}.sentences.json.gz")
    write_atomic(sentences, gzip_bytes(json.dumps(stats, separators=(",", ":")).encode()))
    write_json(path, record)  # last: a record exists only when everything it points at does
    shown = ", ".join(f"{k} {v:.2f}" for k, v in final.items() if k.rsplit("/", 1)[-1] in SHOWN_METRICS)
    log.info("%s: record %s (%s)", job.id, path, shown)
    return record
