"""The LightningModule of the language models (Table 6): truncated back-propagation through time over a stream.

Batches are :class:`~sarnmt.lm.segments.LMBatch` segments: B columns of the text, T words each, consecutive
segments continuing the same columns. The state a segment ends with (LSTM state and the head's memory,
:class:`~sarnmt.lm.model.LMState`) is carried into the next one without gradients; a batch marked ``first``
starts its columns afresh. Training, validation and test keep separate carried states, so a validation in the
middle of an epoch leaves training's untouched, and training's is saved in checkpoints, so a run resumed from a
mid-epoch checkpoint continues exactly.

Metrics: ``train/loss`` (mean NLL per word of the batch), ``{val,test}/loss`` (mean NLL per word over the whole
split, every word counted once) and ``{val,test}/ppl`` = exp of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import lightning as L
import torch

from sarnmt.checkpoints.writing import language_model_entry
from sarnmt.lm.model import LMState, RecurrentLM
from sarnmt.models.factory import count_parameters
from sarnmt.training.lit_module import step_seed

STATE_KEY = "sarnmt_lm_carried"  # the carried training state in a checkpoint


class LanguageModelModule(L.LightningModule):
    """:param net: the model.  :param optimizer: a partial optimizer (``optim=`` group).
    :param net_config: the resolved model config, stored in checkpoints to rebuild the model.
    :param train_seed: random generators are seeded from (seed, update, rank) before every update, as in
        translation (:class:`~sarnmt.training.lit_module.TranslationModule`), so a resumed run draws the same dropout
        masks.
    """

    def __init__(
        self,
        net: RecurrentLM,
        optimizer: Callable[..., torch.optim.Optimizer],
        net_config: dict[str, Any] | None = None,
        train_seed: int | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["net", "optimizer"])
        self.net = net
        self.optimizer_factory = optimizer
        self._carried: dict[str, LMState | None] = {"train": None, "val": None, "test": None}
        self._sums = torch.zeros(2, dtype=torch.float64)  # summed NLL, words
        self.identity: dict[str, Any] | None = None  # the run's identity, stored in checkpoints (training/identity.py)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer_factory(params=self.parameters())

    def _segment(self, batch, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        state = None if batch.first else self._carried[split]
        if state is not None and state.hidden.device != batch.inputs.device:  # restored from a checkpoint
            state = state.to(batch.inputs.device)
        nll, state = self.net.nll(batch.inputs, batch.targets, batch.mask, state)
        self._carried[split] = state.detach()
        return nll, batch.mask.sum()

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        if self.hparams.train_seed is not None:
            torch.manual_seed(step_seed(self.hparams.train_seed, self.global_step, self.global_rank))

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        nll, words = self._segment(batch, "train")
        loss = nll.sum() / words
        size = batch.inputs.size(0)
        self.log("train/loss", loss, prog_bar=True, batch_size=size)
        self.log("train/ppl", torch.exp(loss.detach().clamp(max=50.0)), batch_size=size)
        self.log("train/tokens", words.float(), reduce_fx="sum", batch_size=size)
        return loss

    # --- evaluation: every word of the split once ---
    def _eval_start(self, split: str) -> None:
        self._sums.zero_()
        self._carried[split] = None

    def _eval_step(self, batch, split: str) -> None:
        nll, words = self._segment(batch, split)
        self._sums += torch.stack([nll.sum().double(), words.double()]).cpu()

    def _eval_end(self, split: str) -> None:
        total, words = self._sums.tolist()
        if words == 0:
            return
        self.log(f"{split}/loss", total / words, sync_dist=True)
        self.log(f"{split}/ppl", math.exp(min(total / words, 50.0)), sync_dist=True, prog_bar=True)
        self.log(f"{split}/words", words, sync_dist=True, reduce_fx="sum")

    def on_validation_epoch_start(self) -> None:
        self._eval_start("val")

    def validation_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def on_validation_epoch_end(self) -> None:
        self._eval_end("val")

    def on_test_epoch_start(self) -> None:
        self._eval_start("test")

    def test_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._eval_end("test")

    # --- checkpoints: the model's config, the vocabulary, and training's carried state ---
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        trainer = self._trainer
        datamodule = getattr(trainer, "datamodule", None) if trainer is not None else None
        vocab = list(datamodule.vocab) if datamodule is not None else None
        checkpoint["sarnmt"] = language_model_entry(
            self.hparams.net_config, vocab, count_parameters(self.net), self.identity
        )
        carried = self._carried["train"]
        if carried is not None:
            checkpoint[STATE_KEY] = {"hidden": carried.hidden, "cell": carried.cell, "memory": carried.memory}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        carried = checkpoint.get(STATE_KEY)
        if carried is not None:
            self._carried["train"] = LMState(carried["hidden"], carried["cell"], carried["memory"])
