"""A Lightning callback for sarnmt's runs in the quality comparison: one line on stdout per validation and one at the
end of fit, which the runner (:mod:`benchmarks.peers.quality.runner`) time-stamps as they arrive, as it does the
peers' own log lines. Added to a run by ``+callbacks.peers_clock._target_=benchmarks.peers.quality.clock.
ValidationClock``; it changes nothing in training."""

from __future__ import annotations

import json
import math
import sys

import lightning as L
from lightning.pytorch.callbacks import Callback

PREFIX = "PEERS-QUALITY "


def _value(metrics: dict, key: str) -> float | None:
    value = metrics.get(key)
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def emit(kind: str, **fields: object) -> None:
    sys.stdout.write(PREFIX + json.dumps({"kind": kind, **fields}) + "\n")
    sys.stdout.flush()


class ValidationClock(Callback):
    """Prints ``PEERS-QUALITY {"kind": "valid", "step": N, "dev_loss": x, "dev_bleu": y}`` after every validation
    (not the sanity check) and ``{"kind": "end", "step": N}`` when fit ends."""

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        metrics = trainer.callback_metrics
        emit(
            "valid",
            step=int(trainer.global_step),
            dev_loss=_value(metrics, "val/loss"),
            dev_bleu=_value(metrics, "val/bleu"),
        )

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            emit("end", step=int(trainer.global_step), stopped_early=bool(trainer.should_stop))
