"""The Lightning DataModule of a word-level language model: a prepared corpus (:mod:`sarnmt.data.corpora.lm_text`)
walked as parallel streams in segments of ``bptt`` tokens, for truncated back-propagation through time.

A split's stream ``w_1 .. w_N`` (``<eos>`` after every line) gets one ``<eos>`` in front as the first context,
``x = <eos> w_1 .. w_N``; position ``i`` (0 <= i < N) is the pair (input ``x_i``, target ``x_{i+1} = w_{i+1}``), so
every token of the split is a target exactly once.

- **Training**: the N pairs are cut into ``batch_size`` (B) contiguous columns of ``L = N // B`` pairs each, column
  ``b`` holding pairs ``b*L .. b*L + L - 1``; the last ``N - B*L`` (< B) pairs fill no column and are left out of
  training (logged). Segment ``k`` is columns ``[:, k*T : (k+1)*T]`` (T = ``bptt``; the last segment is narrower when
  T does not divide L, never padded), so a column's segments are consecutive and a model carries its state from one
  to the next. The layout is the same every epoch (the AWD-LSTM practice; nothing is random, so there is no seed)
  and the batch order is fixed: segment 0, 1, ... Under DDP rank ``r`` of ``R`` takes the columns
  ``r*B/R .. (r+1)*B/R - 1`` (B must be divisible by R).
- **Validation/test**: the N pairs are cut into ``eval_batch_size`` (E) columns of ``C = ceil(N / E)``, the last
  column(s) padded (mask False) to C; segments of T as above. The mask-True targets, column by column, are the split's
  stream exactly. Not sharded: every rank sees the whole split.
- **Mid-epoch resume**: as :class:`sarnmt.data.loading.translation.TranslationDataModule`:
  :meth:`~LanguageModelDataModule.state_dict` records ``{"epoch", "batches_done"}`` in checkpoints, and the resumed
  run's training loader starts at segment ``batches_done`` (:meth:`SegmentSampler.skip_next`). The state a model
  carries across segments is the model's: :class:`sarnmt.lm_module.LanguageModelModule` keeps it in its checkpoints,
  so a resumed run continues bit for bit (only segment 0 is the streams' start: ``first``).

Batches are :class:`LMBatch` es (one per segment; the DataLoader runs with ``batch_size=None``): ``inputs`` and
``targets`` LongTensor (rows, W), ``mask`` BoolTensor (rows, W), with rows = B (B/R under DDP) in training and E in
evaluation, W = ``bptt`` (less in a last, narrower segment). Lightning moves them to the device with
:meth:`LMBatch.to`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from sarnmt.data.corpora.lm_mini import prepare_mini
from sarnmt.data.corpora.lm_text import (
    SPLITS,
    PreparedCorpus,
    VocabSettings,
    format_report,
    load_prepared,
    prepare_folder,
    prepare_toy,
)
from sarnmt.data.loading.position import EpochPosition
from sarnmt.data.text.codecs import EOS
from sarnmt.errors import InputError
from sarnmt.utils.paths import resolve_path

log = logging.getLogger(__name__)
CORPORA = ("folder", "mini", "toy")


@rank_zero_only
def _info(msg: str) -> None:
    log.info(msg)


@dataclass
class LMBatch:
    """One segment of parallel streams.

    :param inputs: LongTensor (rows, W), the context tokens.
    :param targets: LongTensor (rows, W), the next tokens: ``targets[r, t]`` follows ``inputs[r, t]`` in the stream,
        and ``inputs[r, t + 1] == targets[r, t]``.
    :param mask: BoolTensor (rows, W), False on padding (only in evaluation, at the end of the last columns).
    :param first: True for segment 0, where every stream starts: a model resets the state it carries.
    :param index: the segment's index in its epoch (0-based).
    """

    inputs: Tensor
    targets: Tensor
    mask: Tensor
    first: bool
    index: int

    @property
    def num_targets(self) -> int:
        """The real (mask-True) targets of the segment."""
        return int(self.mask.sum())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> LMBatch:
        """A copy on ``device`` (what Lightning's ``move_data_to_device`` calls)."""
        move = {"device": device, "non_blocking": non_blocking}
        return replace(self, inputs=self.inputs.to(**move), targets=self.targets.to(**move), mask=self.mask.to(**move))


# --- columns --------------------------------------------------------------------------------------------------------
def _with_context(stream: np.ndarray, length: int) -> np.ndarray:
    """``<eos>`` then ``stream``, zero-padded (or cut) to ``length + 1`` entries."""
    x = np.zeros(length + 1, dtype=np.int32)
    x[0] = EOS
    used = min(len(stream), length)
    x[1 : used + 1] = stream[:used]
    return x


def training_columns(stream: np.ndarray, batch_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``(inputs, targets, dropped)``: int32 arrays (B, N // B) and the number of pairs left out at the end."""
    length = len(stream) // batch_size
    x = _with_context(stream, batch_size * length)
    inputs, targets = x[:-1].reshape(batch_size, length), x[1:].reshape(batch_size, length)
    return inputs, targets, len(stream) - batch_size * length


def eval_columns(stream: np.ndarray, batch_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(inputs, targets, mask)``: arrays (E, ceil(N / E)), int32, int32 and bool; padding is 0 and mask False."""
    length = math.ceil(len(stream) / batch_size)
    x = _with_context(stream, batch_size * length)
    mask = (np.arange(batch_size * length) < len(stream)).reshape(batch_size, length)
    return x[:-1].reshape(batch_size, length), x[1:].reshape(batch_size, length), mask


class Segments(Dataset):
    """Item ``k`` is the :class:`LMBatch` of columns ``[:, k*bptt : (k+1)*bptt]``.

    :param inputs: int array (rows, L); ``targets`` likewise; ``mask``: bool (rows, L), or None for all True.
    """

    def __init__(self, inputs: np.ndarray, targets: np.ndarray, mask: np.ndarray | None, bptt: int) -> None:
        self.inputs, self.targets, self.mask, self.bptt = inputs, targets, mask, bptt

    def __len__(self) -> int:
        return math.ceil(self.inputs.shape[1] / self.bptt)

    def __getitem__(self, k: int) -> LMBatch:
        if not 0 <= k < len(self):
            raise IndexError(f"segment {k} of {len(self)}")
        cols = slice(k * self.bptt, (k + 1) * self.bptt)
        inputs = torch.from_numpy(self.inputs[:, cols].astype(np.int64))
        targets = torch.from_numpy(self.targets[:, cols].astype(np.int64))
        if self.mask is None:
            mask = torch.ones_like(inputs, dtype=torch.bool)
        else:
            mask = torch.from_numpy(self.mask[:, cols].copy())
        return LMBatch(inputs, targets, mask, first=k == 0, index=k)


class SegmentSampler(Sampler[int]):
    """Segment indices ``0 .. n - 1`` in order, every epoch; a resumed epoch can start after its first segments.

    :param epoch_source: when given, the epoch Lightning announces through :meth:`set_epoch` is replaced by what it
        returns (the trainer's ``current_epoch``), as :class:`sarnmt.data.loading.sampler.TokenBatchSampler` does.
    """

    def __init__(self, segments: int, epoch_source: Callable[[], int] | None = None) -> None:
        self.segments, self.epoch, self.epoch_source = segments, 0, epoch_source
        self._skip: tuple[int | None, int] = (None, 0)

    def set_epoch(self, epoch: int) -> None:
        """Lightning calls it at the start of every training epoch (``dataloader.sampler.set_epoch``)."""
        self.epoch = int(self.epoch_source() if self.epoch_source is not None else epoch)

    def skip_next(self, segments: int, epoch: int | None = None) -> None:
        """The next ``iter()`` starts at segment ``segments`` if it is of ``epoch`` (None: whichever); ``len()``
        stays the whole epoch's, as Lightning counts the skipped segments as done."""
        if segments < 0:
            raise ValueError(f"SegmentSampler: cannot skip {segments} segments")
        self._skip = (epoch, segments)

    def __iter__(self) -> Iterator[int]:
        (epoch, skip), self._skip = self._skip, (None, 0)
        yield from range(skip if epoch in (None, self.epoch) else 0, self.segments)

    def __len__(self) -> int:
        return self.segments


# --- the DataModule -------------------------------------------------------------------------------------------------
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
        self, *, corpus: str, path: str | None = None, root: str | None = None, cache_dir: str,
        vocab_max_size: int | None = None, vocab_min_count: int | None = None, batch_size: int, bptt: int,
        eval_batch_size: int, num_workers: int = 0, toy_seed: int = 1, toy_sizes: list[int] | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        if corpus not in CORPORA:
            raise InputError(f"data.corpus must be one of {', '.join(CORPORA)}, got {corpus!r}")
        needed = {"folder": ("path", path), "mini": ("root", root), "toy": ("toy_sizes", toy_sizes)}[corpus]
        if not needed[1]:
            raise InputError(f"data.{needed[0]} is required with data.corpus={corpus}")
        for key, value in {"batch_size": batch_size, "bptt": bptt, "eval_batch_size": eval_batch_size}.items():
            if value < 1:
                raise InputError(f"data.{key} must be >= 1, got {value}")
        if num_workers < 0:
            raise InputError(f"data.num_workers must be >= 0, got {num_workers}")
        self.corpus, self.path, self.root, self.cache_dir = corpus, path, root, cache_dir
        self.vocab_settings = VocabSettings(vocab_max_size, vocab_min_count)  # checks both
        self.batch_size, self.bptt, self.eval_batch_size = batch_size, bptt, eval_batch_size
        self.num_workers = num_workers
        toy_sizes = None if toy_sizes is None else [int(n) for n in toy_sizes]  # plain ints in checkpoints
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
        (``tokens``, ``unk_oov``, ``oov_rate``, ...; :mod:`sarnmt.data.corpora.lm_text`); empty before the corpus is
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
        return DataLoader(segments, batch_size=None, sampler=sampler, shuffle=False, num_workers=n,
                          persistent_workers=n > 0)  # fmt: skip

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
            raise InputError(f"the train split has {len(stream)} tokens, fewer than data.batch_size="
                             f"{self.batch_size} columns")  # fmt: skip
        rows = self._train_rows()
        segments = Segments(inputs[rows], targets[rows], None, self.bptt)
        trainer = self.trainer
        sampler = SegmentSampler(len(segments), (lambda: trainer.current_epoch) if trainer is not None else None)
        epoch = trainer.current_epoch if trainer is not None else 0
        sampler.set_epoch(epoch)
        _info(f"LM training: {self.batch_size} columns of {inputs.shape[1]} tokens, {len(segments)} segments of "
              f"bptt={self.bptt} per epoch; the last {dropped} of {len(stream)} train tokens fill no column and are "
              "left out of training")  # fmt: skip
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
