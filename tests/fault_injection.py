"""Fault injection for the fault tests (``make faults``): a training run that kills itself, signals itself or meets a
NaN at a chosen update, so the tests can interrupt it at exact points. It lives with the tests, not in the package: a
test adds it to a run's callbacks with :func:`inject`'s overrides (``+callbacks.faults._target_=...``), which the
run instantiates as it does every callback, so nothing in ``sarnmt`` knows of it. A run started in another process
imports it as ``tests.fault_injection``: from the checkout's root (the fault tests run their commands there).

Steps count updates: "at step k" means after k updates, when update k + 1 is about to start.

- ``kill_at_step``: SIGKILL the process itself (nothing is saved, as when the machine dies). With ``k`` a multiple
  of the resume checkpoint's interval, the kill comes right after a checkpoint.
- ``signal_at_step`` with ``signal_name``: send the process that signal (e.g. SIGTERM, SIGUSR2) as update k + 1
  starts, as a scheduler would in the middle of a step.
- ``signal_in_validation_after_step``: send it at the first validation batch after update k instead.
- ``nan_at_steps``: the gradients of update k + 1 become NaN, for every k listed (a diverged batch).
- ``pause_at_step`` with ``pause_s``: wait (asleep) up to that many seconds before update k + 1, until a preemption
  signal arrives (:mod:`sarnmt.training.preemption`): a run that a scheduler's signal reaches at a known update,
  whenever the scheduler sends it (the SLURM tests requeue, preempt and time out jobs held there). Nothing it computes
  changes.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from sarnmt.training.preemption import Preemption

PREFIX = "+callbacks.faults"  # the run's callbacks get one more entry; every override that sets it starts so


def inject(**settings: Any) -> list[str]:
    """The overrides that add a :class:`FaultInjection` with ``settings`` to a training run's callbacks, e.g.
    ``inject(kill_at_step=4)`` or ``inject(nan_at_steps=[7, 8, 9])``; ``inject()``: injected, every fault off."""
    overrides = [f"{PREFIX}._target_={__name__}.{FaultInjection.__name__}"]
    for key, value in settings.items():
        shown = "[" + ",".join(map(str, value)) + "]" if isinstance(value, list | tuple) else value
        overrides.append(f"{PREFIX}.{key}={shown}")
    return overrides


class FaultInjection(Callback):
    """See the module docstring for the parameters; all are off (None, empty) by default."""

    def __init__(
        self,
        kill_at_step: int | None = None,
        signal_at_step: int | None = None,
        signal_in_validation_after_step: int | None = None,
        signal_name: str = "SIGTERM",
        nan_at_steps: Sequence[int] = (),
        pause_at_step: int | None = None,
        pause_s: float = 0.0,
    ) -> None:
        self.kill_at_step = kill_at_step
        self.signal_at_step = signal_at_step
        self.signal_in_validation_after_step = signal_in_validation_after_step
        self.signal = signal.Signals[signal_name]
        self.nan_at_steps = set(nan_at_steps)
        self.pause_at_step = pause_at_step
        self.pause_s = float(pause_s)
        self._signalled = False

    def _send(self) -> None:
        if not self._signalled:
            self._signalled = True
            os.kill(os.getpid(), self.signal)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, index: int) -> None:
        if trainer.global_step == self.kill_at_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if trainer.global_step == self.signal_at_step:
            self._send()
        if trainer.global_step == self.pause_at_step:
            self._pause(trainer)

    def _pause(self, trainer: L.Trainer) -> None:
        watched = [c for c in trainer.callbacks if isinstance(c, Preemption)]
        print(f"faults: pausing before update {trainer.global_step + 1} for up to {self.pause_s:.0f} s", flush=True)
        deadline = time.monotonic() + self.pause_s
        while time.monotonic() < deadline and not any(c.received is not None for c in watched):
            time.sleep(0.05)

    def on_validation_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        step = self.signal_in_validation_after_step
        if trainer.state.fn == "fit" and step is not None and trainer.global_step >= step:
            self._send()

    def on_after_backward(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step in self.nan_at_steps:
            with torch.no_grad():
                next(p for p in pl_module.parameters() if p.grad is not None).grad.fill_(float("nan"))
