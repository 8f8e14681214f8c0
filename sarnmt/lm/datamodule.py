"""The Lightning DataModule of a word-level language model: a prepared corpus (:mod:`sarnmt.lm.corpus`)
walked as parallel streams in segments of ``bptt`` tokens, for truncated back-propagation through time (the layout:
:mod:`sarnmt.lm.segments`).

- **Sharding**: under DDP rank ``r`` of ``R`` takes the training columns ``r*B/R .. (r+1)*B/R - 1`` (B must be
  divisible by R); validation and test are not sharded: every rank sees the whole split.
- **Mid-epoch resume**: as :class:`sarnmt.data.loading.translation.TranslationDataModule`:
  :meth:`~LanguageModelDataModule.state_dict` records ``{"epoch", "batches_done"}`` in checkpoints, and the resumed
  run's training loader starts at segment ``batches_done`` (:meth:`~sarnmt.lm.segments.SegmentSampler.
  skip_next`). The state a model carries across segments is the model's: :class:`sarnmt.lm.module.LanguageModelModule`
  keeps it in its checkpoints, so a resumed run continues bit for bit (only segment 0 is the streams' start: ``first``).

Lightning moves the :class:`~sarnmt.lm.segments.LMBatch` es to the device with their ``to``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import lightning as L
import numpy as np
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from torch.utils.data import DataLoader, Sampler

from sarnmt.data.loading.position import EpochPosition
from sarnmt.errors import InputError, check_one_of, check_range
from sarnmt.lm.corpus import (
    SPLITS,
    PreparedCorpus,
    format_report,
    load_prepared,
    prepare_folder,
    prepare_toy,
)
from sarnmt.lm.mini import prepare_mini
from sarnmt.lm.segments import Segments, SegmentSampler, eval_columns, training_columns
from sarnmt.lm.vocab import SPECIALS, VocabSettings
from sarnmt.utils.paths import resolve_path

log = logging.getLogger(__name__)
CORPORA = ("folder", "mini", "toy")


@rank_zero_only
def _info(msg: str) -> None:
    log.info(msg)


TOY_PARTS = ("train", "valid", "test")  # the splits of data.toy_sizes, in its order (the config's words)


def check_toy_sizes(sizes: object) -> None:
    """``data.toy_sizes`` where it enters: three whole numbers of lines, 1 or more (train, valid and test).

    :raises InputError: ``data.toy_sizes=<value>: must be three line counts ...`` or, for one of them,
        ``data.toy_sizes.<i>=<value>: must be ...`` (:func:`~sarnmt.errors.check_range`), one line."""
    listed = isinstance(sizes, Sequence) and not isinstance(sizes, str)
    if not listed or len(sizes) != len(TOY_PARTS):
        raise InputError(
            f"data.toy_sizes={list(sizes) if listed else sizes}: must be three line counts (train, valid and test)"
        )
    for index, (split, value) in enumerate(zip(TOY_PARTS, sizes, strict=True)):
        check_range(f"data.toy_sizes.{index}", value, 1, whole=True, why_below=f"the lines of the {split} split")


class LanguageModelDataModule(EpochPosition, L.LightningDataModule):
    """A word-level LM corpus, prepared once and cached, in segments of ``bptt`` tokens.

    :param corpus: ``folder`` (a WikiText/PTB-layout folder at ``path``) or ``mini`` (built from ``root``).
    :param path: the corpus folder (``folder`` only); relative to the launch directory.
    :param root: the shared data folder the mini corpus is built from (``mini`` only).
    :param cache_dir: where prepared corpora are cached (``<cache_dir>/lm-<name>-<key>``).
    :param vocab_max_size: the largest vocabulary, ``<eos>`` and ``<unk>`` included; None: no limit.
    :param vocab_min_count: training words seen fewer times are ``<unk>``; None: no limit.
    :param batch_size: B, parallel streams (columns) in training (over all DDP ranks).
    :param bptt: T, the segment length in tokens.
    :param eval_batch_size: E, parallel streams in validation and test.
    :param num_workers: DataLoader worker processes.
    :param toy_seed: / :param toy_sizes: the toy corpus (``corpus=toy``): its seed and its lines of train, valid
        and test (the target side of :mod:`sarnmt.data.corpora.toy`).
    """

    def __init__(
        self,
        *,
        corpus: str,
        path: str | None = None,
        root: str | None = None,
        cache_dir: str,
        vocab_max_size: int | None = None,
        vocab_min_count: int | None = None,
        batch_size: int,
        bptt: int,
        eval_batch_size: int,
        num_workers: int = 0,
        toy_seed: int = 1,
        toy_sizes: list[int] | None = None,
    ) -> None:
        super().__init__()
        check_one_of("data.corpus", corpus, CORPORA)
        needed = {"folder": ("path", path), "mini": ("root", root), "toy": ("toy_sizes", toy_sizes)}[corpus]
        if not needed[1]:
            raise InputError(f"data.{needed[0]} is required with data.corpus={corpus}")
        for key, value in {"batch_size": batch_size, "bptt": bptt, "eval_batch_size": eval_batch_size}.items():
            check_range(f"data.{key}", value, 1, whole=True)
        check_range("data.num_workers", num_workers, 0, whole=True)
        if vocab_max_size is not None:  # null: no limit
            counts = f"it counts {' and '.join(SPECIALS)}; null for no limit"
            check_range("data.vocab_max_size", vocab_max_size, len(SPECIALS), whole=True, why_below=counts)
        if vocab_min_count is not None:
            check_range("data.vocab_min_count", vocab_min_count, 1, whole=True)
        self.corpus, self.path, self.root, self.cache_dir = corpus, path, root, cache_dir
        self.vocab_settings = VocabSettings(vocab_max_size, vocab_min_count)
        self.batch_size, self.bptt, self.eval_batch_size = batch_size, bptt, eval_batch_size
        self.num_workers = num_workers
        if toy_sizes is not None:
            check_toy_sizes(toy_sizes)
            toy_sizes = list(toy_sizes)  # plain ints in checkpoints
        self.toy_seed, self.toy_sizes = toy_seed, toy_sizes
        self.save_hyperparameters()
        self._report: dict[str, Any] = {}
        self._prepared: PreparedCorpus | None = None
        self._resume: dict[str, int] = {}

    # --- preparation ---
    def prepare(self) -> dict[str, Any]:
        """Prepare the corpus (no work when cached) and log its report. :returns: the report."""
        cache_dir = resolve_path(self.cache_dir)
        if self.corpus == "folder":
            report = prepare_folder(resolve_path(self.path), cache_dir, self.vocab_settings)
        elif self.corpus == "toy":
            report = prepare_toy(cache_dir, self.vocab_settings, self.toy_seed, self.toy_sizes)
        else:
            report = prepare_mini(resolve_path(self.root), cache_dir, self.vocab_settings)
        _info(format_report(report))
        self._report = report
        return report

    def prepare_data(self) -> None:
        if not self._report:  # an entry point may call it before the Trainer does: the second call does nothing
            self.prepare()

    def setup(self, stage: str | None = None) -> None:
        """Load the prepared corpus (preparing it first where this process has not). Idempotent."""
        if self._prepared is None:
            self._prepared = load_prepared((self._report or self.prepare())["cache"])

    def _need_setup(self) -> PreparedCorpus:
        if self._prepared is None:
            raise RuntimeError(f"{type(self).__name__}: call setup() first")
        return self._prepared

    @property
    def vocab(self) -> list[str]:
        """The words in id order (``<eos>`` = 0, ``<unk>`` = 1)."""
        return list(self._need_setup().vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._need_setup().vocab)

    @property
    def report(self) -> dict[str, Any]:
        """The preparation report: ``corpus``, ``source``, ``cache``, ``vocab`` and per-split ``splits`` counts
        (``tokens``, ``unk_oov``, ``oov_rate``, ...; :mod:`sarnmt.lm.vocab`); empty before the corpus is
        prepared."""
        if self._prepared is None:
            return dict(self._report)
        return {**self._prepared.report, "cache": str(self._prepared.folder)}

    def has_split(self, split: str) -> bool:
        """Whether ``split`` is one of the corpus's splits, ``train``, ``val`` and ``test`` (every corpus has all
        three; the file names say ``valid``, the split is ``val`` as in the rest of the project)."""
        return split in self._need_setup().streams

    def stream(self, split: str) -> np.ndarray:
        """The token ids of ``split``, int32 (N,)."""
        if not self.has_split(split):
            raise InputError(f"{type(self).__name__}: no split {split!r}; available: {list(SPLITS)}")
        return self._need_setup().streams[split]

    # --- loaders ---
    def _loader(self, segments: Segments, sampler: Sampler[int] | None = None) -> DataLoader:
        n = self.num_workers
        return DataLoader(
            segments, batch_size=None, sampler=sampler, shuffle=False, num_workers=n, persistent_workers=n > 0
        )

    def _train_rows(self) -> slice:
        trainer = self.trainer
        world, rank = (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)
        if self.batch_size % world:
            raise InputError(f"data.batch_size={self.batch_size} must be divisible by the {world} DDP ranks")
        per_rank = self.batch_size // world
        return slice(rank * per_rank, (rank + 1) * per_rank)

    def train_dataloader(self) -> DataLoader:
        stream = self.stream("train")
        inputs, targets, dropped = training_columns(stream, self.batch_size)
        if not inputs.shape[1]:
            raise InputError(
                f"the train split has {len(stream)} tokens, fewer than data.batch_size={self.batch_size} columns"
            )
        rows = self._train_rows()
        segments = Segments(inputs[rows], targets[rows], None, self.bptt)
        trainer = self.trainer
        sampler = SegmentSampler(len(segments), (lambda: trainer.current_epoch) if trainer is not None else None)
        epoch = trainer.current_epoch if trainer is not None else 0
        sampler.set_epoch(epoch)
        _info(
            f"LM training: {self.batch_size} columns of {inputs.shape[1]} tokens, {len(segments)} segments of "
            f"bptt={self.bptt} per epoch; the last {dropped} of {len(stream)} train tokens fill no column and are "
            "left out of training"
        )
        self.skip_done(sampler, epoch, "segments")  # mid-epoch resumption (sarnmt.data.loading.position)
        return self._loader(segments, sampler)

    def eval_dataloader(self, split: str) -> DataLoader:
        """Segments of ``split`` in ``eval_batch_size`` padded columns (every token a mask-True target once)."""
        inputs, targets, mask = eval_columns(self.stream(split), self.eval_batch_size)
        return self._loader(Segments(inputs, targets, mask, self.bptt))

    def val_dataloader(self) -> DataLoader:
        return self.eval_dataloader("val")

    def test_dataloader(self) -> DataLoader:
        return self.eval_dataloader("test")
