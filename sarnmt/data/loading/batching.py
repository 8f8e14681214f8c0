"""Batches of parallel sentences: the tensors, their masks, and the collate function.

Conventions follow dl4mt (docs/models.md §Conventions; the ids are defined in :mod:`sarnmt.data.text.codecs`):
index 0 is EOS and is also the padding value; there is no BOS token. Every sentence ends with exactly one EOS, which
the encoder reads and the decoder is trained to emit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from sarnmt.data.text.codecs import EOS


@dataclass
class Batch:
    """A padded batch of sentence pairs (batch-first).

    :param src: source ids, shape (B, S), each row ``x_1 .. x_m EOS`` then padding (0).
    :param src_mask: shape (B, S), True on real positions (EOS included).
    :param tgt: target ids, shape (B, T), each row ``y_1 .. y_n EOS`` then padding (0).
    :param tgt_mask: shape (B, T), True on real positions (EOS included).
    :param ids: shape (B,), the index of each pair in its split, so outputs can be put back in corpus order.
    """

    src: Tensor
    src_mask: Tensor
    tgt: Tensor
    tgt_mask: Tensor
    ids: Tensor

    @property
    def size(self) -> int:
        return self.src.size(0)

    @property
    def num_tgt_tokens(self) -> int:
        return int(self.tgt_mask.sum())


def pad_sequences(seqs: list[list[int]]) -> tuple[Tensor, Tensor]:
    """Append EOS to every sequence and pad with EOS (0) to the longest.

    :returns: ids of shape (B, L) and a boolean mask of shape (B, L), L = 1 + max length.
    """
    width = 1 + max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), EOS, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.bool)
    for row, seq in enumerate(seqs):
        if seq:
            ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, : len(seq) + 1] = True
    return ids, mask


def collate(examples: list[tuple[int, list[int], list[int]]]) -> Batch:
    """Collate ``(index, source ids, target ids)`` triples (ids without EOS) into a :class:`Batch`."""
    ids = torch.as_tensor([e[0] for e in examples], dtype=torch.long)
    src, src_mask = pad_sequences([e[1] for e in examples])
    tgt, tgt_mask = pad_sequences([e[2] for e in examples])
    return Batch(src=src, src_mask=src_mask, tgt=tgt, tgt_mask=tgt_mask, ids=ids)
