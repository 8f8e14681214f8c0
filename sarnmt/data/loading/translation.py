"""The base Lightning DataModule: encoded splits, the training filter, batching, references and codecs.

Subclasses: :mod:`sarnmt.data.loading.in_memory` (toy corpus, files) and :mod:`sarnmt.data.loading.prepared_corpus`
(the described corpora).

Splits are named ``"train"``, ``"val"`` and ``"test"``. Only the training split is filtered (dl4mt's rule,
:func:`keep_mask`: a pair is kept iff both sides are non-empty and ``len_src < max_len`` and ``len_tgt < max_len`` in
codec ids, EOS not counted; a blank raw line counts as empty), by one method for every subclass
(:meth:`TranslationDataModule._filter_train`, vectorised for corpora of millions of pairs); the counts are logged and
kept in ``filter_stats``. Validation and test keep every pair, empty ones too, because BLEU is computed over every
line.

Batches: training uses :class:`~sarnmt.data.loading.sampler.TokenBatchSampler` (``max_tokens`` padded tokens,
length-sorted within ``maxi_batch`` windows, batch order shuffled, sharded over the trainer's DDP ranks,
reshuffled every epoch). It is passed as ``batch_sampler``, so the trainer must run with
``use_distributed_sampler=False``. Evaluation batches hold ``eval_batch_size`` *sentences*, length-sorted
(longest first), unshuffled and not sharded: every rank sees the whole split, and ``Batch.ids`` gives each
pair's index in its split so outputs can be put back in corpus order.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import lightning as L
import numpy as np
from lightning.pytorch.utilities.rank_zero import rank_zero_only, rank_zero_warn
from torch.utils.data import DataLoader, Dataset

from sarnmt.data.loading.batching import collate
from sarnmt.data.loading.position import EpochPosition
from sarnmt.data.loading.sampler import TokenBatchSampler
from sarnmt.data.text.codecs import SPECIAL_TOKENS, UNK, TextCodec
from sarnmt.errors import InputError, check_range

log = logging.getLogger(__name__)


@rank_zero_only
def _info(msg: str) -> None:
    log.info(msg)


def keep_mask(
    src_len: Sequence[int] | np.ndarray, tgt_len: Sequence[int] | np.ndarray, max_len: int
) -> tuple[np.ndarray, int, int]:
    """dl4mt's training filter, the one every DataModule applies: keep a pair iff both sides are non-empty and shorter
    than ``max_len``. :returns: the boolean mask and the numbers of pairs with an empty side and too long."""
    src_len, tgt_len = np.asarray(src_len, dtype=np.int64), np.asarray(tgt_len, dtype=np.int64)
    empty = (src_len == 0) | (tgt_len == 0)
    too_long = ~empty & ((src_len >= max_len) | (tgt_len >= max_len))
    return ~(empty | too_long), int(empty.sum()), int(too_long.sum())


def check_vocab_size(vocab_size: object) -> None:
    """``data.vocab_size`` of a BPE-coded DataModule (files, a described corpus) where it enters: a whole number
    above the special tokens it counts (a smaller one failed after the corpus was read and tokenised).

    :raises InputError: ``data.vocab_size=<value>: must be ...`` (:func:`~sarnmt.errors.check_range`), one line."""
    counts = f"it counts {' and '.join(SPECIAL_TOKENS)}"
    check_range("data.vocab_size", vocab_size, len(SPECIAL_TOKENS) + 1, whole=True, why_below=counts)


class EncodedSplit(Dataset):
    """Encoded pairs of one split; item ``k`` is ``(index in the split, source ids, target ids)``, no EOS."""

    def __init__(self, index: list[int], src: list[list[int]], tgt: list[list[int]]) -> None:
        self.index, self.src, self.tgt = index, src, tgt

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, k: int) -> tuple[int, list[int], list[int]]:
        return self.index[k], self.src[k], self.tgt[k]


class TranslationDataModule(EpochPosition, L.LightningDataModule):
    """Base class: subclasses implement :meth:`_read_splits` and :meth:`_train_codecs`.

    :param max_len: training pairs with a side of ``>= max_len`` ids (EOS not counted) are removed.
    :param max_tokens: token budget of a training batch (padded, EOS included); None: no token budget.
    :param max_sentences: sentences per training batch at most (dl4mt's batch_size); None: no such limit.
    :param eval_batch_size: sentences per validation/test batch.
    :param num_workers: DataLoader worker processes.
    :param maxi_batch: sorting window of the training sampler in batches (0: sort the whole split).
    :param seed: seed of the training shuffles (and, for the toy corpus, of the corpus itself).
    :param order_seed: seed of the training shuffles when given (``data.order_seed``; a sweep at a scale with
        ``data_order: per_seed`` sets it to the job's seed, so that each seed trains on its own batch order);
        None: ``seed``, one batch order for every run of a config.
    """

    name = "base"

    def __init__(
        self,
        *,
        max_len: int,
        max_tokens: int | None,
        eval_batch_size: int,
        num_workers: int,
        maxi_batch: int,
        seed: int,
        max_sentences: int | None = None,
        order_seed: int | None = None,
    ) -> None:
        super().__init__()
        positive = {
            "max_len": max_len,
            "max_tokens": max_tokens,
            "eval_batch_size": eval_batch_size,
            "max_sentences": max_sentences,
        }
        for key, value in positive.items():
            if value is not None:
                check_range(f"data.{key}", value, 1, whole=True)
        if max_tokens is None and max_sentences is None:
            limits = "the limits of a training batch"
            raise InputError(f"data.max_tokens=null and data.max_sentences=null: give one or both ({limits})")
        check_range("data.num_workers", num_workers, 0, whole=True)
        check_range("data.maxi_batch", maxi_batch, 0, whole=True)
        self.max_len, self.max_tokens, self.eval_batch_size = max_len, max_tokens, eval_batch_size
        self.max_sentences = max_sentences
        self.num_workers, self.maxi_batch, self.seed = num_workers, maxi_batch, seed
        self.order_seed = order_seed
        self.src_codec: TextCodec | None = None
        self.tgt_codec: TextCodec | None = None
        self.joint = False
        self.filter_stats: dict[str, Any] = {}
        self._raw: dict[str, tuple[list[str], list[str]]] = {}
        self._origin: dict[str, str] = {}
        self._data: dict[str, EncodedSplit] = {}
        self._resume: dict[str, int] = {}

    def _read_splits(self) -> dict[str, tuple[list[str], list[str], str]]:
        """``{split: (source lines, target lines, origin for messages)}``; "train" and "val" are required."""
        raise NotImplementedError

    def _train_codecs(self, src: list[str], tgt: list[str]) -> tuple[TextCodec, TextCodec, bool]:
        """``(src_codec, tgt_codec, joint)`` learned on the raw training lines."""
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        """Read, learn the codecs and encode every split. Idempotent: later calls do nothing."""
        if self._data:
            return
        splits = self._read_splits()
        for required in ("train", "val"):
            if required not in splits:
                raise ValueError(f"{type(self).__name__}: no {required!r} split")
        for split, (src, tgt, origin) in splits.items():
            self._raw[split], self._origin[split] = (src, tgt), origin
        src_codec, tgt_codec, joint = self._train_codecs(*self._raw["train"])
        kind = f"{'joint' if joint else 'separate'} {src_codec.kind}"
        _info(f"{self.name} data: vocabulary sizes {src_codec.vocab_size}/{tgt_codec.vocab_size} ({kind})")
        data = {}
        for split, (src, tgt) in self._raw.items():
            src_ids, tgt_ids = src_codec.encode_batch(src), tgt_codec.encode_batch(tgt)
            if split == "train":
                lengths = [  # a blank raw line is an empty side even where its codec gives it ids
                    [len(ids) if line.strip() else 0 for line, ids in zip(lines, side_ids, strict=True)]
                    for lines, side_ids in ((src, src_ids), (tgt, tgt_ids))
                ]
                kept = self._filter_train(*lengths).tolist()
                data[split] = EncodedSplit(kept, [src_ids[k] for k in kept], [tgt_ids[k] for k in kept])
            else:
                data[split] = EncodedSplit(list(range(len(src))), src_ids, tgt_ids)
                n_unk = sum(ids.count(UNK) for ids in src_ids)
                _info(f"{split} data {self._origin[split]}: {len(src)} pairs, all kept; {n_unk} <unk> in src")
        self.src_codec, self.tgt_codec, self.joint = src_codec, tgt_codec, joint
        self._data = data  # last: a failed setup() leaves the module not set up

    def _filter_train(self, src_lengths: Sequence[int], tgt_lengths: Sequence[int]) -> np.ndarray:
        """The training split's filter (:func:`keep_mask` with ``max_len``), its counts logged and kept in
        ``filter_stats``. :returns: the indices of the pairs kept, in corpus order.

        :raises InputError: when no pair is left, naming the training files."""
        keep, empty, too_long = keep_mask(src_lengths, tgt_lengths, self.max_len)
        index = np.flatnonzero(keep)
        origin = self._origin["train"]
        self.filter_stats = dict(
            split="train",
            files=origin,
            total=len(keep),
            kept=len(index),
            empty=empty,
            too_long=too_long,
            max_len=self.max_len,
        )
        _info(
            f"train data {origin}: kept {len(index)} of {len(keep)} pairs; removed {empty} with an empty side "
            f"and {too_long} with a side of >= {self.max_len} tokens"
        )
        if not len(index):
            raise InputError(f"train data {origin}: no pair left after filtering (max_len={self.max_len})")
        return index

    def _need_setup(self) -> None:
        if not self._data:
            raise RuntimeError(f"{type(self).__name__}: call setup() first")

    @property
    def src_vocab_size(self) -> int:
        self._need_setup()
        return self.src_codec.vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        self._need_setup()
        return self.tgt_codec.vocab_size

    @property
    def bleu_tokenize(self) -> str:
        """sacrebleu's tokenizer for BLEU on the target side's plain text: ``13a`` (NIST mteval-v13a)."""
        return "13a"

    def has_split(self, split: str) -> bool:
        self._need_setup()
        return split in self._raw

    def _split(self, split: str) -> tuple[list[str], list[str]]:
        if not self.has_split(split):
            raise InputError(f"{type(self).__name__}: no split {split!r}; available: {sorted(self._raw)}")
        return self._raw[split]

    def origin(self, split: str) -> str:
        """Where ``split`` was read from (files, or the corpus description), for messages."""
        self._split(split)
        return self._origin[split]

    def sources(self, split: str) -> list[str]:
        """Raw source lines of ``split``, one per pair, corpus order, unfiltered."""
        return list(self._split(split)[0])

    def references(self, split: str) -> list[str]:
        """Raw target lines of ``split``, one per pair, corpus order, unfiltered."""
        return list(self._split(split)[1])

    def dataset(self, split: str) -> EncodedSplit:
        """The encoded pairs of ``split`` (filtered for "train")."""
        self._split(split)
        return self._data[split]

    def decode_target(self, ids: Sequence[int]) -> str:
        """Plain text of target ids (ints, or a tensor of shape (T,)), EOS already stripped."""
        self._need_setup()
        return self.tgt_codec.decode(ids)

    def codec_state(self) -> dict[str, Any]:
        """``{"src": ..., "tgt": ..., "joint": bool}``, JSON-able; read back by
        :func:`~sarnmt.data.text.codec_state.codecs_from_state`."""
        self._need_setup()
        return {"src": self.src_codec.to_state(), "tgt": self.tgt_codec.to_state(), "joint": self.joint}

    def _loader(self, data: EncodedSplit, sampler: TokenBatchSampler) -> DataLoader:
        n = self.num_workers
        return DataLoader(data, batch_sampler=sampler, collate_fn=collate, num_workers=n, persistent_workers=n > 0)

    def train_dataloader(self) -> DataLoader:
        data = self.dataset("train")
        rank, world, epoch = 0, 1, 0
        trainer = self.trainer
        if trainer is not None:
            rank, world, epoch = trainer.global_rank, trainer.world_size, trainer.current_epoch
            if self.maxi_batch and trainer.reload_dataloaders_every_n_epochs != 1:
                rank_zero_warn(
                    f"maxi_batch={self.maxi_batch} makes the number of training batches vary between epochs;"
                    " set trainer.reload_dataloaders_every_n_epochs=1 or data.maxi_batch=0, otherwise"
                    " Lightning may cut epochs short or skip end-of-epoch validation"
                )
        sampler = TokenBatchSampler(
            [len(s) for s in data.src],
            [len(t) for t in data.tgt],
            max_tokens=self.max_tokens,
            shuffle=True,
            seed=self.seed if self.order_seed is None else self.order_seed,
            maxi_batch=self.maxi_batch,
            num_replicas=world,
            rank=rank,
            max_sentences=self.max_sentences,
            epoch_source=(lambda: trainer.current_epoch) if trainer else None,
        )
        sampler.set_epoch(epoch)
        self.skip_done(sampler, epoch)  # mid-epoch resumption
        return self._loader(data, sampler)

    def _eval_loader(self, split: str) -> DataLoader:
        data = self.dataset(split)
        sampler = TokenBatchSampler(
            [len(s) for s in data.src],
            [len(t) for t in data.tgt],
            max_tokens=None,
            max_sentences=self.eval_batch_size,
            shuffle=False,
        )
        return self._loader(data, sampler)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")
