"""Token-budget batching with dl4mt-style maxi-batches, deterministic per epoch, shardable across DDP ranks.

Training (``shuffle=True``), for epoch ``e``:

1. shuffle all example indices (``random.Random``, seeded from ``seed`` and ``e``);
2. cut them into *maxi-batches* of ``maxi_batch × k`` consecutive examples, where ``k`` is the number of
   sentences of average length that fit in ``max_tokens`` (``k = max_tokens // (1 + mean max(src, tgt))``,
   computed once from the lengths), i.e. about ``maxi_batch`` batches' worth of examples;
3. sort each maxi-batch by length (``max(src_len, tgt_len)``, ties keep the shuffled order) and cut it
   greedily into batches whose padded size ``n_sentences × (1 + longest side in the batch)`` is at most
   ``max_tokens`` (EOS counted; a single example longer than the budget still forms a batch of its own);
4. shuffle the order of all batches;
5. with ``num_replicas = R > 1``: drop the last ``len(batches) % R`` batches of that shuffled order, so every
   rank gets the same number of batches (DDP needs it), and give rank ``r`` the batches ``r, r + R, ...``.
   The dropped examples differ from epoch to epoch (at most ``R - 1`` batches per epoch).

``maxi_batch=0`` (the default) sorts the whole split as one maxi-batch. Batches are then cut from the same
sorted sequence of lengths every epoch (only which equal-length examples go together, and the batch order,
change), so the number of batches is the same in every epoch. With ``maxi_batch > 0`` maxi-batches mix lengths
differently each epoch and the number of batches varies slightly (e.g. 59-60 on the toy corpus). ``len()`` is
exact for the epoch last given to :meth:`TokenBatchSampler.set_epoch`, but Lightning reads the length of a
train dataloader once and uses it to end epochs and schedule validation, so use ``maxi_batch > 0`` only with
``Trainer(reload_dataloaders_every_n_epochs=1)``.

Evaluation (``shuffle=False``): all examples sorted by length, longest first (ties by index), cut as above;
deterministic and not sharded (every rank iterates the whole split, so ``num_replicas`` must be 1).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence

from torch.utils.data import Sampler


class _EpochForwarder:
    """Lightning and Fabric call ``set_epoch`` on ``dataloader.batch_sampler.sampler``, not on the batch
    sampler itself; this object, exposed as ``TokenBatchSampler.sampler``, passes that call on (with the owner's
    ``epoch_source``, when it has one, deciding the epoch)."""

    def __init__(self, owner: TokenBatchSampler) -> None:
        self._owner = owner

    def set_epoch(self, epoch: int) -> None:
        source = self._owner.epoch_source
        self._owner.set_epoch(source() if source is not None else epoch)


class TokenBatchSampler(Sampler[list[int]]):
    """Yields lists of example indices, each a batch within a token budget.

    :param src_lengths: source length of every example, EOS not counted.
    :param tgt_lengths: target length of every example, EOS not counted.
    :param max_tokens: the largest padded batch size ``n × (1 + longest side)``; ``None`` for no token limit.
    :param max_sentences: the largest number of sentences in a batch; ``None`` for no limit.
    :param shuffle: training order (see the module docstring) if True, else length-sorted evaluation order.
    :param seed: seed of the shuffles; the epoch is mixed in.
    :param maxi_batch: size of the sorting window in (approximate) batches; 0 sorts the whole split at once.
    :param num_replicas: number of DDP ranks sharing the batches (training only).
    :param rank: this process's rank, ``0 <= rank < num_replicas``.
    :param epoch_source: when given, the epoch Lightning announces (through :attr:`sampler`) is replaced by what it
        returns (the trainer's ``current_epoch``): after a resume from an end-of-epoch checkpoint Lightning 2.6
        announces its ``epoch_progress.processed``, one more than the epoch it trains, which would shuffle the
        resumed run's batches differently from the uninterrupted run's.

    The sizes are trusted: ``data.max_tokens``, ``data.max_sentences``, ``data.eval_batch_size`` and
    ``data.maxi_batch`` are checked where they enter, by
    :class:`~sarnmt.data.loading.translation.TranslationDataModule`.
    """

    def __init__(
        self,
        src_lengths: Sequence[int],
        tgt_lengths: Sequence[int],
        max_tokens: int | None,
        shuffle: bool,
        seed: int = 0,
        maxi_batch: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        max_sentences: int | None = None,
        epoch_source: Callable[[], int] | None = None,
    ) -> None:
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError(f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths")
        if max_tokens is None and max_sentences is None:
            raise ValueError("TokenBatchSampler: give max_tokens, max_sentences or both")
        assert all(n is None or n >= 1 for n in (max_tokens, max_sentences)) and maxi_batch >= 0, (
            "batch sizes reached the sampler unchecked"
        )
        if not 0 <= rank < num_replicas:
            raise ValueError(f"TokenBatchSampler: need 0 <= rank < num_replicas, got {rank=} {num_replicas=}")
        if not shuffle and num_replicas != 1:
            raise ValueError("TokenBatchSampler: evaluation (shuffle=False) is not sharded; use num_replicas=1")
        self.lengths = [max(int(s), int(t)) for s, t in zip(src_lengths, tgt_lengths, strict=True)]
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.shuffle = shuffle
        self.seed = seed
        self.maxi_batch = maxi_batch
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.epoch_source = epoch_source
        self.sampler = _EpochForwarder(self)  # so that Lightning's per-epoch set_epoch reaches this object
        self._cache: tuple[int, list[list[int]]] | None = None
        self._skip: tuple[int | None, int] = (None, 0)

    def skip_next(self, batches: int, epoch: int | None = None) -> None:
        """The next ``iter()`` starts after the first ``batches`` batches of its epoch (a resumed mid-epoch run);
        ``len()`` stays the whole epoch's, as Lightning counts the skipped batches as done.

        :param epoch: skip only if the next ``iter()`` is of this epoch (None: whichever it is): resuming a checkpoint
            of an epoch's end, Lightning either finishes that epoch again (then all its batches are skipped and it
            ends at once) or goes on with the next (then nothing is skipped)."""
        if batches < 0:
            raise ValueError(f"TokenBatchSampler: cannot skip {batches} batches")
        self._skip = (epoch, batches)

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose shuffle the next ``iter()`` and ``len()`` use.

        Lightning calls it at the start of every training epoch (through :attr:`sampler`)."""
        self.epoch = int(epoch)

    def _chunk_size(self) -> int:
        n = len(self.lengths)
        if self.maxi_batch == 0 or n == 0:
            return max(n, 1)
        mean_width = 1 + sum(self.lengths) / n
        per_batch = self.max_sentences or n
        if self.max_tokens is not None:
            per_batch = min(per_batch, max(1, int(self.max_tokens // mean_width)))
        return self.maxi_batch * per_batch

    def _cut(self, order: list[int]) -> list[list[int]]:
        """Greedily cut indices, in the given order, into batches within the budgets."""
        batches: list[list[int]] = []
        batch: list[int] = []
        width = 0
        for i in order:
            new_width = max(width, 1 + self.lengths[i])
            too_many_tokens = self.max_tokens is not None and (len(batch) + 1) * new_width > self.max_tokens
            too_many_sents = self.max_sentences is not None and len(batch) + 1 > self.max_sentences
            if batch and (too_many_tokens or too_many_sents):
                batches.append(batch)
                batch, new_width = [], 1 + self.lengths[i]
            batch.append(i)
            width = new_width
        if batch:
            batches.append(batch)
        return batches

    def _plan(self) -> list[list[int]]:
        """This rank's batches for the current epoch (cached)."""
        if self._cache is not None and self._cache[0] == self.epoch:
            return self._cache[1]
        n = len(self.lengths)
        if not self.shuffle:
            order = sorted(range(n), key=lambda i: (-self.lengths[i], i))
            batches = self._cut(order)
        else:
            rng = random.Random((self.seed & 0xFFFFFFFF) << 32 | (self.epoch & 0xFFFFFFFF))
            perm = list(range(n))
            rng.shuffle(perm)
            size = self._chunk_size()
            batches = []
            for start in range(0, n, size):
                chunk = sorted(perm[start : start + size], key=self.lengths.__getitem__)  # stable sort
                batches.extend(self._cut(chunk))
            rng.shuffle(batches)
            if self.num_replicas > 1:
                per_rank = len(batches) // self.num_replicas
                batches = batches[self.rank : per_rank * self.num_replicas : self.num_replicas]
        self._cache = (self.epoch, batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        (epoch, skip), self._skip = self._skip, (None, 0)
        plan = self._plan()
        yield from plan[skip if epoch in (None, self.epoch) else 0 :]

    def __len__(self) -> int:
        return len(self._plan())
