"""Score existing system outputs: ``python -m sarnmt score ref=REF hyps=[BASE,SYS1,...] [tokenize=none]
[lowercase=true]``.

The first system is the baseline. Prints a Markdown table with BLEU, its 95% confidence interval and three
p-values against the baseline (see :mod:`sarnmt.evaluation.significance`). :func:`score` is a pure function of
the config; :func:`main` is the Hydra entry point.

Files are read strictly (:mod:`sarnmt.data.text.reading`: lines end at ``\\n`` only, CRLF read as LF, empty lines kept
as empty lines, non-UTF-8 bytes refused naming the file and line); a hypothesis file whose line count differs from the
reference's, an empty reference and a folder given as a file are refused with one line naming them. Resample counts
(``n_bootstrap``, ``n_randomization``) are 1 to 1,000,000 (:data:`sarnmt.evaluation.significance.MAX_RESAMPLES`),
resampled in bounded memory; the signature gives the counts used. ``output=`` is checked before scoring, and its
``.md`` and ``.json`` are written together (:func:`sarnmt.utils.atomic.atomic_files`).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from hydra.utils import to_absolute_path
from omegaconf import DictConfig, OmegaConf

from sarnmt.data.text.reading import MAX_SCORED_BYTES, read_lines
from sarnmt.errors import InputError, reported
from sarnmt.evaluation.bleu import check_parallel, check_tokenize
from sarnmt.evaluation.significance import SystemResult, check_samples, compare_systems, markdown_table
from sarnmt.evaluation.system_names import system_names
from sarnmt.utils.atomic import atomic_files, check_output
from sarnmt.utils.compose import hydra_main


def _path(path: str) -> str:
    from hydra.core.hydra_config import HydraConfig

    return to_absolute_path(path) if HydraConfig.initialized() else path


def score(cfg: DictConfig) -> dict[str, Any]:
    """:returns: ``{"table": markdown, "signature": ..., "systems": [row dicts]}``."""
    out = check_settings(cfg)
    hyp_paths = list(cfg.hyps) if not isinstance(cfg.hyps, str) else [cfg.hyps]
    if not hyp_paths:
        raise InputError("hyps is empty: give hyps=[baseline.txt,system.txt,...]")
    names = list(cfg.names) if cfg.names is not None else system_names(hyp_paths)
    if len(names) != len(hyp_paths):
        raise InputError(f"names has {len(names)} entries but hyps has {len(hyp_paths)}")
    twice = sorted({str(name) for name in names if names.count(name) > 1})
    if twice:
        raise InputError(f"names: {twice[0]!r} names two systems; each row of the table needs its own name")
    refs = read_lines(_path(cfg.ref), MAX_SCORED_BYTES)
    if not refs:
        raise InputError(f"reference {cfg.ref} is empty: there is nothing to score")
    systems = []
    for path in hyp_paths:
        hyps = read_lines(_path(path), MAX_SCORED_BYTES)
        check_parallel(hyps, refs, path, cfg.ref)
        systems.append(hyps)
    settings = {key: cfg[key] for key in ("tokenize", "lowercase", "n_bootstrap", "n_randomization")}
    record = score_record(cfg, hyp_paths, *compare_systems(names, systems, refs, **settings))
    if out is not None:
        write_outputs(out, record)
    return record


def check_settings(cfg: DictConfig) -> Path | None:
    """The resample counts, the tokenizer and the output files (returned: their path without suffix, or None),
    checked before any file is read."""
    check_samples(cfg.n_bootstrap, cfg.n_randomization)
    check_tokenize(cfg.tokenize)
    out = Path(_path(cfg.output)) if cfg.output else None
    if out is not None:
        check_output(out.with_suffix(".md"), "output")
        check_output(out.with_suffix(".json"), "output")
    return out


def score_record(cfg: DictConfig, hyp_paths: list[str], results: list[SystemResult], signature: str) -> dict[str, Any]:
    """The record of the comparison: the files, the signature, the Markdown table, a row per system, the settings."""
    return {
        "ref": cfg.ref,
        "hyps": hyp_paths,
        "signature": signature,
        "table": markdown_table(results, signature),
        "systems": [vars(r) for r in results],
        "settings": OmegaConf.to_container(cfg, resolve=True),
    }


def write_outputs(out: Path, record: dict[str, Any]) -> None:
    """``out.md`` (the table) and ``out.json`` (the record), both or neither."""
    with atomic_files() as files:
        files.open(out.with_suffix(".md"), "w", "output").write(record["table"] + "\n")
        text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
        files.open(out.with_suffix(".json"), "w", "output").write(text)


@hydra_main("score")
def main(cfg: DictConfig) -> None:
    os.environ.setdefault("SACREBLEU_SEED", "12345")
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)  # its per-test progress lines
    with reported():
        print(score(cfg)["table"], flush=True)
