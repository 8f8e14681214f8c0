"""Non-finite updates: a batch whose loss or gradients are NaN or infinite is skipped, counted and reported; too many
in a row stop the run.

:class:`NonFiniteGuard` (``callbacks.nonfinite``) looks at the gradients after the backward pass and before
clipping and the optimizer step (a NaN or infinite loss gives non-finite gradients too). When their norm is not
finite, every gradient is dropped, so the optimizer leaves the weights and its own state as they were (the update is
counted by Lightning's step counter all the same, so a resumed run stays in step), the skip is counted
(``train/skipped_updates``, kept in checkpoints) and logged with the batch's sentence ids: the 0-based line numbers of
its pairs in the training split. ``max_consecutive`` skipped updates in a row stop the run with
:class:`~sarnmt.errors.TrainingStopped`, naming the updates and the last checkpoint, which holds the weights of the
last good update (skipped updates change nothing; no checkpoint is written on this stop). The check costs one norm
over all gradients per update (a device sync, no copy).
"""

from __future__ import annotations

import logging
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from sarnmt.errors import TrainingStopped

log = logging.getLogger("sarnmt")
SHOWN_IDS = 20  # sentence ids listed per skipped batch


def gradients_finite(optimizer: torch.optim.Optimizer) -> bool:
    """Whether every gradient of ``optimizer``'s parameters is finite (one norm over all of them)."""
    grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    if not grads:
        return True
    norms = torch.stack([torch.linalg.vector_norm(g.detach(), dtype=torch.float32) for g in grads])
    return bool(torch.isfinite(torch.linalg.vector_norm(norms)))


class NonFiniteGuard(Callback):
    """:param max_consecutive: this many skipped updates in a row stop the run (K >= 1; trusted: a run's
    ``callbacks.nonfinite.max_consecutive`` is checked where it enters,
    :func:`~sarnmt.training.settings.check_training`)."""

    def __init__(self, max_consecutive: int = 5) -> None:
        assert max_consecutive >= 1, "callbacks.nonfinite.max_consecutive reached the guard unchecked (check_training)"
        self.max_consecutive = max_consecutive
        self.skipped = 0  # in the whole run, resumed runs included
        self.consecutive = 0
        self._ids: list[int] = []

    def state_dict(self) -> dict[str, int]:
        return {"skipped": self.skipped, "consecutive": self.consecutive}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        self.skipped, self.consecutive = int(state_dict["skipped"]), int(state_dict["consecutive"])

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, index: int) -> None:
        ids = getattr(batch, "ids", None)
        self._ids = ids.tolist() if ids is not None else []

    def on_before_optimizer_step(
        self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        if gradients_finite(optimizer):
            self.consecutive = 0
            return
        for group in optimizer.param_groups:
            for param in group["params"]:
                param.grad = None  # the optimizer skips parameters without a gradient: weights and state unchanged
        update = trainer.global_step + 1
        self.skipped += 1
        self.consecutive += 1
        shown = ", ".join(map(str, self._ids[:SHOWN_IDS])) + (", ..." if len(self._ids) > SHOWN_IDS else "")
        log.warning(
            "update %d skipped: non-finite loss or gradients; its batch holds %d training pairs, line "
            "numbers (0-based) in the training split: %s",
            update,
            len(self._ids),
            shown,
        )
        pl_module.log("train/skipped_updates", float(self.skipped), reduce_fx="max")
        if self.consecutive >= self.max_consecutive:
            last = _last_checkpoint(trainer)
            raise TrainingStopped(
                f"{self.consecutive} updates in a row had non-finite loss or gradients (updates "
                f"{update - self.consecutive + 1}-{update}, skipped, so the weights are still those after update "
                f"{update - self.consecutive}, as in the last checkpoint, {last}). Lower the learning rate "
                f"(optim.lr) or look at the batches logged above, then resume with ckpt_path={last}"
            )


def _last_checkpoint(trainer: L.Trainer) -> str:
    """The newest checkpoint this run wrote or resumed from."""
    paths = [getattr(cb, "last_model_path", "") for cb in trainer.checkpoint_callbacks]
    found = [p for p in paths if p]
    return found[0] if found else (trainer.ckpt_path or "(none written yet)")
