"""What lets a training run be killed at any moment and resumed: checkpoints written atomically, and a resume
checkpoint (``last.ckpt``) written often, mid-epoch included.

- :class:`AtomicCheckpointIO` (the trainer's ``plugins``): every checkpoint is written to a temporary file beside its
  target and renamed over it, so a kill during a write leaves the previous file intact, never a truncated one.
- :class:`ResumeCheckpoint` (``callbacks.resume_checkpoint``): ``last.ckpt`` every ``train_time_interval`` or
  ``every_n_train_steps``, after every validation and at the end of every epoch. It is a ``ModelCheckpoint``, so
  Lightning runs it after the other checkpoint callbacks: the file holds the selected checkpoint's state (best score
  and path) as it stands after that validation.

Mid-epoch resumption also needs the training batches the epoch has not yet seen: the DataModule keeps that in the
checkpoint (:meth:`sarnmt.data.loading.translation.TranslationDataModule.state_dict`), and dropout masks are a function
of the seed and the step (:meth:`sarnmt.training.lit_module.TranslationModule.on_train_batch_start`), so a resumed run
trains on what the uninterrupted run would have.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import lightning as L
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint

from sarnmt.checkpoints.writing import write_checkpoint


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, writing as every sarnmt checkpoint is written
    (:func:`sarnmt.checkpoints.writing.write_checkpoint`): ``torch.save`` into ``.<name>.tmp-<pid>`` beside the
    target, flushed to disk, then ``os.replace``. A write the device refuses (a full disk) raises
    :class:`~sarnmt.errors.WriteError` naming the file and leaves the previous checkpoint as it was."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        write_checkpoint(checkpoint, path)


class ResumeCheckpoint(ModelCheckpoint):
    """``<dirpath>/last.ckpt`` at least every ``train_time_interval`` (or every ``every_n_train_steps`` steps), and
    after every validation and training epoch (not at the end of training). Keeps no other checkpoint.

    :param dirpath: the run's checkpoint folder.
    :param train_time_interval: a ``timedelta``, or None when ``every_n_train_steps`` is given.
    :param every_n_train_steps: a step interval, or None when ``train_time_interval`` is given.
    """

    def __init__(
        self,
        dirpath: str,
        train_time_interval: datetime.timedelta | None = None,
        every_n_train_steps: int | None = None,
    ) -> None:
        # exactly one, checked where it enters (sarnmt.training.settings.check_resume_interval)
        assert (train_time_interval is None) != (every_n_train_steps is None)
        super().__init__(
            dirpath=dirpath,
            save_top_k=0,
            save_last=True,
            train_time_interval=train_time_interval,
            every_n_train_steps=every_n_train_steps,
            # always last.ckpt: Lightning would otherwise write last-v1.ckpt beside a last.ckpt that the restored state
            # does not name (a run resumed from a checkpoint written on a signal before this callback's first save,
            # or from a moved run folder), and the next resume would start from the stale last.ckpt
            enable_version_counter=False,
        )

    def _save_now(self, trainer: L.Trainer) -> None:
        if trainer.sanity_checking or trainer.fast_dev_run:
            return
        self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking and trainer.state.fn == "fit":
            self._save_now(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # an epoch cut short by max_steps or a stop also ends here: its checkpoint would resume in the next epoch
        if trainer.fit_loop.epoch_loop.batch_progress.current.processed >= trainer.num_training_batches:
            self._save_now(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Nothing: a run stopped mid-epoch by ``max_steps`` has already counted the epoch as ended here, so a
        checkpoint written now would resume in the next epoch; the last interval, validation or epoch-end save is
        the resume point."""
