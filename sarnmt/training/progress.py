"""The training progress bar (``callbacks.progress_bar``): Lightning's tqdm bar, with its total and epoch also when a
run resumes mid-epoch.

Lightning does not call ``on_train_epoch_start`` for an epoch it resumes in the middle, so its bar would show the
resumed epoch as ``Training: 7/?``: no total, no epoch. :class:`ProgressBar` sets them when training starts on such an
epoch, the batches already done counted as done.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.callbacks.progress.tqdm_progress import convert_inf


class ProgressBar(TQDMProgressBar):
    """:class:`~lightning.pytorch.callbacks.TQDMProgressBar` whose bar of a resumed epoch says ``Epoch N`` and counts
    to the epoch's number of batches from the ones it had done."""

    def on_train_start(self, trainer: L.Trainer, *args: Any) -> None:
        super().on_train_start(trainer, *args)
        if trainer.fit_loop.restarted_mid_epoch:
            bar = self.train_progress_bar
            bar.reset(total=convert_inf(self.total_train_batches))
            bar.initial = 0
            bar.n = trainer.fit_loop.epoch_loop.batch_progress.current.processed
            bar.set_description(f"Epoch {trainer.current_epoch}")
            bar.refresh()
