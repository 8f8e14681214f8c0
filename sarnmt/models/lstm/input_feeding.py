"""The tutorial's attention NMT (seed 004): bi-LSTM encoder, LSTM decoder with input feeding and multiplicative
attention (Luong et al. 2015's design, as in Stanford's CS224n assignment)::

    h_0^dec = W_h [←h_1^enc; →h_m^enc]      c_0^dec = W_c [←c_1^enc; →c_m^enc]      o_0 = 0
    h_t^dec, c_t^dec = LSTM([y_t; o_{t-1}], h_{t-1}^dec, c_{t-1}^dec)
    e_{t,i} = (h_t^dec)ᵀ W_attProj h_i^enc      α_t = softmax(e_t)      a_t = Σ_i α_{t,i} h_i^enc
    o_t = Dropout(tanh(W_u [a_t; h_t^dec]))      P_t = softmax(W_vocab o_t)

No matrix has a bias (the tutorial writes none). y_1 is the start token: a learned embedding here. The output
layer has no previous-word term, so the paper's residual connections have nothing to replace: the only decoder is
``decoder=none``. The output layer and the loss are the ``output_nll`` hot spot, as the cGRU's (one
operation unless ``kernels=plain``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from sarnmt.models.attention import BilinearAttention
from sarnmt.models.init import PAPER_STD, init_linear_, init_recurrent_, normal_std
from sarnmt.models.lstm.base import LSTMTranslator
from sarnmt.models.lstm.encoder import LSTMEncoder
from sarnmt.models.state import DecoderState, SourceMemory


class InputFeedingLSTM(LSTMTranslator):
    """``model=lstm_input_feeding``.

    :param src_vocab_size: V_src.  :param tgt_vocab_size: V.  :param emb_dim: e.  :param hidden_dim: h.
    :param variant: the ``decoder=none`` partial (no parameters, never called).
    :param dropout: the tutorial's dropout on o_t.  :param dropout_embeddings: on both sides' embeddings.
    :param init_std: the Gaussian's scale.  :param kernels: see :class:`~sarnmt.models.lstm.base.LSTMTranslator`.
    """

    hooks: ClassVar[frozenset[str]] = frozenset()
    required_hooks: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        variant: Callable[..., nn.Module],
        dropout: float = 0.0,
        dropout_embeddings: float = 0.0,
        init_std: float = PAPER_STD,
        kernels: str = "auto",
    ) -> None:
        with normal_std(init_std):
            super().__init__(tgt_vocab_size, emb_dim, hidden_dim, variant, dropout_embeddings, kernels)
            self.encoder = LSTMEncoder(src_vocab_size, emb_dim, hidden_dim, True, dropout_embeddings)
            self.init_hidden = init_linear_(nn.Linear(2 * hidden_dim, hidden_dim, bias=False))  # W_h
            self.init_cell = init_linear_(nn.Linear(2 * hidden_dim, hidden_dim, bias=False))  # W_c
            self.cell = nn.LSTMCell(emb_dim + hidden_dim, hidden_dim)
            init_recurrent_(self.cell)
            self.attention = BilinearAttention(hidden_dim, 2 * hidden_dim)  # W_attProj
            self.combined = init_linear_(nn.Linear(3 * hidden_dim, hidden_dim, bias=False))  # W_u
            self.vocab = init_linear_(nn.Linear(hidden_dim, tgt_vocab_size, bias=False))  # W_vocab
            self.dropout = nn.Dropout(dropout)

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[SourceMemory, DecoderState]:
        """:returns: h^enc (B, S, 2h) with keys W_attProj h^enc (B, S, h); the state h_0, c_0 and o_0 = 0."""
        annotations, final_hidden, final_cell = self.encoder(src, src_mask, self.kernels(src).lstm_encoder)
        # [←h_1; →h_m]: the backward direction's final state is at position 1, the forward one's at m
        hidden = self.init_hidden(torch.cat([final_hidden[1], final_hidden[0]], dim=1))
        cell = self.init_cell(torch.cat([final_cell[1], final_cell[0]], dim=1))
        memory = SourceMemory(annotations=annotations, keys=self.attention.project_keys(annotations), mask=src_mask)
        state = DecoderState.first(hidden, recurrent={"cell": cell, "feed": torch.zeros_like(hidden)})
        return memory, state

    def source_context(self, memory, spots):
        """a_t and α_t from h_t^dec (multiplicative attention, no hot spot)."""
        return lambda query: self.attention(query, memory)

    def recurrence(self, step_input, query, state, maps):
        """h_t^dec from [y_t; o_{t-1}], then a_t = ``maps``(h_t^dec) and o_t.  :returns: h_t^dec, its memory cell
        and o_t (fed to the next step), (o_t,) for the output layer, α_t."""
        hidden, cell = self.cell(
            torch.cat([step_input, state.recurrent["feed"]], dim=1), (state.hidden, state.recurrent["cell"])
        )
        context, weights = maps(hidden)
        combined = self.dropout(torch.tanh(self.combined(torch.cat([context, hidden], dim=1))))  # o_t
        return hidden, {"cell": cell, "feed": combined}, (combined,), weights

    def scores(self, features: Tensor, target_context: Tensor | None) -> Tensor:
        """W_vocab o_t.  :param features: o_t, shape (..., h)."""
        return self.vocab(features)

    def output_nll(self, inputs, target_context, target, spots):
        """W_vocab o_t and its cross-entropy through the ``output_nll`` hot spot."""
        return spots.output_nll(inputs[0], self.vocab.weight, None, target)
