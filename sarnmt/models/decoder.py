"""The conditional GRU decoder with attention of dl4mt (docs/models.md §Conditional GRU, eqs. C1-C12; appendix A.3).

One step t, shared by teacher-forced training and by search (:meth:`ConditionalGRUDecoder.recurrence` runs stages
2-4)::

    1. q_{t-1} = variant hook 1                   s_{t-1} for all but the Memory RNN (s̃_t, paper eq. 14)
    2. s'_t    = GRU1(ȳ_{t-1}, q_{t-1})            cell 1, input-side bias (eqs. C2-C5)
    3. c_t, α  = attention(s'_t, h)                queried by the intermediate state (eqs. C6-C8)
    4. s_t     = GRU2(c_t, s'_t)                   cell 2, hidden-side bias (eqs. C9-C12)
    5. R_t     = variant hook 2                    W_yt ȳ_{t-1} for the baseline, d_t for the residual ones (eq. 8)
    6. logits  = W_o tanh(W_st s_t + W_ct c_t + R_t)   the readout (eqs. A.3g, A.3h)

There is no BOS token: ȳ_0 is a zero vector. In teacher-forced mode (:meth:`ConditionalGRUDecoder.teacher_forced`)
the input projections of cell 1 are computed for all steps before the loop, and stages 5-6 run once for all steps
after it; only stages 1-4 run inside the loop. The maps a step applies to its parameters are the ``step_linear`` and
``step_attention`` hot spots, built once per loop (:class:`StepMaps`); the gates are the ``gru_update`` hot spot
(:mod:`sarnmt.kernels`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.kernels import HotSpots, KernelChoice
from sarnmt.models.attention import SourceAttention
from sarnmt.models.gru import DL4MTGRUCell
from sarnmt.models.init import init_linear_, normal_
from sarnmt.models.positions import scatter_positions
from sarnmt.models.state import DecoderState, SourceMemory
from sarnmt.models.variants.base import DecoderVariant


@dataclass
class StepOutput:
    """:param logits: shape (B, V).  :param state: the state before the next step.
    :param src_attention: α over the source, shape (B, S), or None for a model without attention (the
        fixed-context LSTM).
    :param tgt_attention: the variant's attention over its history, shape (B, t), or None."""

    logits: Tensor
    state: DecoderState
    src_attention: Tensor | None
    tgt_attention: Tensor | None


@dataclass
class StepMaps:
    """The maps of a step that read parameters, built once per teacher-forced loop (or search step) from the
    ``step_linear`` and ``step_attention`` hot spots (in training, their gradients formed once after the loop).

    :param cell1_hidden: s ↦ U' s (cell 1's hidden side), (B, d) → (B, 3d).
    :param query: s'_t ↦ U_a s'_t, (B, d) → (B, 2d).
    :param attention: U_a s'_t ↦ (c_t (B, 2d), α_t (B, S)) over the batch's source.
    :param cell2_input: c_t ↦ W c_t (cell 2's input side), (B, 2d) → (B, 3d).
    :param cell2_hidden: s'_t ↦ U s'_t + b (cell 2's hidden side, with its bias), (B, d) → (B, 3d).
    """

    cell1_hidden: Callable[[Tensor], Tensor]
    query: Callable[[Tensor], Tensor]
    attention: Callable[[Tensor], tuple[Tensor, Tensor]]
    cell2_input: Callable[[Tensor], Tensor]
    cell2_hidden: Callable[[Tensor], Tensor]


@dataclass
class DecoderOutput:
    """:param logits: shape (B, T, V), or (N, V) when only N selected positions were read out.
    :param src_attention: shape (B, T, S), or None for a model without attention.
    :param tgt_attention: shape (B, T, T) (row t over history items 0..t), or None."""

    logits: Tensor
    src_attention: Tensor | None
    tgt_attention: Tensor | None


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


def _rows(positions: Tensor) -> Tensor:
    """:param positions: shape (B, T), bool.  :returns: their indices in the flattened grid, row-major, shape (N,)
    (one host synchronisation on a GPU, taken once per batch)."""
    return positions.flatten().nonzero().squeeze(1)


