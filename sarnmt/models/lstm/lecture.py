"""The LSTM encoder-decoders of the lecture notes (seed 003, Collins): without and with attention.

Without attention (:class:`FixedContextLSTM`), a unidirectional encoder's last state h(n) is the context::

    γ(j) = lstm([y_{j-1}; h(n)], γ(j-1); θ_d)          γ(0) = 0, memory cell 0
    l(j) = V·[γ(j); y_{j-1}; h(n)] + b                 p(y_j | ...) = softmax(l(j))

With attention (:class:`AttentionLSTM`), a bi-LSTM encoder u(i) = [h(i); η(i)] and a context per step::

    s_{i,j} = a(γ(j-1), u(i); θ_a) = v_aᵀ tanh(W_a u(i) + b_a + U_a γ(j-1)) + c      a_{i,j} = softmax_i(s_{·,j})
    c(j) = Σ_i a_{i,j} u(i)      γ(j) = lstm([y_{j-1}; c(j)], γ(j-1); θ_d)      l(j) = V·[γ(j); y_{j-1}; c(j)] + b

What the notes leave open, chosen here: a(·) is the feed-forward network of Bahdanau et al. (one tanh layer of
width 2d, the cGRU's :class:`~sarnmt.models.attention.SourceAttention`), the notes' "e.g., a feedforward
network"; V·[γ; y; c] is split as V_γ γ + V_y y + V_c c with the one bias b on V_y, which is the decoder variant's
term R_j = V_y y_{j-1} + b, so the paper's residual connections replace y_{j-1} by d_j (``decoder=mean_residual``,
``self_attentive_content``, ...); y_0 is the start symbol's learned embedding. The notes decode greedily; search
here is any ``decoding=``. Optional dropout on γ(j) and c(j) before V (``dropout_hidden``; none in the notes).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from sarnmt.models.attention import SourceAttention
from sarnmt.models.init import PAPER_STD, init_linear_, init_recurrent_, normal_std
from sarnmt.models.lstm.base import LSTMTranslator
from sarnmt.models.lstm.encoder import LSTMEncoder
from sarnmt.models.state import DecoderState, SourceMemory


class _LectureLSTM(LSTMTranslator):
    """The decoder both of the notes' systems share; a subclass says where the context c(j) comes from.

    :param src_vocab_size: V_src.  :param tgt_vocab_size: V.  :param emb_dim: e.  :param hidden_dim: d.
    :param variant: the ``decoder=`` partial (R_j of width V).  :param dropout_embeddings: on both sides' embeddings.
    :param dropout_hidden: on γ(j) and c(j) before the output layer.  :param init_std: the Gaussian's scale.
    :param kernels: see :class:`~sarnmt.models.lstm.base.LSTMTranslator`.
    """

    bidirectional: bool = False

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        variant: Callable[..., nn.Module],
        dropout_embeddings: float = 0.0,
        dropout_hidden: float = 0.0,
        init_std: float = PAPER_STD,
        kernels: str = "auto",
    ) -> None:
        context_dim = 2 * hidden_dim if self.bidirectional else hidden_dim
        with normal_std(init_std):
            super().__init__(tgt_vocab_size, emb_dim, hidden_dim, variant, dropout_embeddings, kernels)
            self.encoder = LSTMEncoder(src_vocab_size, emb_dim, hidden_dim, self.bidirectional, dropout_embeddings)
            self.cell = nn.LSTMCell(emb_dim + context_dim, hidden_dim)  # θ_d
            init_recurrent_(self.cell)
            self.output = init_linear_(nn.Linear(hidden_dim + context_dim, tgt_vocab_size, bias=False))  # [V_γ V_c]
            self.dropout_hidden = nn.Dropout(dropout_hidden)
            self.attention = self.build_attention(hidden_dim)

    def build_attention(self, hidden_dim: int) -> nn.Module | None:
        """θ_a, built last (after the output layer) and with the same Gaussian scale; None without attention."""
        return None

    def recurrence(self, step_input, query, state, maps):
        """γ(j) from y_{j-1} (``step_input``) and c(j) = ``maps``(γ(j-1)).  :returns: γ(j), its memory cell, the
        output layer's features [γ(j); c(j)] after dropout, the attention or None."""
        context, weights = maps(state.hidden)
        hidden, cell = self.cell(torch.cat([step_input, context], dim=1), (state.hidden, state.recurrent["cell"]))
        features = torch.cat([self.dropout_hidden(hidden), self.dropout_hidden(context)], dim=1)
        return hidden, {"cell": cell}, (features,), weights

    def scores(self, features: Tensor, target_context: Tensor | None) -> Tensor:
        """l(j) = [V_γ V_c]·[γ(j); c(j)] + R_j.  :param features: shape (..., d + |c|).
        :param target_context: R_j = V_y y_{j-1} + b (or the residual d_j's), shape (..., V)."""
        return self.output(features) + target_context

    def zero_state(self, like: Tensor) -> DecoderState:
        """γ(0) = 0 and a zero memory cell, the notes' "e.g., vector of all zeros".  :param like: shape (B, ·)."""
        zeros = like.new_zeros(like.size(0), self.hidden_dim)
        return DecoderState.first(zeros, self.variant.init_state(zeros), {"cell": zeros})


class FixedContextLSTM(_LectureLSTM):
    """Seed 003's encoder-decoder without attention: c(j) = h(n) at every step (``model=lstm_fixed_context``)."""

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[SourceMemory, DecoderState]:
        """:returns: a memory holding h(n) as its one annotation, shape (B, 1, d); the state before step 1."""
        _, final, _ = self.encoder(src, src_mask, self.kernels(src).lstm_encoder)
        context = final[0].unsqueeze(1)  # (B, 1, d)
        memory = SourceMemory(annotations=context, keys=context, mask=src_mask.new_ones(src.size(0), 1))
        return memory, self.zero_state(final[0])

    def source_context(self, memory, spots):
        """c(j) = h(n) for every state row, whatever the query."""
        return lambda query: (memory.annotations[:, 0].repeat_interleave(memory.beams, dim=0), None)


class AttentionLSTM(_LectureLSTM):
    """Seed 003's bi-LSTM encoder with feed-forward attention queried by γ(j-1) (``model=lstm_ff_attention``)."""

    bidirectional = True

    def build_attention(self, hidden_dim: int) -> nn.Module:
        return SourceAttention(hidden_dim, 2 * hidden_dim)  # θ_a

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[SourceMemory, DecoderState]:
        """:returns: u(1..n) and their projected keys, each (B, S, 2d); the state before step 1."""
        annotations, final, _ = self.encoder(src, src_mask, self.kernels(src).lstm_encoder)
        memory = SourceMemory(annotations=annotations, keys=self.attention.project_keys(annotations), mask=src_mask)
        return memory, self.zero_state(final[0])

    def source_context(self, memory, spots):
        """c(j) and a_{·,j} from γ(j-1), the energies by the ``attention_scores`` hot spot."""
        return lambda query: self.attention(query, memory, spots.attention_scores)
