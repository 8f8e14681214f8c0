"""Explicit decoding state. Nothing about a decoding run is stored on modules.

:class:`SourceMemory` holds what the encoder computed once per batch; :class:`DecoderState` holds what changes from
step to step, including each variant's own tensors. Both have one generic :meth:`reorder`, which selects rows of
every tensor along the batch dimension, so search code never needs to know which decoder variant it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

import torch
from torch import Tensor


def _mapped(value: object, fn: Callable[[Tensor], Tensor]) -> object:
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {key: _mapped(item, fn) for key, item in value.items()}
    return value


class _Reorderable:
    def map(self, fn: Callable[[Tensor], Tensor]):
        """``fn`` applied to every tensor (those of dict fields too).  :returns: a new object of the same type."""
        return replace(self, **{f.name: _mapped(getattr(self, f.name), fn) for f in fields(self)})

    def tensors(self) -> list[Tensor]:
        """Every tensor, in a fixed order (fields in order, a dict's by key), the same for two objects of the same
        structure: to copy one into another's buffers."""
        found: list[Tensor] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict):
                found += [value[key] for key in sorted(value)]
            elif isinstance(value, Tensor):
                found.append(value)
        return found

    def reorder(self, index: Tensor):
        """Rows ``index`` of every tensor (batch-first), e.g. to follow beam back-pointers or to drop finished
        sentences; a shape-() tensor (a captured step's count) is no row and stays.  :param index: shape (B',),
        long.  :returns: a new object of the same type."""
        return self.map(lambda value: value.index_select(0, index) if value.dim() > 0 else value)


@dataclass(frozen=True)
class SourceMemory(_Reorderable):
    """:param annotations: h, shape (B, S, 2d) (what the context is a weighted sum of; the fixed-context LSTM
        keeps its one vector h(n) here, shape (B, 1, d)).  :param keys: the attention's projection of the annotations,
        computed once (W_a h + b_a for the cGRU), shape (B, S, ·).
    :param mask: shape (B, S), True on real source positions.
    :param beams: how many consecutive decoder-state rows read each memory row: 1 in training and greedy search,
        k in beam search (state row b·k + i is beam i of sentence b), so the source is never copied k times.
        :meth:`reorder` selects sentences, not state rows."""

    annotations: Tensor
    keys: Tensor
    mask: Tensor
    beams: int = 1

    def with_beams(self, beams: int) -> SourceMemory:
        """The same memory read by ``beams`` state rows per sentence."""
        return replace(self, beams=beams)


@dataclass(frozen=True)
class DecoderState(_Reorderable):
    """The state before step t (:meth:`first`: before step 1).

    :param hidden: s_{t-1}, shape (B, d).
    :param steps: t - 1, the number of steps taken (the same for every row): a long tensor of shape () on the
        state's device, so that a step reads it there (a step never builds a tensor from a host number, and a
        captured step reads it from its buffer, not from a constant frozen at capture).
    :param variant: the variant's tensors (histories, running sums), each batch-first.
    :param recurrent: the decoder's own tensors besides s_{t-1}, each batch-first (an LSTM's memory cell, the
        input-feeding output o_{t-1}); empty for the cGRU.
    """

    hidden: Tensor
    steps: Tensor
    variant: dict[str, Tensor] = field(default_factory=dict)
    recurrent: dict[str, Tensor] = field(default_factory=dict)

    @classmethod
    def first(
        cls, hidden: Tensor, variant: dict[str, Tensor] | None = None, recurrent: dict[str, Tensor] | None = None
    ) -> DecoderState:
        """The state before step 1: no step taken.  :param hidden: s_0, shape (B, d)."""
        steps = hidden.new_zeros((), dtype=torch.long)
        return cls(hidden=hidden, steps=steps, variant=variant or {}, recurrent=recurrent or {})
