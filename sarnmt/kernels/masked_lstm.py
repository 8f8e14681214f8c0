"""The ``lstm_encoder`` hot spot without a host read (``static_shapes``: the captured training step).

The LSTM systems' own form (:func:`sarnmt.models.hot_spots.packed_lstm`) runs PyTorch's LSTM over packed sequences,
whose lengths are read on the host: a sync that a CUDA graph cannot hold. :func:`masked_lstm` computes the same as
one Python loop over the padded positions, both directions as one batch, with the state held where a direction
meets padding:

    i, f, g, o = σ, σ, tanh, σ of (W_i x_t + b_i + W_h h_{t-1} + b_h)      (PyTorch's gate order)
    c_t = f ⊙ c_{t-1} + i ⊙ g,   h_t = o ⊙ tanh(c_t)                        where position t is real
    (h_t, c_t) = (h_{t-1}, c_{t-1})                                         at padding

The forward direction meets the padding after the last real token, so its state after the loop is h(n), c(n); the
backward direction runs over the reversed positions, meets the padding first, is held at its zero initial state
there, and ends after the first real token, η(1). The annotations are zero at padding, as packing gives them.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def masked_lstm(rnn: nn.LSTM, emb: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """What :func:`~sarnmt.models.hot_spots.packed_lstm` computes, with no shape or length read from the device.

    :param rnn: one layer, batch-first, uni- or bidirectional (k = 1 or 2 directions), biases on both sides.
    :param emb: shape (B, S, e).  :param src_mask: shape (B, S), True on real positions.
    :returns: the annotations, shape (B, S, k·d), zero at padding; the final hidden and memory cell states, each
        shape (k, B, d) (row 0 forward, after the last real token; row 1 backward, after the first).
    """
    batch, length, _ = emb.shape
    d, k = rnn.hidden_size, 2 if rnn.bidirectional else 1
    suffixes = ("", "_reverse")[:k]

    def directions(x: Tensor) -> list[Tensor]:  # the forward direction's positions, and the backward one's reversed
        return [x, x.flip(1)] if k == 2 else [x]

    weight_ih = torch.stack([getattr(rnn, f"weight_ih_l0{s}") for s in suffixes])  # (k, 4d, e)
    weight_hh = torch.stack([getattr(rnn, f"weight_hh_l0{s}") for s in suffixes])  # (k, 4d, d)
    bias = torch.stack([getattr(rnn, f"bias_ih_l0{s}") + getattr(rnn, f"bias_hh_l0{s}") for s in suffixes])
    inputs = torch.stack(directions(emb)).flatten(1, 2)  # (k, B·S, e)
    gates_x = torch.baddbmm(bias.unsqueeze(1), inputs, weight_ih.mT).view(k, batch, length, 4 * d)
    real = torch.stack(directions(src_mask)).bool().unsqueeze(-1)  # (k, B, S, 1)
    h = c = gates_x.new_zeros(k, batch, d)
    outputs = []
    for t in range(length):
        gates = gates_x[:, :, t] + torch.bmm(h, weight_hh.mT)
        i, f, g, o = gates.chunk(4, dim=-1)
        c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_new = torch.sigmoid(o) * torch.tanh(c_new)
        keep = real[:, :, t]
        h, c = torch.where(keep, h_new, h), torch.where(keep, c_new, c)
        outputs.append(h)
    states = torch.stack(outputs, dim=2)  # (k, B, S, d), the backward direction's positions reversed
    backward = [states[1].flip(1)] if k == 2 else []  # back to the positions' order
    annotations = torch.cat([states[0], *backward], dim=-1) * src_mask.unsqueeze(-1).to(states.dtype)
    return annotations, h, c
