"""``sarnmt sweep-systems [results_dir=DIR]``: the table of every system of a seeds sweep
(:func:`sarnmt.sweep.systems.systems_table`), printed as Markdown."""

from __future__ import annotations

from pathlib import Path

from hydra.utils import to_absolute_path
from omegaconf import DictConfig

from sarnmt.errors import reported
from sarnmt.sweep.systems import systems_table
from sarnmt.utils.compose import hydra_main


@hydra_main("sweep_systems")
def main(cfg: DictConfig) -> None:
    with reported():
        print(systems_table(Path(to_absolute_path(cfg.results_dir))), flush=True)
