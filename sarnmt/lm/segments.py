"""A language model's split as parallel streams cut into segments of ``bptt`` tokens, for truncated
back-propagation through time (what :class:`~sarnmt.lm.datamodule.LanguageModelDataModule` serves).

A split's stream ``w_1 .. w_N`` (``<eos>`` after every line) gets one ``<eos>`` in front as the first context,
``x = <eos> w_1 .. w_N``; position ``i`` (0 <= i < N) is the pair (input ``x_i``, target ``x_{i+1} = w_{i+1}``), so
every token of the split is a target exactly once.

- **Training** (:func:`training_columns`): the N pairs are cut into ``batch_size`` (B) contiguous columns of
  ``L = N // B`` pairs each, column ``b`` holding pairs ``b*L .. b*L + L - 1``; the last ``N - B*L`` (< B) pairs fill
  no column and are left out of training (the DataModule logs it). Segment ``k`` is columns
  ``[:, k*T : (k+1)*T]`` (T = ``bptt``; the last segment is narrower when T does not divide L, never padded), so a
  column's segments are consecutive and a model carries its state from one to the next. The layout is the same
  every epoch (the AWD-LSTM practice; nothing is random, so there is no seed) and the batch order is fixed:
  segment 0, 1, ... (:class:`SegmentSampler`).
- **Validation/test** (:func:`eval_columns`): the N pairs are cut into ``eval_batch_size`` (E) columns of
  ``C = ceil(N / E)``, the last column(s) padded (mask False) to C; segments of T as above. The mask-True targets,
  column by column, are the split's stream exactly.

Batches are :class:`LMBatch` es (one per segment; the DataLoader runs with ``batch_size=None``): ``inputs`` and
``targets`` LongTensor (rows, W), ``mask`` BoolTensor (rows, W), with rows = B (B/R under DDP) in training and E in
evaluation, W = ``bptt`` (less in a last, narrower segment).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler

from sarnmt.data.text.codecs import EOS


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
