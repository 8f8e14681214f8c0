"""``sarnmt calibrate [cells=N] [resamples=R] [sentences=S] [seed=K] [runs=[3v3,5v5]] [real_cells=M]
[regimes=[synthetic,real]] [records=DIR]``: the seed-aware tests' error rates under a true null, simulated
(:func:`sarnmt.sweep.calibration.calibrate`), printed as Markdown: docs/reproducing.md's calibration table."""

from __future__ import annotations

from pathlib import Path

from hydra.utils import to_absolute_path
from omegaconf import DictConfig

from sarnmt.errors import reported
from sarnmt.sweep.calibration import calibrate
from sarnmt.sweep.null_regimes import RECORDS
from sarnmt.utils.compose import hydra_main


@hydra_main("calibrate")
def main(cfg: DictConfig) -> None:
    with reported():
        records = Path(to_absolute_path(str(cfg.records))) if cfg.records is not None else RECORDS
        table = calibrate(
            cfg.cells, cfg.resamples, cfg.sentences, cfg.seed, cfg.runs, cfg.real_cells, cfg.regimes, records
        )
        print(table, flush=True)
