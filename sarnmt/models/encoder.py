"""Bidirectional GRU encoder (paper eq. 2; appendix A.1; docs/models.md §Encoder and §Initial state).

The source embedding table is shared by both directions. The parameters are those of PyTorch's GRU with the
hidden-side bias held at zero as a buffer (not a parameter), which is exactly dl4mt's cell (bias on the input side,
outside the reset gate). The backward direction starts at each sentence's last real token with a zero state
(dl4mt's masking). Two ways to run it, with the same results, chosen by :mod:`sarnmt.models.kernels`:

- on a GPU, PyTorch's fused GRU over packed sequences (cuDNN runs the whole recurrence, forward and backward);
- on the CPU, :meth:`DL4MTBiGRU.unrolled`: both directions as one batch in one Python loop, the input projections of
  all positions and both directions as one product before it, U h through :class:`~sarnmt.models.loop_linear.LoopLinear`
  and the gates through :func:`~sarnmt.models.gru.gru_update`. PyTorch's CPU GRU has no fused backward (autograd
  records every gate operation of every step and adds every step's weight gradient), so the loop trains faster
  there (docs/performance.md).
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from sarnmt.models.gru import gru_update, gru_update_plain
from sarnmt.models.init import init_linear_, init_recurrent_, normal_
from sarnmt.models.kernels import FUSED, KernelChoice, Kernels
from sarnmt.models.loop_linear import LoopLinear


class DL4MTBiGRU(nn.GRU):
    """``nn.GRU`` (one layer, bidirectional, batch-first) whose ``bias_hh`` vectors are zero buffers."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size, batch_first=True, bidirectional=True)
        for name in ("bias_hh_l0", "bias_hh_l0_reverse"):
            zero = torch.zeros_like(getattr(self, name), requires_grad=False)
            delattr(self, name)
            self.register_buffer(name, zero, persistent=False)
        self._init_flat_weights()

    def reset_parameters(self) -> None:  # called by nn.GRU.__init__
        init_recurrent_(self)

    def packed(self, emb: Tensor, src_mask: Tensor) -> Tensor:
        """PyTorch's GRU over packed sequences.

        :param emb: embedded source, shape (B, S, e).  :param src_mask: shape (B, S), True on real positions.
        :returns: [→h_j; ←h_j], shape (B, S, 2d), zero at padding.
        """
        lengths = src_mask.sum(dim=1).cpu()
        out, _ = self(pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False))
        return pad_packed_sequence(out, batch_first=True, total_length=emb.size(1))[0]

    def unrolled(self, emb: Tensor, src_mask: Tensor, kernels: Kernels = FUSED) -> Tensor:
        """The same as :meth:`packed`, as one Python loop over positions running both directions as one batch.

        Step t advances the forward direction at position t and the backward one at position S-1-t: their states
        are one (2B, d) tensor, U h is one batched product over the two directions' matrices, and the gates are one
        :func:`~sarnmt.models.gru.gru_update`. The forward direction needs no mask (its states at padding are zeroed
        at the end and feed nothing real); the backward direction meets the padding first and is held at zero there
        by multiplying with the mask.

        :param emb: shape (B, S, e).  :param src_mask: shape (B, S).  :param kernels: whether U h goes through
            :class:`~sarnmt.models.loop_linear.LoopLinear` (``loop_weights``) and the gates through
            :func:`~sarnmt.models.gru.gru_update` (``gru_update``).  :returns: shape (B, S, 2d), zero at padding.
        """
        batch, length, _ = emb.shape
        d = self.hidden_size
        weight_ih = torch.stack([self.weight_ih_l0, self.weight_ih_l0_reverse])  # (2, 3d, e)
        bias_ih = torch.stack([self.bias_ih_l0, self.bias_ih_l0_reverse]).unsqueeze(1)  # (2, 1, 3d)
        inputs = torch.stack([emb, emb.flip(1)]).flatten(1, 2)  # (2, B·S, e): the backward direction reversed
        gates = torch.baddbmm(bias_ih, inputs, weight_ih.mT).view(2, batch, length, 3 * d)
        # step t's (2B, 3d) input gates as views: unbind's backward stacks them once (a slice's builds zeros)
        steps = [g.view(2 * batch, 3 * d) for g in gates.unbind(2)]
        keep = torch.stack([torch.ones_like(src_mask), src_mask.flip(1)], dim=1)  # (B, 2, S): 1 for forward
        keep = keep.permute(2, 1, 0).reshape(length, 2 * batch, 1).to(gates.dtype)
        weight_hh = torch.stack([self.weight_hh_l0, self.weight_hh_l0_reverse])  # (2, 3d, d)
        project = LoopLinear(weight_hh) if kernels.loop_weights else partial(torch.matmul, other=weight_hh.mT)
        update = gru_update if kernels.gru_update else gru_update_plain
        h = gates.new_zeros(2 * batch, d)
        states: list[Tensor] = [h] * (2 * length)  # set in the loop: position j's forward state at 2j, backward 2j + 1
        for t in range(length):
            h = update(steps[t], project(h.view(2, batch, d)).view(2 * batch, 3 * d), h) * keep[t]
            states[2 * t], states[2 * (length - 1 - t) + 1] = h.view(2, batch, d).unbind(0)
        return torch.stack(states, dim=1).view(batch, length, 2 * d) * src_mask.unsqueeze(-1).to(gates.dtype)


class BiGRUEncoder(nn.Module):
    """Embeds and encodes the source; also computes the decoder's initial state.

    :param vocab_size: V_src.
    :param emb_dim: e.
    :param hidden_dim: d; annotations have size 2d.
    :param dropout_embeddings: dropout on source embeddings (0 in dl4mt's code).
    :param dropout_hidden: dropout on the annotations (0 in dl4mt's code).
    :param kernels: the model's kernel choice (:mod:`sarnmt.models.kernels`): the unrolled loop or the packed GRU.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        dropout_embeddings: float,
        dropout_hidden: float,
        kernels: KernelChoice | None = None,
    ) -> None:
        super().__init__()
        self.kernels = kernels if kernels is not None else KernelChoice()
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.rnn = DL4MTBiGRU(emb_dim, hidden_dim)
        self.init_state = init_linear_(nn.Linear(2 * hidden_dim, hidden_dim))  # dl4mt ff_state
        self.dropout_embeddings = nn.Dropout(dropout_embeddings)
        self.dropout_hidden = nn.Dropout(dropout_hidden)
        normal_(self.embedding.weight)

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
        """Encode a padded batch.

        :param src: source ids, shape (B, S), EOS included.
        :param src_mask: shape (B, S), True on real positions.
        :returns: annotations h of shape (B, S, 2d) (zero at padding) and the initial decoder state
            s_0 = tanh(W_init · mean_j h_j + b_init) of shape (B, d), the mean taken over real positions.
        """
        emb = self.dropout_embeddings(self.embedding(src))
        kernels = self.kernels(emb)
        if kernels.unrolled_encoder:
            annotations = self.rnn.unrolled(emb, src_mask, kernels)  # zero at padding
        else:
            annotations = self.rnn.packed(emb, src_mask)
        lengths = src_mask.sum(dim=1, keepdim=True).to(annotations.dtype)
        mean = annotations.sum(dim=1) / lengths
        s0 = torch.tanh(self.init_state(mean))
        return self.dropout_hidden(annotations), s0
