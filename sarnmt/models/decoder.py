"""The conditional GRU decoder with attention of dl4mt (docs/models.md §Conditional GRU, eqs. C1-C12; appendix A.3).

One step t, shared by teacher-forced training and by search::

    q_{t-1} = variant hook 1 (s_{t-1} for all but the Memory RNN)
    s'_t    = GRU1(ȳ_{t-1}, q_{t-1})              cell 1, input-side bias
    c_t, α  = attention(s'_t, h)                  queried by the intermediate state
    s_t     = GRU2(c_t, s'_t)                     cell 2, hidden-side bias
    logits  = W_o tanh(W_st s_t + W_ct c_t + R_t)  R_t = variant hook 2

There is no BOS token: ȳ_0 is a zero vector. In teacher-forced mode (:meth:`ConditionalGRUDecoder.forward`) the
input projections of cell 1 are computed for all steps before the loop, and hook 2 runs once for all steps after
it; only hook 1 runs inside the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.models.attention import SourceAttention
from sarnmt.models.gru import DL4MTGRUCell
from sarnmt.models.init import init_linear_, normal_
from sarnmt.models.kernels import KernelChoice, Kernels
from sarnmt.models.loop_attention import LoopAttention
from sarnmt.models.loop_linear import LoopLinear
from sarnmt.models.state import DecoderState, SourceMemory
from sarnmt.models.variants.base import DecoderVariant
from sarnmt.training.loss import linear_nll, scatter_positions


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
class LoopWeights:
    """What every step of the teacher-forced loop applies, each with its gradients formed once after the loop: as
    :class:`LoopLinear`, U of cell 1, the attention's query projection U_a, cell 2's input matrix, and U of cell 2
    with its hidden-side bias; the attention over the batch's source as :class:`LoopAttention`."""

    cell1_hidden: LoopLinear
    query: LoopLinear
    attention: LoopAttention
    cell2_input: LoopLinear
    cell2_hidden: LoopLinear


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

    def nll(
        self, hidden: Tensor, context: Tensor, target_context: Tensor, target: Tensor, fused: bool = True
    ) -> Tensor:
        """−log p(target), the output layer and the cross-entropy fused (:func:`~sarnmt.training.loss.linear_nll`), or
        (``fused=False``) as logits and ``F.cross_entropy``.

        :param hidden: shape (N, d).  :param context: shape (N, 2d).  :param target_context: shape (N, e).
        :param target: ids, shape (N,).  :returns: shape (N,), float32 (float64 for a float64 model)."""
        features = self.features(hidden, context, target_context)
        if fused:
            return linear_nll(features, self.output.weight, self.output.bias, target)
        logits = self.output(features)
        return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), target, reduction="none")


def _rows(positions: Tensor) -> Tensor:
    """:param positions: shape (B, T), bool.  :returns: their indices in the flattened grid, row-major, shape (N,)
    (one host synchronisation on a GPU, taken once per batch)."""
    return positions.flatten().nonzero().squeeze(1)


