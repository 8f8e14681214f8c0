"""The conditional GRU decoder with attention of dl4mt (docs/models.md §Conditional GRU, eqs. C1-C12; appendix A.3).

One step t of the decoder skeleton (:mod:`sarnmt.models.skeleton` runs the loop, the hooks and search's step;
:meth:`ConditionalGRUDecoder.recurrence` is stages 2-4)::

    1. q_{t-1} = variant hook 1                   s_{t-1} for all but the Memory RNN (s̃_t, paper eq. 14)
    2. s'_t    = GRU1(ȳ_{t-1}, q_{t-1})            cell 1, input-side bias (eqs. C2-C5)
    3. c_t, α  = attention(s'_t, h)                queried by the intermediate state (eqs. C6-C8)
    4. s_t     = GRU2(c_t, s'_t)                   cell 2, hidden-side bias (eqs. C9-C12)
    5. R_t     = variant hook 2                    W_yt ȳ_{t-1} for the baseline, d_t for the residual ones (eq. 8)
    6. logits  = W_o tanh(W_st s_t + W_ct c_t + R_t)   the readout (eqs. A.3g, A.3h)

There is no BOS token: ȳ_0 is a zero vector. In teacher-forced mode the input projections of cell 1 are computed
for all steps before the loop, and stages 5-6 run once for all steps after it; only stages 1-4 run inside the loop.
Stages 2-4 are three maps (:class:`StepMaps`) built once per loop from the call's hot spots (``step_linear``,
``step_attention``, ``attention_scores`` and ``gru_update``, :mod:`sarnmt.models.hot_spots`), so the step reads as
the equations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from sarnmt.models.attention import SourceAttention
from sarnmt.models.gru import DL4MTGRUCell
from sarnmt.models.hot_spots import HotSpots
from sarnmt.models.init import init_linear_, normal_
from sarnmt.models.skeleton import RecurrentDecoder
from sarnmt.models.state import DecoderState, SourceMemory
from sarnmt.models.variants.base import DecoderVariant


@dataclass
class StepMaps:
    """The three maps of stages 2-4 of a step, each an equation of the module docstring with its hot spots bound
    (built once per teacher-forced loop, or per search step, by :meth:`ConditionalGRUDecoder.step_maps`).

    :param cell1: (W' ȳ_{t-1} + b' (B, 3d), q_{t-1} (B, d)) ↦ s'_t (B, d), eqs. C2-C5.
    :param attention: s'_t ↦ (c_t (B, 2d), α_t (B, S)) over the batch's source, eqs. C6-C8.
    :param cell2: (c_t (B, 2d), s'_t (B, d)) ↦ s_t (B, d), eqs. C9-C12 (the bias on the hidden side).
    """

    cell1: Callable[[Tensor, Tensor], Tensor]
    attention: Callable[[Tensor], tuple[Tensor, Tensor]]
    cell2: Callable[[Tensor, Tensor], Tensor]


class Readout(nn.Module):
    """tanh readout of width e and the output layer (docs/models.md §Output layer; no weight tying, no maxout)."""

    def __init__(self, hidden_dim: int, context_dim: int, emb_dim: int, vocab_size: int, dropout: float) -> None:
        super().__init__()
        self.hidden_proj = init_linear_(nn.Linear(hidden_dim, emb_dim), orthogonal_if_square=False)  # W_st
        self.context_proj = init_linear_(nn.Linear(context_dim, emb_dim), orthogonal_if_square=False)  # W_ct
        self.output = init_linear_(nn.Linear(emb_dim, vocab_size), orthogonal_if_square=False)  # W_o
        self.dropout = nn.Dropout(dropout)

    def features(self, hidden: Tensor, context: Tensor, target_context: Tensor) -> Tensor:
        """:param hidden: s_t, shape (..., d).  :param context: c_t, shape (..., 2d).
        :param target_context: R_t, shape (..., e).  :returns: the readout after dropout, shape (..., e)."""
        return self.dropout(torch.tanh(self.hidden_proj(hidden) + self.context_proj(context) + target_context))

    def forward(self, hidden: Tensor, context: Tensor, target_context: Tensor) -> Tensor:
        """Arguments as in :meth:`features`.  :returns: logits, shape (..., V)."""
        return self.output(self.features(hidden, context, target_context))

    def nll(self, hidden: Tensor, context: Tensor, target_context: Tensor, target: Tensor, spots: HotSpots) -> Tensor:
        """−log p(target), through the ``output_nll`` hot spot (no logits kept, with ``kernels.fused_output``).

        :param hidden: shape (N, d).  :param context: shape (N, 2d).  :param target_context: shape (N, e).
        :param target: ids, shape (N,).  :param spots: the call's hot spots.
        :returns: shape (N,), float32 (float64 for a float64 model)."""
        features = self.features(hidden, context, target_context)
        return spots.output_nll(features, self.output.weight, self.output.bias, target)


class ConditionalGRUDecoder(RecurrentDecoder):
    """The cGRU decoder, its target embeddings and its readout: the system of the decoder skeleton
    (:class:`~sarnmt.models.skeleton.RecurrentDecoder`) whose recurrence is stages 2-4.

    :param variant: the decoder variant (its two hooks).
    Dropout rates as in :class:`~sarnmt.models.seq2seq.Seq2Seq`.
    """

    hooks: ClassVar[frozenset[str]] = frozenset({"readout", "recurrence"})  # the variant hooks the cGRU offers
    required_hooks: ClassVar[frozenset[str]] = frozenset({"readout"})  # and those a variant must fill

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        variant: DecoderVariant,
        dropout_embeddings: float,
        dropout_hidden: float,
        dropout_readout: float,
    ) -> None:
        super().__init__()
        self.emb_dim = emb_dim
        self.embedding = nn.Embedding(vocab_size, emb_dim)  # Wemb_dec
        self.cell1 = DL4MTGRUCell(emb_dim, hidden_dim, bias_on="input")
        self.attention = SourceAttention(hidden_dim, 2 * hidden_dim)
        self.cell2 = DL4MTGRUCell(2 * hidden_dim, hidden_dim, bias_on="hidden", square_input_gates=True)
        self.variant = variant
        self.readout = Readout(hidden_dim, 2 * hidden_dim, emb_dim, vocab_size, dropout_readout)
        self.dropout_embeddings = nn.Dropout(dropout_embeddings)
        self.dropout_hidden = nn.Dropout(dropout_hidden)
        normal_(self.embedding.weight)

    def init_state(self, initial_hidden: Tensor) -> DecoderState:
        """:param initial_hidden: s_0, shape (B, d)."""
        return DecoderState.first(initial_hidden, self.variant.init_state(initial_hidden))

    def step_maps(self, memory: SourceMemory, spots: HotSpots) -> StepMaps:
        """The maps of stages 2-4 over ``memory`` (see :class:`StepMaps`), from the call's hot spots."""
        gru = spots.gru_update
        cell1_hidden = spots.step_linear(self.cell1.weight_hh, self.cell1.hidden_bias())  # U' s
        query = spots.step_linear(self.attention.query_proj.weight, self.attention.query_proj.bias)  # U_a s'_t
        attend = spots.step_attention(self.attention, memory, spots.attention_scores)
        cell2_input = spots.step_linear(self.cell2.weight_ih, self.cell2.input_bias())  # W c_t
        cell2_hidden = spots.step_linear(self.cell2.weight_hh, self.cell2.hidden_bias())  # U s'_t + b
        return StepMaps(
            cell1=lambda gates, state: gru(gates, cell1_hidden(state), state),
            attention=lambda intermediate: attend(query(intermediate)),
            cell2=lambda context, intermediate: gru(cell2_input(context), cell2_hidden(intermediate), intermediate),
        )

    def recurrence(
        self, step_input: Tensor, query: Tensor, state: DecoderState, maps: StepMaps
    ) -> tuple[Tensor, dict[str, Tensor], tuple[Tensor, ...], Tensor]:
        """Stages 2-4 of a step (the module docstring): cell 1, the attention, cell 2.

        :param step_input: cell 1's input side W' ȳ_{t-1} + b', shape (B, 3d).
        :param query: q_{t-1}, the state cell 1 reads (hook 1's output), shape (B, d).
        :param maps: the loop's :meth:`step_maps`.
        :returns: s_t (B, d); no recurrent state besides it; (c_t (B, 2d),); α (B, S).
        """
        intermediate = maps.cell1(step_input, query)  # 2. s'_t = GRU1(ȳ_{t-1}, q_{t-1})
        context, weights = maps.attention(intermediate)  # 3. c_t, α = attention(s'_t, h)
        hidden = maps.cell2(context, intermediate)  # 4. s_t = GRU2(c_t, s'_t)
        return hidden, {}, (context,), weights

    def first_embedding(self, like: Tensor) -> Tensor:
        """ȳ_0 = 0.  :param like: s_0, shape (B, d).  :returns: shape (B, e)."""
        return like.new_zeros(like.size(0), self.emb_dim)

    def step_inputs(self, prev_embs: Tensor) -> Tensor:
        """Cell 1's input side W' ȳ_{t-1} + b'.  :param prev_embs: shape (..., e).  :returns: shape (..., 3d)."""
        return self.cell1.project_input(prev_embs)

    def readout_inputs(self, hiddens: Tensor, outputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """s_t and c_t (``outputs`` is (c_t,))."""
        return hiddens, outputs[0]

    def logits(self, inputs: tuple[Tensor, ...], target_context: Tensor | None) -> Tensor:
        """Stage 6: W_o tanh(W_st s_t + W_ct c_t + R_t), s_t and c_t after dropout."""
        hidden, context = inputs
        return self.readout(self.dropout_hidden(hidden), self.dropout_hidden(context), target_context)

    def output_nll(
        self, inputs: tuple[Tensor, ...], target_context: Tensor | None, target: Tensor, spots: HotSpots
    ) -> Tensor:
        """Stage 6 and −log p(target), through the ``output_nll`` hot spot (no logits kept, with
        ``kernels.fused_output``)."""
        hidden, context = self.dropout_hidden(inputs[0]), self.dropout_hidden(inputs[1])
        return self.readout.nll(hidden, context, target_context, target, spots)
