"""The ``gru_update`` hot spot as one autograd node with a hand-written backward.

The GRU's gates and new state from both projections (:func:`sarnmt.models.gru.gru_update`, bias already added)::

    [r; u] = σ(gx_ru + gh_ru)      h̃ = tanh(gx_c + r ⊙ gh_c)      h' = h̃ + u ⊙ (h − h̃)

One node instead of the eight that autograd records for the plain tensor code: the same arithmetic, 5 kernels
forward and 8 backward, half the launches per step and no gradient concatenation (the recurrent loops call this T
times per batch; docs/performance.md).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def gru_update(gates_x: Tensor, gates_h: Tensor, h: Tensor) -> Tensor:
    """h' from the pre-activations, as :func:`sarnmt.models.gru.gru_update`. Inputs of mixed dtypes (under
    autocast) are computed in their promoted dtype.

    :param gates_x: input-side pre-activations, shape (B, 3d).  :param gates_h: hidden-side ones, shape (B, 3d).
    :param h: the previous state, shape (B, d).  :returns: h', shape (B, d).
    """
    dtype = torch.promote_types(torch.promote_types(gates_x.dtype, gates_h.dtype), h.dtype)
    return _GRUUpdate.apply(gates_x.to(dtype), gates_h.to(dtype), h.to(dtype))


class _GRUUpdate(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, gates_x: Tensor, gates_h: Tensor, h: Tensor) -> Tensor:
        d = h.size(-1)
        ru = torch.add(gates_x[:, : 2 * d], gates_h[:, : 2 * d]).sigmoid_()
        hidden_c = gates_h[:, 2 * d :]
        candidate = torch.addcmul(gates_x[:, 2 * d :], ru[:, :d], hidden_c).tanh_()
        diff = h - candidate
        ctx.save_for_backward(ru, candidate, hidden_c, diff)
        return torch.addcmul(candidate, ru[:, d:], diff)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        ru, candidate, hidden_c, diff = ctx.saved_tensors
        d = candidate.size(-1)
        grad_h = grad * ru[:, d:]  # ∂h'/∂h = u
        grad_x = grad.new_empty(grad.size(0), 3 * d)
        grad_c = grad_x[:, 2 * d :]  # through tanh: (1 − u) g ⊙ (1 − h̃²)
        torch.ops.aten.tanh_backward.grad_input(grad - grad_h, candidate, grad_input=grad_c)
        grad_ru = grad_x[:, : 2 * d]  # through σ: [g_c ⊙ gh_c; g ⊙ (h − h̃)] ⊙ σ'
        torch.mul(grad_c, hidden_c, out=grad_ru[:, :d])
        torch.mul(grad, diff, out=grad_ru[:, d:])
        torch.ops.aten.sigmoid_backward.grad_input(grad_ru, ru, grad_input=grad_ru)
        grad_hidden = torch.empty_like(grad_x)  # the same, but r ⊙ g_c for the candidate's hidden part
        grad_hidden[:, : 2 * d] = grad_ru
        torch.mul(grad_c, ru[:, :d], out=grad_hidden[:, 2 * d :])
        return grad_x, grad_hidden, grad_h
