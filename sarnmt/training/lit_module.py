"""The LightningModule: training, validation and test around a plain ``nn.Module`` (any model of the factory).

Metrics: ``train/loss``, ``train/nll_token``; ``val/loss`` (per-sentence NLL, dl4mt's validation cost), ``val/ppl``,
``val/bleu`` (the ``val_decoding=`` search, greedy by default; sacrebleu against the raw references); the same under
``test/``. BLEU needs the datamodule's ``decode_target`` and ``references``; the sacrebleu signature is kept in
:attr:`TranslationModule.bleu_signature`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import lightning as L
import torch
from sacrebleu.metrics import BLEU
from torch import nn

from sarnmt.checkpoints.writing import translation_entry
from sarnmt.data.loading.batching import Batch
from sarnmt.decoding.greedy import GreedySearch
from sarnmt.decoding.search import Search
from sarnmt.models.factory import count_parameters
from sarnmt.training.loss import translation_loss


def step_seed(seed: int, step: int, rank: int = 0) -> int:
    """A 63-bit seed mixed from the run's seed, the update number and the DDP rank (splitmix64 finaliser)."""
    z = (seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9 + rank * 0x94D049BB133111EB) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return (z ^ (z >> 31)) >> 1


class TranslationModule(L.LightningModule):
    """:param net: the model.  :param optimizer: a partial optimizer (``optim=`` group), bound to the parameters here.
    :param loss_normalization: ``sentence`` (paper) or ``token``.
    :param val_search: the search of validation BLEU (``instantiate(cfg.val_decoding)``; default: greedy).
    :param bleu: compute BLEU during validation and test.
    :param net_config: the resolved model and decoder configs, saved in checkpoints to rebuild the model.
    :param test_search: the search of the test pass (``instantiate(cfg.decoding)``, e.g. beam); the validation
        search when None.
    :param train_seed: when given, the random generators are seeded from (seed, update number, rank) before every
        training step (as fairseq does), so dropout masks do not depend on what ran before: a run resumed from a
        mid-epoch checkpoint trains exactly as the uninterrupted one.
    """

    def __init__(
        self,
        net: nn.Module,
        optimizer: Callable[..., torch.optim.Optimizer],
        loss_normalization: Literal["sentence", "token"] = "sentence",
        val_search: Search | None = None,
        bleu: bool = True,
        net_config: dict[str, Any] | None = None,
        test_search: Search | None = None,
        train_seed: int | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["net", "optimizer", "val_search", "test_search"])
        self.val_search: Search = val_search if val_search is not None else GreedySearch()
        self.test_search: Search = test_search if test_search is not None else self.val_search
        self.net = net
        self.optimizer_factory = optimizer
        self.bleu_signature = ""
        self.identity: dict[str, Any] | None = None  # the run's identity, stored in checkpoints (training/identity.py)
        self.hypotheses: dict[str, list[str]] = {}
        self._outputs: dict[int, str] = {}
        self._sums = torch.zeros(3, dtype=torch.float64)  # summed NLL, tokens, sentences

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer_factory(params=self.parameters())

    def _nll(self, batch: Batch) -> torch.Tensor:
        return self.net.nll(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)

    def on_train_batch_start(self, batch: Batch, batch_idx: int) -> None:
        if self.hparams.train_seed is not None:
            torch.manual_seed(step_seed(self.hparams.train_seed, self.global_step, self.global_rank))

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        nll = self._nll(batch)
        loss = translation_loss(nll, batch.tgt_mask, self.hparams.loss_normalization)
        self.log_training(loss, nll.sum(), batch.tgt_mask.sum(), batch.size)
        return loss

    def log_training(self, loss: torch.Tensor, nll_sum: torch.Tensor, tokens: torch.Tensor, size: int) -> None:
        """``train/loss``, ``train/nll_token``, ``train/tokens`` of one batch of ``size`` sentences (also called by
        the captured step, :class:`sarnmt.training.capture.CaptureStrategy`, with its static outputs' copies)."""
        self.log("train/loss", loss, prog_bar=True, batch_size=size)
        self.log("train/nll_token", nll_sum / tokens, batch_size=size)
        self.log("train/tokens", tokens.float(), reduce_fx="sum", batch_size=size)

    # --- evaluation (validation and test share everything but the split name) ---
    def _eval_start(self) -> None:
        self._sums.zero_()
        self._outputs = {}

    def _eval_step(self, batch: Batch, search: Search) -> None:
        nll = self._nll(batch)
        counts = torch.stack([nll.sum(), batch.tgt_mask.sum().to(nll.dtype), nll.new_tensor(batch.size)])
        self._sums += counts.double().cpu()
        datamodule = self._datamodule()
        if self.hparams.bleu and datamodule is not None:
            hyps = search(self.net, batch.src, batch.src_mask)
            for index, tokens in zip(batch.ids.tolist(), hyps.tokens, strict=True):
                self._outputs[index] = datamodule.decode_target(tokens)

    def _eval_end(self, split: str) -> None:
        """Log ``{split}/loss``, ``{split}/ppl`` and ``{split}/bleu`` (split: ``val`` or ``test``)."""
        total, tokens, sentences = self._sums.tolist()
        if sentences == 0:
            return
        self.log(f"{split}/loss", total / sentences, sync_dist=True)
        self.log(f"{split}/ppl", math.exp(min(total / tokens, 50.0)), sync_dist=True, prog_bar=True)
        datamodule = self._datamodule()
        if not self._outputs or datamodule is None:
            return
        references = datamodule.references(split)
        order = sorted(self._outputs)  # corpus order; a limited pass (limit_val_batches) scores what it decoded
        hyps = [self._outputs[i] for i in order]
        references = [references[i] for i in order]
        metric = BLEU(tokenize=datamodule.bleu_tokenize)
        score = metric.corpus_score(hyps, [references])
        self.bleu_signature = str(metric.get_signature())
        self.hypotheses[split] = hyps
        self.log(f"{split}/bleu", score.score, sync_dist=True, prog_bar=True)

    def _datamodule(self):
        trainer = self._trainer
        return getattr(trainer, "datamodule", None) if trainer is not None else None

    def on_validation_epoch_start(self) -> None:
        self._eval_start()

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._eval_step(batch, self.val_search)

    def on_validation_epoch_end(self) -> None:
        self._eval_end("val")

    def on_test_epoch_start(self) -> None:
        self._eval_start()

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._eval_step(batch, self.test_search)

    def on_test_epoch_end(self) -> None:
        self._eval_end("test")

    # --- checkpoints carry what is needed to rebuild the model and its text codecs ---
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        datamodule = self._datamodule()
        codecs = datamodule.codec_state() if datamodule is not None else None
        checkpoint["sarnmt"] = translation_entry(
            self.hparams.net_config, codecs, count_parameters(self.net), self.identity
        )
