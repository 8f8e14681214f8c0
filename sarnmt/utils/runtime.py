"""Run-time helpers: W&B always finished, log noise tamed."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("sarnmt")


def quiet_known_warnings() -> None:
    """Silence warnings that are noise for users (Lightning's LeafSpec FutureWarning under torch >= 2.13, the
    "does not have many workers" hint on 2-core machines, sacrebleu's tokenised-input hint, Lightning's "srun is
    available but not used" on any machine with SLURM's client, where a run outside a job is meant to be one)."""
    warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message="The `srun` command is available on your system but is not used.*")
    warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
    # sarnmt's DataModule does resume mid-epoch (it keeps the epoch's position in checkpoints), which Lightning's
    # check for a stateful dataloader cannot see
    warnings.filterwarnings("ignore", message=".*resuming from a checkpoint that ended before the epoch ended.*")


@contextmanager
def finish_wandb() -> Iterator[None]:
    """Close the W&B run when the job ends, even on error, so that each multirun job is its own W&B run."""
    try:
        yield
    finally:
        if "wandb" in sys.modules:
            import wandb

            if wandb.run is not None:
                wandb.finish()