class ConditionalGRUDecoder(nn.Module):
    """The cGRU decoder, its target embeddings and its readout.

    :param variant: the decoder variant (its two hooks).
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
        kernels: KernelChoice | None = None,
    ) -> None:
        super().__init__()
        self.kernels = kernels if kernels is not None else KernelChoice()
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
        return DecoderState(hidden=initial_hidden, variant=self.variant.init_state(initial_hidden), steps=0)

    def loop_weights(self, memory: SourceMemory, kernels: Kernels) -> LoopWeights | None:
        """The per-step maps of one teacher-forced loop over ``memory`` (their gradients formed once after it), or
        None when ``kernels.loop_weights`` is off (no gradient wanted, or ``kernels=plain``)."""
        if not kernels.loop_weights:
            return None
        return LoopWeights(
            cell1_hidden=LoopLinear(self.cell1.weight_hh, self.cell1.hidden_bias()),
            query=LoopLinear.of(self.attention.query_proj),
            attention=LoopAttention(self.attention, memory, kernels.sigmoid_tanh),
            cell2_input=LoopLinear(self.cell2.weight_ih),
            cell2_hidden=LoopLinear(self.cell2.weight_hh, self.cell2.hidden_bias()),
        )

    def recurrence(
        self,
        gates_prev: Tensor,
        query_hidden: Tensor,
        memory: SourceMemory,
        kernels: Kernels,
        loop: LoopWeights | None = None,
    ):
        """Cell 1, attention, cell 2 for one step.

        :param gates_prev: cell 1's projected input for ȳ_{t-1}, shape (B, 3d).
        :param query_hidden: the state cell 1 reads (hook 1's output), shape (B, d).
        :param kernels: which implementations run (:mod:`sarnmt.models.kernels`).
        :param loop: the teacher-forced loop's :meth:`loop_weights` (the same values; gradients formed once).
        :returns: s_t (B, d), c_t (B, 2d), α (B, S).
        """
        if loop is None:
            intermediate = self.cell1(gates_prev, query_hidden, fused=kernels.gru_update)
            context, weights = self.attention(intermediate, memory, kernels.chunked_attention, kernels.sigmoid_tanh)
            hidden = self.cell2(self.cell2.project_input(context), intermediate, fused=kernels.gru_update)
        else:
            intermediate = self.cell1(gates_prev, query_hidden, loop.cell1_hidden, kernels.gru_update)
            context, weights = loop.attention(loop.query(intermediate))
            hidden = self.cell2(loop.cell2_input(context), intermediate, loop.cell2_hidden, kernels.gru_update)
        return hidden, context, weights

    def embed_previous(self, prev_tokens: Tensor | None, batch_size: int, like: Tensor) -> Tensor:
        """ȳ_{t-1}: the embedding of the previous tokens, or zeros at the first step.

        :param prev_tokens: shape (B,), or None at t = 1.  :returns: shape (B, e)."""
        if prev_tokens is None:
            return like.new_zeros(batch_size, self.emb_dim)
        return self.dropout_embeddings(self.embedding(prev_tokens))

    def step(self, prev_tokens: Tensor | None, state: DecoderState, memory: SourceMemory) -> StepOutput:
        """One decoding step, as search uses it.

        :param prev_tokens: y_{t-1}, shape (B,), or None at the first step.
        """
        prev_emb = self.embed_previous(prev_tokens, state.hidden.size(0), state.hidden)
        query, vstate, rec_weights = self.variant.recurrent_input(state.hidden, state.variant)
        kernels = self.kernels(state.hidden)
        hidden, context, src_weights = self.recurrence(self.cell1.project_input(prev_emb), query, memory, kernels)
        target_context, vstate, out_weights = self.variant.readout_step(
            prev_emb, state.hidden, hidden, vstate, state.steps
        )
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
        positions=mask).logits, tgt, mask)``, with the output layer and the cross-entropy fused (no logits formed).

        :param tgt: shape (B, T), as in :meth:`forward`.  :param mask: real target positions, shape (B, T).
        :returns: shape (B, T), zero on padding; float32 (float64 for a float64 model).
        """
        rows = _rows(mask)
        readout_in, _, _ = self.teacher_forced(tgt, memory, initial_hidden, rows)
        fused = self.kernels(initial_hidden).fused_output
        return scatter_positions(self.readout.nll(*readout_in, tgt.flatten().index_select(0, rows), fused), mask)

    def teacher_forced(
        self, tgt: Tensor, memory: SourceMemory, initial_hidden: Tensor, rows: Tensor | None
    ) -> tuple[tuple[Tensor, Tensor, Tensor], Tensor, Tensor | None]:
        """The recurrent loop over gold targets and hook 2, up to the readout; ``tgt``, ``memory`` and
        ``initial_hidden`` as in :meth:`forward`.

        :param rows: the selected positions as indices into the flattened (B·T) grid, shape (N,), or None for all.
        :returns: the readout's inputs (s_t and c_t after dropout, R_t), each (B, T, ·) or (N, ·) at ``rows``; the
            source attention (B, T, S); the target-side attention (B, T, T) or None.
        """
        batch, steps = tgt.shape
        prev_embs = torch.cat([initial_hidden.new_zeros(batch, 1, self.emb_dim), self.embedding(tgt[:, :-1])], dim=1)
        prev_embs = self.dropout_embeddings(prev_embs)
        # unbind, not gates_prev[:, t]: the backward of T slices would build T full-size zero gradients (O(T²))
        gates_prev = self.cell1.project_input(prev_embs).unbind(1)
        hidden, vstate = initial_hidden, self.variant.init_state(initial_hidden)
        hiddens, contexts, src_weights, rec_weights = [], [], [], []
        kernels = self.kernels(initial_hidden)
        loop = self.loop_weights(memory, kernels)
        for t in range(steps):
            query, vstate, weights = self.variant.recurrent_input(hidden, vstate)
            hidden, context, alpha = self.recurrence(gates_prev[t], query, memory, kernels, loop)
            hiddens.append(hidden)
            contexts.append(context)
            src_weights.append(alpha)
            if weights is not None:
                rec_weights.append(F.pad(weights, (0, steps - weights.size(1))))
        hiddens_all = torch.stack(hiddens, dim=1)
        prev_hiddens = torch.cat([initial_hidden.unsqueeze(1), hiddens_all[:, :-1]], dim=1)
        target_context, out_weights = self.variant.readout_all(prev_embs, prev_hiddens, hiddens_all)
        readout_in = (hiddens_all, torch.stack(contexts, dim=1), target_context)
        if rows is not None:  # index_select: its backward is one index_add, not zeros and a masked index_put
            readout_in = tuple(x.flatten(0, 1).index_select(0, rows) for x in readout_in)
        hidden_in, context_in, target_context = readout_in
        tgt_attention = torch.stack(rec_weights, dim=1) if rec_weights else out_weights
        readout_in = (self.dropout_hidden(hidden_in), self.dropout_hidden(context_in), target_context)
        return readout_in, torch.stack(src_weights, dim=1), tgt_attention
