"""The hot spots of the models: the interface (:class:`HotSpots`) and the model's own implementation of each
(:data:`EQUATIONS`), the equations as the paper writes them.

A model resolves its :class:`~sarnmt.kernels.choice.KernelChoice` once per call (``encode``, ``step``, ``forward``,
``nll``) into one :class:`HotSpots` and passes it down; ``kernels=plain`` runs :data:`EQUATIONS` alone, the others
put the kernels of :mod:`sarnmt.kernels` in their place where the configuration, the device and autograd allow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property, partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.kernels import KernelChoice
from sarnmt.models.attention import SourceAttention, energy_scores
from sarnmt.models.encoder import DL4MTBiGRU, over_packed
from sarnmt.models.gru import gru_update
from sarnmt.models.positions import selected_rows
from sarnmt.models.state import SourceMemory


@dataclass(frozen=True)
class HotSpots:
    """The implementation each hot spot runs in one call: the model's equation, or a kernel computing the same.

    :param gru_update: ``(gates_x (B, 3d), gates_h (B, 3d), h (B, d)) -> h' (B, d)``: the GRU's gates and new
        state from the input- and hidden-side pre-activations (docs/models.md eqs. A.1a-d, C2-C5, C9-C12).
    :param step_linear: ``(weight (out, in), bias (out,) or None) -> map``: a linear map that a recurrent loop
        applies at every step, ``map(x (B, in)) -> (B, out)``; build one per teacher-forced loop (or search step).
    :param step_attention: ``(attention, memory, attention_scores) -> attend``: the source attention of one loop
        (or search step) over ``memory`` (a :class:`~sarnmt.models.state.SourceMemory`), its energies by
        ``attention_scores``, ``attend(U_a s'_t (B·g, 2d)) -> (c_t (B·g, 2d), α_t (B·g, S))`` (paper eqs. 5-7).
    :param attention_scores: ``(keys (B, S, 2d), query (B, g, 1, 2d), v (2d,), c ()) -> e (B, g, S)``: the
        energies v_aᵀ tanh(k_j + q) + c (eq. C8).
    :param bigru: ``(rnn, emb (B, S, e), src_mask (B, S)) -> annotations (B, S, 2d)``: the encoder's bi-GRU
        (eq. 2, A.1a-e), zero at padding.
    :param lstm_encoder: ``(rnn, emb (B, S, e), src_mask (B, S)) -> (annotations (B, S, k·d), h (k, B, d),
        c (k, B, d))``: the LSTM systems' encoder over k = 1 or 2 directions (seeds 003 and 004), annotations zero
        at padding, each direction's final states after its last real token.
    :param output_rows: ``(mask (B, T) bool) -> rows (N,) or None``: the positions the output layer reads in
        training, their indices in the flattened grid (the real ones), or None for all B·T (static shapes).
    :param output_nll: ``(features (N, e), weight (V, e), bias (V,) or None, target (N,)) -> nll (N,)``:
        −log softmax(features Wᵀ + b)[target], float32 (float64 for float64 inputs) (eq. 1, A.3g).
    """

    gru_update: Callable[[Tensor, Tensor, Tensor], Tensor]
    step_linear: Callable[[Tensor, Tensor | None], Callable[[Tensor], Tensor]]
    step_attention: Callable[[Any, Any, Any], Callable[[Tensor], tuple[Tensor, Tensor]]]
    attention_scores: Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
    bigru: Callable[[Any, Tensor, Tensor], Tensor]
    lstm_encoder: Callable[[Any, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]
    output_rows: Callable[[Tensor], Tensor | None]
    output_nll: Callable[[Tensor, Tensor, Tensor | None, Tensor], Tensor]

    @cached_property
    def one_step(self) -> HotSpots:
        """The hot spots of a single step outside a loop (search): a step's maps are the layers themselves
        (deferring gradients pays over a loop only); formed once per resolved set."""
        return replace(self, step_linear=EQUATIONS.step_linear, step_attention=EQUATIONS.step_attention)


def step_linear(weight: Tensor, bias: Tensor | None) -> Callable[[Tensor], Tensor]:
    """x Wᵀ + b, applied at each step.  :param weight: W, shape (out, in).  :param bias: b, shape (out,), or None."""
    return partial(F.linear, weight=weight, bias=bias)


def step_attention(
    attention: SourceAttention, memory: SourceMemory, scores: Callable[..., Tensor]
) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
    """The source attention over ``memory`` from the projected query (:meth:`SourceAttention.attend`), its energies
    by ``scores`` (the ``attention_scores`` hot spot)."""
    return partial(attention.attend, memory=memory, scores=scores)


def packed_lstm(rnn: nn.LSTM, emb: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """PyTorch's LSTM over packed sequences (:func:`~sarnmt.models.encoder.over_packed`; the lengths are read on the
    host).  :param rnn: one layer, batch-first.  :param emb: shape (B, S, e).  :param src_mask: shape (B, S).
    :returns: the annotations (B, S, k·d), zero at padding, and the final hidden and memory cell states, each
    (k, B, d)."""
    annotations, (hidden, cell) = over_packed(rnn, emb, src_mask)
    return annotations, hidden, cell


def output_nll(features: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor) -> Tensor:
    """−log softmax(features Wᵀ + b)[target] (eq. 1 over the output layer's logits; float32, or float64 for a
    float64 model).  :param features: shape (N, e).  :param weight: W_o, shape (V, e).  :param bias: shape (V,), or
    None.  :param target: ids, shape (N,).  :returns: shape (N,)."""
    logits = F.linear(features, weight, bias)
    return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), target, reduction="none")


EQUATIONS = HotSpots(
    gru_update=gru_update,
    step_linear=step_linear,
    step_attention=step_attention,
    attention_scores=energy_scores,
    bigru=DL4MTBiGRU.packed,
    lstm_encoder=packed_lstm,
    output_rows=selected_rows,
    output_nll=output_nll,
)


def kernel_choice(choice: str = "auto") -> KernelChoice[HotSpots]:
    """A model's kernel choice: ``auto``, ``fused`` or ``plain`` over :data:`EQUATIONS`."""
    return KernelChoice(choice, EQUATIONS)
