"""Fetch, preprocess and cache a corpus: ``python -m sarnmt prepare data=<corpus> [data.root=...]``.

The thin command-line entry point over :mod:`sarnmt.data.corpora.preparation`, which does the work
(:func:`~sarnmt.data.corpora.preparation.prepare_corpus`): this module builds the configured DataModule, calls its
``prepare()`` and prints the report. :func:`prepare` is a pure function of the composed config (tests call it
directly); :func:`main` is the Hydra entry. A second run finds the cache and does no work. ``train`` runs the same
code (``prepare_data``).
"""

from __future__ import annotations

import logging
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from sarnmt.errors import InputError, reported
from sarnmt.utils.compose import hydra_main

log = logging.getLogger("sarnmt")


def prepare(cfg: DictConfig) -> dict[str, Any]:
    """Prepare ``cfg.data`` (a DataModule with a ``prepare()`` method). :returns: its report."""
    datamodule = instantiate(cfg.data)
    if not hasattr(datamodule, "prepare"):
        raise InputError(f"data={type(datamodule).__name__} has nothing to prepare (use a corpus such as mini_es_en)")
    return datamodule.prepare()


def format_report(report: dict[str, Any]) -> str:
    """The lines printed at the end of ``prepare``."""
    lines = [
        f"corpus {report['corpus']}: {'cache found, nothing to do' if report['cached'] else 'prepared'} "
        f"in {report['seconds']} s -> {report['cache']}"
    ]
    if report["downloaded"]:
        lines.append(f"downloaded: {', '.join(report['downloaded'])}")
    for split, info in report["splits"].items():
        lines.append(f"  {split:<16} {info['pairs']:>9} pairs  ({info['origin']})")
    f = report["train_filter"]
    lines.append(
        f"train: kept {f['kept']} of {f['total']} pairs; filtered {f['empty']} with an empty side and "
        f"{f['too_long']} with a side of >= {f['max_len']} subwords"
    )
    lines.append(f"vocabulary: src {report['vocab']['src']}, tgt {report['vocab']['tgt']}")
    return "\n".join(lines)


@hydra_main("prepare")
def main(cfg: DictConfig) -> None:
    with reported():
        print(format_report(prepare(cfg)), flush=True)
