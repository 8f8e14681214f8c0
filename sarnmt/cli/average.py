"""Average the weights of several checkpoints: ``python -m sarnmt average checkpoints=[a.ckpt,b.ckpt] output=avg.ckpt``
or ``python -m sarnmt average dir=outputs/train/<run>/checkpoints last=5 output=avg.ckpt``.

The output is a sarnmt checkpoint holding the element-wise mean of the model weights; what it holds, how the inputs
are read and checked, "last N" and how the output is written: :mod:`sarnmt.checkpoints.averaging`. This command
resolves the paths (relative to where it was run) and prints the output's path.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.utils import to_absolute_path
from omegaconf import DictConfig

from sarnmt.checkpoints.averaging import average_checkpoints, last_checkpoints
from sarnmt.checkpoints.stored_config import run_trust
from sarnmt.errors import InputError, reported
from sarnmt.utils.compose import hydra_main

log = logging.getLogger("sarnmt")


def average(cfg: DictConfig) -> Path:
    """:returns: the output path."""
    output = Path(to_absolute_path(cfg.output))
    trust = run_trust(cfg)
    if cfg.checkpoints:
        if cfg.dir is not None:
            raise InputError("give either checkpoints=[...] or dir=... last=N, not both")
        paths = [Path(to_absolute_path(p)) for p in cfg.checkpoints]
    elif cfg.dir is not None:
        paths = last_checkpoints(to_absolute_path(cfg.dir), cfg.last, exclude=output, trust=trust)
    else:
        raise InputError("nothing to average: give checkpoints=[a.ckpt,b.ckpt,...] or dir=DIR last=N")
    average_checkpoints(paths, output, trust)
    log.info("averaged %d checkpoints into %s: %s", len(paths), output, ", ".join(p.name for p in paths))
    return output


@hydra_main("average")
def main(cfg: DictConfig) -> None:
    with reported():
        print(average(cfg), flush=True)