class ConditionalGRUDecoder(nn.Module):
    """The cGRU decoder, its target embeddings and its readout.

    :param variant: the decoder variant (its two hooks).
    :param kernels: the model's kernel choice (:mod:`sarnmt.kernels`).
    Dropout rates as in :class:`~sarnmt.models.seq2seq.Seq2Seq`.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        variant: DecoderVariant,
        dropout_embeddings: float,
        dropout_hidden: float,
        dropout_readout: float,
        kernels: KernelChoice,
    ) -> None:
        super().__init__()
        self.kernels = kernels
        self.emb_dim = emb_dim
        self.embedding = nn.Embedding(vocab_size, emb_dim)  # Wemb_dec
        self.cell1 = DL4MTGRUCell(emb_dim, hidden_dim, bias_on="input")
        self.attention = SourceAttention(hidden_dim, 2 * hidden_dim, kernels)
        self.cell2 = DL4MTGRUCell(2 * hidden_dim, hidden_dim, bias_on="hidden", square_input_gates=True)
        self.variant = variant
        self.readout = Readout(hidden_dim, 2 * hidden_dim, emb_dim, vocab_size, dropout_readout)
        self.dropout_embeddings = nn.Dropout(dropout_embeddings)
        self.dropout_hidden = nn.Dropout(dropout_hidden)
        normal_(self.embedding.weight)

    def init_state(self, initial_hidden: Tensor) -> DecoderState:
        """:param initial_hidden: s_0, shape (B, d)."""
        return DecoderState(hidden=initial_hidden, variant=self.variant.init_state(initial_hidden), steps=0)

    def step_maps(self, memory: SourceMemory, spots: HotSpots) -> StepMaps:
        """The maps every step over ``memory`` applies (see :class:`StepMaps`), from the call's hot spots."""
        return StepMaps(
            cell1_hidden=spots.step_linear(self.cell1.weight_hh, self.cell1.hidden_bias()),
            query=spots.step_linear(self.attention.query_proj.weight, self.attention.query_proj.bias),
            attention=spots.step_attention(self.attention, memory),
            cell2_input=spots.step_linear(self.cell2.weight_ih, self.cell2.input_bias()),
            cell2_hidden=spots.step_linear(self.cell2.weight_hh, self.cell2.hidden_bias()),
        )

    def recurrence(
        self, gates_prev: Tensor, query_hidden: Tensor, maps: StepMaps, spots: HotSpots
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Stages 2-4 of a step (the module docstring): cell 1, the attention, cell 2.

        :param gates_prev: cell 1's input side W' ȳ_{t-1} + b', shape (B, 3d).
        :param query_hidden: q_{t-1}, the state cell 1 reads (hook 1's output), shape (B, d).
        :param maps: the loop's :meth:`step_maps`.  :param spots: the call's hot spots (the GRU's gates).
        :returns: s_t (B, d), c_t (B, 2d), α (B, S).
        """
        # 2. cell 1, eqs. C2-C5: s'_t = GRU1(ȳ_{t-1}, q_{t-1})
        intermediate = spots.gru_update(gates_prev, maps.cell1_hidden(query_hidden), query_hidden)
        # 3. attention, eqs. C6-C8: e_j = v_aᵀ tanh(U_a s'_t + W_a h_j), α = softmax(e), c_t = Σ_j α_j h_j
        context, weights = maps.attention(maps.query(intermediate))
        # 4. cell 2, eqs. C9-C12: s_t = GRU2(c_t, s'_t), its bias on the hidden side
        hidden = spots.gru_update(maps.cell2_input(context), maps.cell2_hidden(intermediate), intermediate)
        return hidden, context, weights

    def embed_previous(self, prev_tokens: Tensor | None, batch_size: int, like: Tensor) -> Tensor:
        """ȳ_{t-1}: the embedding of the previous tokens, or zeros at the first step.

        :param prev_tokens: shape (B,), or None at t = 1.  :returns: shape (B, e)."""
        if prev_tokens is None:
            return like.new_zeros(batch_size, self.emb_dim)
        return self.dropout_embeddings(self.embedding(prev_tokens))

    def step(self, prev_tokens: Tensor | None, state: DecoderState, memory: SourceMemory) -> StepOutput:
        """One decoding step, as search uses it: stages 1-6 of the module docstring.

        :param prev_tokens: y_{t-1}, shape (B,), or None at the first step.
        """
        spots = self.kernels(state.hidden)
        prev_emb = self.embed_previous(prev_tokens, state.hidden.size(0), state.hidden)  # ȳ_{t-1}
        # 1. hook 1: q_{t-1}
        query, vstate, rec_weights = self.variant.recurrent_input(state.hidden, state.variant)
        # 2-4. cell 1, attention, cell 2; one step applies the layers themselves (deferring gradients pays over a loop)
        maps = self.step_maps(memory, self.kernels.equations)
        hidden, context, src_weights = self.recurrence(self.cell1.project_input(prev_emb), query, maps, spots)
        # 5. hook 2: R_t
        target_context, vstate, out_weights = self.variant.readout_step(
            prev_emb, state.hidden, hidden, vstate, state.steps
        )
        # 6. the readout's logits
        logits = self.readout(self.dropout_hidden(hidden), self.dropout_hidden(context), target_context)
        return StepOutput(
            logits=logits,
            state=DecoderState(hidden=hidden, variant=vstate, steps=state.steps + 1),
            src_attention=src_weights,
            tgt_attention=rec_weights if rec_weights is not None else out_weights,
        )

    def forward(
        self, tgt: Tensor, memory: SourceMemory, initial_hidden: Tensor, positions: Tensor | None = None
    ) -> DecoderOutput:
        """Teacher-forced decoding of gold targets.

        :param tgt: target ids y_1 .. y_T (EOS included, padded), shape (B, T). Positions after a sentence's EOS
            never influence earlier ones, so no target mask is needed for the recurrence.
        :param initial_hidden: s_0, shape (B, d).
        :param positions: shape (B, T), bool: compute the readout and logits only there (the loss's real
            positions), giving logits of shape (N, V) for the N selected positions in row-major order. The
            readout is the costliest part of a step (V × e per position), so padding is not paid for.
        """
        rows = None if positions is None else _rows(positions)
        readout_in, src_attention, tgt_attention = self.teacher_forced(tgt, memory, initial_hidden, rows)
        return DecoderOutput(logits=self.readout(*readout_in), src_attention=src_attention, tgt_attention=tgt_attention)

    def nll(self, tgt: Tensor, memory: SourceMemory, initial_hidden: Tensor, mask: Tensor) -> Tensor:
        """−log p(y_t) of the gold targets, as training takes it: ``token_nll(forward(tgt, memory, initial_hidden,
        positions=mask).logits, tgt, mask)``, through the ``output_nll`` hot spot (with ``kernels.fused_output``
        the output layer and the cross-entropy as one operation, no logits kept).

        :param tgt: shape (B, T), as in :meth:`forward`.  :param mask: real target positions, shape (B, T).
        :returns: shape (B, T), zero on padding; float32 (float64 for a float64 model).
        """
        rows = _rows(mask)
        readout_in, _, _ = self.teacher_forced(tgt, memory, initial_hidden, rows)
        spots = self.kernels(initial_hidden)
        return scatter_positions(self.readout.nll(*readout_in, tgt.flatten().index_select(0, rows), spots), mask)

    def teacher_forced(
        self, tgt: Tensor, memory: SourceMemory, initial_hidden: Tensor, rows: Tensor | None
    ) -> tuple[tuple[Tensor, Tensor, Tensor], Tensor, Tensor | None]:
        """The steps over gold targets up to the readout; ``tgt``, ``memory`` and ``initial_hidden`` as in
        :meth:`forward`.

        :param rows: the selected positions as indices into the flattened (B·T) grid, shape (N,), or None for all.
        :returns: the readout's inputs (s_t and c_t after dropout, R_t), each (B, T, ·) or (N, ·) at ``rows``; the
            source attention (B, T, S); the target-side attention (B, T, T) or None.
        """
        batch, steps = tgt.shape
        spots = self.kernels(initial_hidden)
        # ȳ_0 .. ȳ_{T-1} and cell 1's input side W' ȳ + b' for every step at once
        prev_embs = torch.cat([initial_hidden.new_zeros(batch, 1, self.emb_dim), self.embedding(tgt[:, :-1])], dim=1)
        prev_embs = self.dropout_embeddings(prev_embs)
        # unbind, not gates_prev[:, t]: the backward of T slices would build T full-size zero gradients (O(T²))
        gates_prev = self.cell1.project_input(prev_embs).unbind(1)
        maps = self.step_maps(memory, spots)
        hidden, vstate = initial_hidden, self.variant.init_state(initial_hidden)
        hiddens, contexts, src_weights, rec_weights = [], [], [], []
        for t in range(steps):
            # 1. hook 1: q_{t-1}
            query, vstate, weights = self.variant.recurrent_input(hidden, vstate)
            # 2-4. cell 1, attention, cell 2
            hidden, context, alpha = self.recurrence(gates_prev[t], query, maps, spots)
            hiddens.append(hidden)
            contexts.append(context)
            src_weights.append(alpha)
            if weights is not None:
                rec_weights.append(F.pad(weights, (0, steps - weights.size(1))))
        # 5. hook 2 for every step at once: R_1 .. R_T
        hiddens_all = torch.stack(hiddens, dim=1)
        prev_hiddens = torch.cat([initial_hidden.unsqueeze(1), hiddens_all[:, :-1]], dim=1)
        target_context, out_weights = self.variant.readout_all(prev_embs, prev_hiddens, hiddens_all)
        # 6. the readout's inputs, at the selected positions only (the caller forms logits or the loss)
        readout_in = (hiddens_all, torch.stack(contexts, dim=1), target_context)
        if rows is not None:  # index_select: its backward is one index_add, not zeros and a masked index_put
            readout_in = tuple(x.flatten(0, 1).index_select(0, rows) for x in readout_in)
        hidden_in, context_in, target_context = readout_in
        tgt_attention = torch.stack(rec_weights, dim=1) if rec_weights else out_weights
        readout_in = (self.dropout_hidden(hidden_in), self.dropout_hidden(context_in), target_context)
        return readout_in, torch.stack(src_weights, dim=1), tgt_attention
