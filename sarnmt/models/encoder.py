"""Bidirectional GRU encoder (paper eq. 2; appendix A.1; reference note §2.2-2.3).

The source embedding table is shared by both directions. Each direction is PyTorch's fused GRU with the
hidden-side bias held at zero as a buffer (not a parameter), which is exactly dl4mt's cell (bias on the input side,
outside the reset gate). Packed sequences reproduce dl4mt's masking: the backward pass starts at each sentence's
last real token with a zero state.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from sarnmt.models.init import init_linear_, normal_, orthogonal_blocks_, zeros_


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
        for name, param in self.named_parameters(recurse=False):
            if name.startswith("weight_ih"):
                normal_(param)
            elif name.startswith("weight_hh"):
                orthogonal_blocks_(param, self.hidden_size)
            else:
                zeros_(param)


class BiGRUEncoder(nn.Module):
    """Embeds and encodes the source; also computes the decoder's initial state.

    :param vocab_size: V_src.
    :param emb_dim: e.
    :param hidden_dim: d; annotations have size 2d.
    :param dropout_embeddings: dropout on source embeddings (0 in dl4mt's code).
    :param dropout_hidden: dropout on the annotations (0 in dl4mt's code).
    """

    def __init__(
        self, vocab_size: int, emb_dim: int, hidden_dim: int, dropout_embeddings: float, dropout_hidden: float
    ) -> None:
        super().__init__()
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
        lengths = src_mask.sum(dim=1)
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        annotations, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        mask = src_mask.unsqueeze(-1).to(annotations.dtype)
        mean = (annotations * mask).sum(dim=1) / lengths.unsqueeze(-1).to(annotations.dtype)
        s0 = torch.tanh(self.init_state(mean))
        return self.dropout_hidden(annotations), s0
