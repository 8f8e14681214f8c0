"""Where a training epoch stands, for mid-epoch resumption: what every DataModule of the suite (translation and
language model) keeps in checkpoints and gives its training sampler back.

Lightning stores a DataModule's :meth:`EpochPosition.state_dict` in checkpoints and hands it back
(:meth:`EpochPosition.load_state_dict`) before ``train_dataloader()``; the DataModule's training loader then calls
:meth:`EpochPosition.skip_done` on its sampler, which skips the batches of the epoch whose update was done. The
sampler needs ``__len__`` and ``skip_next(count, epoch)`` (:class:`~sarnmt.data.loading.sampler.TokenBatchSampler`,
:class:`~sarnmt.lm.segments.SegmentSampler`).
"""

from __future__ import annotations

import logging
from typing import Any

from lightning.pytorch.utilities.rank_zero import rank_zero_only

log = logging.getLogger(__name__)


@rank_zero_only
def _info(msg: str) -> None:
    log.info(msg)


class EpochPosition:
    """Mixin for a ``LightningDataModule``: ``{"epoch", "batches_done"}`` in checkpoints."""

    _resume: dict[str, int]

    def state_dict(self) -> dict[str, int]:
        """``{"epoch", "batches_done"}``: the training batches of the current epoch whose update is done."""
        trainer = self.trainer
        if trainer is None:
            return {}
        return {
            "epoch": trainer.current_epoch,
            "batches_done": trainer.fit_loop.epoch_loop.batch_progress.current.processed,
        }

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        self._resume = dict(state_dict)

    def skip_done(self, sampler: Any, epoch: int, unit: str = "batches") -> None:
        """Make ``sampler`` (set to ``epoch``) skip the batches a resumed checkpoint says are done, once.

        All of them done (a checkpoint of the epoch's end): if Lightning finishes that epoch again (it does for a
        max_steps run) the sampler yields nothing more, so the epoch ends instead of drawing an extra batch; if it
        goes on with the next epoch, nothing is skipped there."""
        resume, self._resume = getattr(self, "_resume", {}), {}
        if resume.get("epoch") == epoch and 0 < resume.get("batches_done", 0) <= len(sampler):
            sampler.skip_next(resume["batches_done"], epoch)
            _info(f"resuming epoch {epoch} after its first {resume['batches_done']} of {len(sampler)} {unit}")
