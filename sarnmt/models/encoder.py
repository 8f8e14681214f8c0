"""Bidirectional GRU encoder (paper eq. 2; appendix A.1; docs/models.md §Encoder and §Initial state).

The source embedding table is shared by both directions. The parameters are those of PyTorch's GRU with the
hidden-side bias held at zero as a buffer (not a parameter), which is exactly dl4mt's cell (bias on the input side,
outside the reset gate). The backward direction starts at each sentence's last real token with a zero state
(dl4mt's masking). Running it is the ``bigru`` hot spot: its own form is PyTorch's GRU over packed sequences
(:meth:`DL4MTBiGRU.packed`; cuDNN on a GPU); on a CPU :func:`sarnmt.kernels.encoder.unrolled_bigru` computes the
same as one Python loop, which trains faster there (:mod:`sarnmt.kernels`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from sarnmt.models.init import init_linear_, init_recurrent_, normal_


def over_packed(rnn: nn.RNNBase, emb: Tensor, src_mask: Tensor) -> tuple[Tensor, Any]:
    """``rnn`` (batch-first) over the packed sequences of a padded batch, so that each direction starts and ends at a
    sentence's real tokens (cuDNN on a GPU); the lengths are read on the host.

    :param emb: shape (B, S, e).  :param src_mask: shape (B, S), True on real positions.
    :returns: the outputs, shape (B, S, k·d), zero at padding, and ``rnn``'s final state (each direction's after its
        last real token)."""
    lengths = src_mask.sum(dim=1).cpu()
    out, final = rnn(pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False))
    return pad_packed_sequence(out, batch_first=True, total_length=emb.size(1))[0], final


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
        return over_packed(self, emb, src_mask)[0]


class BiGRUEncoder(nn.Module):
    """Embeds and encodes the source; also computes the decoder's initial state.

    :param vocab_size: V_src.
    :param emb_dim: e.
    :param hidden_dim: d; annotations have size 2d.
    :param dropout_embeddings: dropout on source embeddings (0 in dl4mt's code).
    :param dropout_hidden: dropout on the annotations (0 in dl4mt's code).
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        dropout_embeddings: float,
        dropout_hidden: float,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.rnn = DL4MTBiGRU(emb_dim, hidden_dim)
        self.init_state = init_linear_(nn.Linear(2 * hidden_dim, hidden_dim))  # dl4mt ff_state
        self.dropout_embeddings = nn.Dropout(dropout_embeddings)
        self.dropout_hidden = nn.Dropout(dropout_hidden)
        normal_(self.embedding.weight)

    def forward(
        self, src: Tensor, src_mask: Tensor, bigru: Callable[[nn.GRU, Tensor, Tensor], Tensor] = DL4MTBiGRU.packed
    ) -> tuple[Tensor, Tensor]:
        """Encode a padded batch.

        :param src: source ids, shape (B, S), EOS included.
        :param src_mask: shape (B, S), True on real positions.
        :param bigru: the ``bigru`` hot spot (the call's :class:`~sarnmt.models.hot_spots.HotSpots`).
        :returns: annotations h of shape (B, S, 2d) (zero at padding) and the initial decoder state
            s_0 = tanh(W_init · mean_j h_j + b_init) of shape (B, d), the mean taken over real positions.
        """
        emb = self.dropout_embeddings(self.embedding(src))
        annotations = bigru(self.rnn, emb, src_mask)  # eq. 2, zero at padding
        lengths = src_mask.sum(dim=1, keepdim=True).to(annotations.dtype)
        mean = annotations.sum(dim=1) / lengths
        s0 = torch.tanh(self.init_state(mean))
        return self.dropout_hidden(annotations), s0
