"""The ``bigru`` hot spot as one Python loop running both directions as one batch (``kernels.unrolled_encoder``).

The model's own form is PyTorch's GRU over packed sequences (:meth:`sarnmt.models.encoder.DL4MTBiGRU.packed`;
cuDNN on a GPU, which is faster there). On a CPU PyTorch's GRU has no fused backward: autograd records every gate
operation of every step and adds every step's weight gradient, so this loop trains faster there
(docs/performance.md): the input projections of all positions and both directions are one product before it, U h
goes through :class:`~sarnmt.kernels.loop_linear.LoopLinear` (with ``kernels.loop_weights``) and the gates through
the ``gru_update`` hot spot.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn

from sarnmt.kernels.loop_linear import LoopLinear


def unrolled_bigru(
    rnn: nn.GRU,
    emb: Tensor,
    src_mask: Tensor,
    *,
    gru_update: Callable[[Tensor, Tensor, Tensor], Tensor],
    loop_weights: bool,
) -> Tensor:
    """What ``rnn.packed(emb, src_mask)`` computes, as one Python loop over positions.

    Step t advances the forward direction at position t and the backward one at position S-1-t: their states are
    one (2B, d) tensor, U h is one batched product over the two directions' matrices, and the gates are one
    ``gru_update``. The forward direction needs no mask (its states at padding are zeroed at the end and feed
    nothing real); the backward direction meets the padding first and is held at zero there by multiplying with
    the mask.

    :param rnn: a :class:`~sarnmt.models.encoder.DL4MTBiGRU` (one layer, bidirectional, its hidden-side biases
        zero).  :param emb: shape (B, S, e).  :param src_mask: shape (B, S).
    :param gru_update: the ``gru_update`` hot spot's implementation.
    :param loop_weights: U h through :class:`~sarnmt.kernels.loop_linear.LoopLinear` (the weight gradient formed
        once after the loop) instead of ``torch.matmul``.
    :returns: [→h_j; ←h_j], shape (B, S, 2d), zero at padding.
    """
    batch, length, _ = emb.shape
    d = rnn.hidden_size
    weight_ih = torch.stack([rnn.weight_ih_l0, rnn.weight_ih_l0_reverse])  # (2, 3d, e)
    bias_ih = torch.stack([rnn.bias_ih_l0, rnn.bias_ih_l0_reverse]).unsqueeze(1)  # (2, 1, 3d)
    inputs = torch.stack([emb, emb.flip(1)]).flatten(1, 2)  # (2, B·S, e): the backward direction reversed
    gates = torch.baddbmm(bias_ih, inputs, weight_ih.mT).view(2, batch, length, 3 * d)
    # step t's (2B, 3d) input gates as views: unbind's backward stacks them once (a slice's builds zeros)
    steps = [g.view(2 * batch, 3 * d) for g in gates.unbind(2)]
    keep = torch.stack([torch.ones_like(src_mask), src_mask.flip(1)], dim=1)  # (B, 2, S): 1 for forward
    keep = keep.permute(2, 1, 0).reshape(length, 2 * batch, 1).to(gates.dtype)
    weight_hh = torch.stack([rnn.weight_hh_l0, rnn.weight_hh_l0_reverse])  # (2, 3d, d)
    project = LoopLinear(weight_hh) if loop_weights else partial(torch.matmul, other=weight_hh.mT)
    h = gates.new_zeros(2 * batch, d)
    states: list[Tensor] = [h] * (2 * length)  # set in the loop: position j's forward state at 2j, backward 2j + 1
    for t in range(length):
        h = gru_update(steps[t], project(h.view(2, batch, d)).view(2 * batch, 3 * d), h) * keep[t]
        states[2 * t], states[2 * (length - 1 - t) + 1] = h.view(2, batch, d).unbind(0)
    return torch.stack(states, dim=1).view(batch, length, 2 * d) * src_mask.unsqueeze(-1).to(gates.dtype)
