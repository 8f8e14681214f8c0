"""Preemption: a run told to stop (SIGTERM, or the signal a cluster sends before it ends a job) saves ``last.ckpt`` at
the next step boundary and exits with a status that says so, ready to be resumed.

Schedulers warn before they kill: SLURM sends ``--signal`` (submitit's launcher asks for SIGUSR2, ``signal_delay_s``
before the end, see ``sarnmt/conf/hydra/launcher/slurm.yaml``) and then SIGTERM; Kubernetes and preemptible VMs send
SIGTERM.
:class:`Preemption` (``callbacks.preemption``) catches the signals it is given while the model trains. Its handler
only notes the signal; after the update in progress (and the validation that follows it, if one is due, which is
never cut short) the run stops through Lightning's own SIGTERM path (``Trainer.received_sigterm`` →
``SIGTERMException`` at the end of the step), and the checkpoint is written then, so it holds exactly the state
after that update and a resumed run continues as if nothing happened (``tests/test_faults_resume.py``). Under DDP the
ranks agree at every step boundary whether any of them was signalled, so they all stop after the same update.

:func:`sarnmt.training.run.train` then raises :class:`~sarnmt.errors.TrainingStopped`, and the command exits with status
128 + the signal's number (143 for SIGTERM, 140 for SIGUSR2), as a process ended by the signal would: schedulers and
wrappers read it as "preempted, requeue", not "failed". When a handler was installed for the signal before training
(submitit's, which requeues the SLURM job), it is called after the checkpoint is written. A requeued table-sweep job
resumes from ``last.ckpt`` by itself; a ``train`` command resumes with ``ckpt_path=<run>/checkpoints/last.ckpt``.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities.exceptions import SIGTERMException

from sarnmt.errors import InputError, TrainingStopped

log = logging.getLogger("sarnmt")


class Preemption(Callback):
    """:param dirpath: the run's checkpoint folder; the checkpoint written on a signal is ``<dirpath>/last.ckpt``.
    :param signals: the signals that mean "stop now and resume later" (names such as ``SIGTERM``, ``SIGUSR2``)."""

    def __init__(self, dirpath: str, signals: Sequence[str] = ("SIGTERM", "SIGUSR1", "SIGUSR2")) -> None:
        try:
            self.signals = [signal.Signals[name] for name in signals]
        except KeyError as err:
            raise InputError(
                f"callbacks.preemption.signals: unknown signal {err.args[0]!r} (e.g. SIGTERM, SIGUSR2)"
            ) from err
        self.path = Path(dirpath) / "last.ckpt"
        self.received: signal.Signals | None = None
        self.saved_at: int | None = None  # the update the checkpoint was written after
        self._armed = False
        self._at_epoch_end = False  # the stop comes after the epoch's last update: at the epoch's end, its hooks done
        self._previous: dict[signal.Signals, Any] = {}

    # --- the handler only notes the signal: nothing else is safe in the middle of a step ---
    def _note(self, signum: int, frame: Any) -> None:
        if self.received is None:
            self.received = signal.Signals(signum)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread only
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._note)  # after Lightning installed its own

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

    # --- at the step boundary: every rank learns whether any was signalled, then Lightning's path stops the run ---
    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if not self._armed and trainer.strategy.reduce_boolean_decision(self.received is not None, all=False):
            self._armed = True
            self.received = self.received or signal.SIGTERM  # a rank that was not signalled itself
            log.warning(
                "received %s: stopping after update %d (and its validation, if one is due), with a checkpoint",
                self.received.name,
                trainer.global_step,
            )
            self._at_epoch_end = trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
            _stop_flag(trainer, not self._at_epoch_end)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._armed:
            _stop_flag(trainer, False)  # Lightning would cut the validation short: let it finish

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._armed and not self._at_epoch_end:
            _stop_flag(trainer, True)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._armed and self._at_epoch_end:  # the state of an end-of-epoch checkpoint; Lightning stops next
            self._save(trainer)
            _stop_flag(trainer, True)

    def _save(self, trainer: L.Trainer) -> None:
        trainer.save_checkpoint(self.path)  # the state right after the update: what a resumed run starts from
        self.saved_at = trainer.global_step

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restore()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._restore()
        if isinstance(exception, SIGTERMException) and self._armed and self.saved_at is None:
            self._save(trainer)

    def stopped(self) -> TrainingStopped:
        """What :func:`sarnmt.training.run.train` raises after a stop on a signal; first calls the signal's handler from
        before training, if there was one (submitit's requeues the job)."""
        handler: Callable | None = None
        if self.received is not None and self.received != signal.SIGTERM:
            previous = signal.getsignal(self.received)
            handler = previous if callable(previous) else None
        name = self.received.name if self.received is not None else "a signal"
        message = (
            f"{name} received: stopped after update {self.saved_at}, checkpoint {self.path}; resume with "
            f"ckpt_path={self.path}"
        )
        log.warning(message)
        if handler is not None:
            handler(int(self.received), None)
        return TrainingStopped(message, status=128 + int(self.received or signal.SIGTERM))


def _stop_flag(trainer: L.Trainer, value: bool) -> None:
    """Lightning's SIGTERM flag (``Trainer.received_sigterm``): its loops raise ``SIGTERMException`` at the end of
    the step when it is set, and cut a validation short."""
    trainer._signal_connector.received_sigterm = value
