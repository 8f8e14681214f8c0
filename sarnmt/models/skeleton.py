"""The one decoder skeleton: the time loop and the step that every translation system shares (the paper's cGRU,
:class:`~sarnmt.models.decoder.ConditionalGRUDecoder`, and the LSTMs of the seeds' tutorials,
:class:`~sarnmt.models.lstm.base.LSTMTranslator`).

One step t, in search (:meth:`RecurrentDecoder.decode_step`) and in the teacher-forced loop
(:meth:`RecurrentDecoder.teacher_forced`) alike::

    ȳ_{t-1}                 the previous word's embedding (the system's first_embedding at t = 1)
    q_{t-1}, ·  = hook 1    the variant's recurrent input (the Memory RNN's s̃_t; s_{t-1} for the others),
                            where the system offers it (``"recurrence" in hooks``)
    s_t, ·      = recurrence(x_t, q_{t-1}, state)      the system's recurrence; x_t its input from ȳ_{t-1}
    R_t         = hook 2    the variant's target context (W_yt ȳ_{t-1}, or d_t for the residual decoders),
                            where the system's output layer has that term (``"readout" in required_hooks``)
    logits      = readout(s_t, outputs_t, R_t)          the system's output layer

In the teacher-forced loop the inputs x_t of every step are computed before the loop (:meth:`step_inputs`) and hook 2
and the readout run once for all steps after it, at the selected positions only. What a system provides is the
abstract part of :class:`RecurrentDecoder`; the variant provides the hooks (:mod:`sarnmt.models.variants.base`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.models.hot_spots import HotSpots
from sarnmt.models.positions import scatter_positions, selected_rows
from sarnmt.models.state import DecoderState, SourceMemory


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
class DecoderOutput:
    """:param logits: shape (B, T, V), or (N, V) when only N selected positions were read out.
    :param src_attention: shape (B, T, S), or None for a model without attention.
    :param tgt_attention: shape (B, T, T) (row t over history items 0..t), or None."""

    logits: Tensor
    src_attention: Tensor | None
    tgt_attention: Tensor | None


class RecurrentDecoder(nn.Module):
    """The decoder skeleton (the module docstring). A system sets ``embedding`` (the target embeddings),
    ``dropout_embeddings`` and ``variant`` (the decoder variant, the ``decoder=`` group) and defines the methods
    below marked *system*; the skeleton runs them in search and in teacher forcing."""

    hooks: ClassVar[frozenset[str]] = frozenset({"readout"})  # the variant hooks this decoder offers
    required_hooks: ClassVar[frozenset[str]] = frozenset({"readout"})  # and those a variant must fill

    embedding: nn.Embedding
    dropout_embeddings: nn.Module
    variant: nn.Module

    # --- what a system provides ---
    def first_embedding(self, like: Tensor) -> Tensor:
        """*System.* ȳ_0, the input of step 1 (before dropout).  :param like: s_0, shape (B, d).
        :returns: shape (B, e)."""
        raise NotImplementedError

    def step_inputs(self, prev_embs: Tensor) -> Tensor:
        """*System.* x_t, what the recurrence reads of ȳ_{t-1}, for any number of steps at once (before the
        teacher-forced loop).  :param prev_embs: shape (..., e).  :returns: shape (..., ·). By default ȳ_{t-1}."""
        return prev_embs

    def step_maps(self, memory: SourceMemory, spots: HotSpots) -> Any:
        """*System.* What every step over ``memory`` applies, with the call's hot spots bound: built once per
        teacher-forced loop (or per search step, from ``spots.one_step``) and handed to :meth:`recurrence`."""
        raise NotImplementedError

    def recurrence(
        self, step_input: Tensor, query: Tensor, state: DecoderState, maps: Any
    ) -> tuple[Tensor, dict[str, Tensor], tuple[Tensor, ...], Tensor | None]:
        """*System.* One step up to the output layer.

        :param step_input: x_t, shape (B, ·).  :param query: q_{t-1} (hook 1's output, else s_{t-1}), shape (B, d).
        :param state: the state before the step.  :param maps: the loop's :meth:`step_maps`.
        :returns: s_t (B, d); the new ``state.recurrent``; the step's outputs besides s_t that the output layer
            may read (each (B, ·)); the source attention (B, S) or None (no attention)."""
        raise NotImplementedError

    def readout_inputs(self, hiddens: Tensor, outputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """*System.* What the output layer reads, of s_t and the recurrence's outputs.
        :param hiddens: s_t, shape (B, T, d) (or (B, d)).  :param outputs: the outputs, each (B, T, ·) (or (B, ·))."""
        raise NotImplementedError

    def logits(self, inputs: tuple[Tensor, ...], target_context: Tensor | None) -> Tensor:
        """*System.* The output layer.  :param inputs: the :meth:`readout_inputs`, each (..., ·).
        :param target_context: R_t (hook 2), shape (..., o), or None.  :returns: shape (..., V)."""
        raise NotImplementedError

    def output_nll(
        self, inputs: tuple[Tensor, ...], target_context: Tensor | None, target: Tensor, spots: HotSpots
    ) -> Tensor:
        """*System.* −log p(target) from the output layer's inputs (each (N, ·)), shape (N,), float32 (float64 for
        a float64 model); by default from :meth:`logits`."""
        logits = self.logits(inputs, target_context)
        return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), target, reduction="none")

    # --- the skeleton ---
    @property
    def target_context(self) -> bool:
        """Whether the output layer has a target-context term (the variant's hook 2)."""
        return "readout" in self.required_hooks

    def embed_previous(self, prev_tokens: Tensor | None, like: Tensor) -> Tensor:
        """ȳ_{t-1} after dropout.  :param prev_tokens: shape (B,), or None at the first step.
        :param like: s_{t-1}, shape (B, d).  :returns: shape (B, e)."""
        if prev_tokens is None:
            return self.dropout_embeddings(self.first_embedding(like))
        return self.dropout_embeddings(self.embedding(prev_tokens))

    def recurrent_query(self, state: DecoderState) -> tuple[Tensor, dict[str, Tensor], Tensor | None]:
        """Hook 1, where the system offers it: q_{t-1}, the new variant state and the variant's weights (or None)."""
        if "recurrence" in self.hooks:
            return self.variant.recurrent_input(state.hidden, state.variant)
        return state.hidden, state.variant, None

    def static_state(self, state: DecoderState, capacity: int) -> DecoderState:
        """``state`` in a form whose tensors keep their shapes up to step ``capacity`` (a captured search step,
        :mod:`sarnmt.decoding.captured`): the variant's growing history (at most one item a step) padded to
        ``capacity`` items (:meth:`~sarnmt.models.variants.base.DecoderVariant.with_capacity`). :meth:`decode_step`
        computes the same from it; the history attention's weights come out (B, capacity), zero past the items."""
        return replace(state, variant=self.variant.with_capacity(state.variant, capacity))

    def decode_step(
        self, prev_tokens: Tensor | None, state: DecoderState, memory: SourceMemory, spots: HotSpots
    ) -> StepOutput:
        """One step, as search calls it.  :param prev_tokens: y_{t-1}, shape (B,), or None at the first step.
        :param spots: the call's hot spots."""
        prev_emb = self.embed_previous(prev_tokens, state.hidden)
        query, vstate, rec_weights = self.recurrent_query(state)
        maps = self.step_maps(memory, spots.one_step)
        hidden, recurrent, outputs, src_weights = self.recurrence(self.step_inputs(prev_emb), query, state, maps)
        target_context, out_weights = None, None
        if self.target_context:
            target_context, vstate, out_weights = self.variant.readout_step(
                prev_emb, state.hidden, hidden, vstate, state.steps
            )
        return StepOutput(
            logits=self.logits(self.readout_inputs(hidden, outputs), target_context),
            state=DecoderState(hidden=hidden, variant=vstate, steps=state.steps + 1, recurrent=recurrent),
            src_attention=src_weights,
            tgt_attention=rec_weights if rec_weights is not None else out_weights,
        )

    def teacher_forced(
        self, tgt: Tensor, memory: SourceMemory, state: DecoderState, rows: Tensor | None, spots: HotSpots
    ) -> tuple[tuple[Tensor, ...], Tensor | None, Tensor | None, Tensor | None]:
        """The steps over gold targets up to the output layer.

        :param tgt: target ids y_1 .. y_T (EOS included, padded), shape (B, T). Positions after a sentence's EOS
            never influence earlier ones, so no target mask is needed for the recurrence.
        :param state: the state before step 1.  :param rows: the selected positions as indices into the flattened
            (B·T) grid, shape (N,), or None for all.  :param spots: the call's hot spots.
        :returns: the output layer's inputs (:meth:`readout_inputs`), each (B, T, ·) or (N, ·) at ``rows``; R_t
            there, or None; the source attention (B, T, S) or None; the variant's attention (B, T, T) or None.
        """
        batch, steps = tgt.shape
        initial = state.hidden
        # ȳ_0 .. ȳ_{T-1}, and the recurrence's inputs for every step at once
        prev_embs = torch.cat([self.first_embedding(initial).unsqueeze(1), self.embedding(tgt[:, :-1])], dim=1)
        prev_embs = self.dropout_embeddings(prev_embs)
        # unbind, not inputs[:, t]: the backward of T slices would build T full-size zero gradients (O(T²))
        inputs = self.step_inputs(prev_embs).unbind(1)
        maps = self.step_maps(memory, spots)
        hiddens, outputs, src_weights, rec_weights = [], [], [], []
        for t in range(steps):
            query, vstate, weights = self.recurrent_query(state)  # hook 1
            hidden, recurrent, step_outputs, alpha = self.recurrence(inputs[t], query, state, maps)
            state = DecoderState(hidden=hidden, variant=vstate, steps=state.steps + 1, recurrent=recurrent)
            hiddens.append(hidden)
            outputs.append(step_outputs)
            src_weights.append(alpha)
            if weights is not None:
                rec_weights.append(F.pad(weights, (0, steps - weights.size(1))))
        hiddens_all = torch.stack(hiddens, dim=1)
        target_context, out_weights = None, None
        if self.target_context:  # hook 2 for every step at once: R_1 .. R_T
            prev_hiddens = torch.cat([initial.unsqueeze(1), hiddens_all[:, :-1]], dim=1)
            target_context, out_weights = self.variant.readout_all(prev_embs, prev_hiddens, hiddens_all)
        readout_in = self.readout_inputs(hiddens_all, tuple(torch.stack(o, dim=1) for o in zip(*outputs, strict=True)))
        if rows is not None:  # index_select: its backward is one index_add, not zeros and a masked index_put
            readout_in = tuple(x.flatten(0, 1).index_select(0, rows) for x in readout_in)
            if target_context is not None:
                target_context = target_context.flatten(0, 1).index_select(0, rows)
        src_attention = None if src_weights[0] is None else torch.stack(src_weights, dim=1)
        tgt_attention = torch.stack(rec_weights, dim=1) if rec_weights else out_weights
        return readout_in, target_context, src_attention, tgt_attention

    def decode_logits(
        self, tgt: Tensor, memory: SourceMemory, state: DecoderState, positions: Tensor | None, spots: HotSpots
    ) -> DecoderOutput:
        """Teacher-forced logits (B, T, V), or (N, V) at ``positions`` (B, T, bool) when given: the output layer
        is the costliest part of a step (V × e per position), so padding is not paid for."""
        rows = None if positions is None else selected_rows(positions)
        readout_in, target_context, src_attention, tgt_attention = self.teacher_forced(tgt, memory, state, rows, spots)
        return DecoderOutput(self.logits(readout_in, target_context), src_attention, tgt_attention)

    def decode_nll(
        self, tgt: Tensor, memory: SourceMemory, state: DecoderState, mask: Tensor, spots: HotSpots
    ) -> Tensor:
        """−log p(y_t) of the gold targets, as training takes it, through the ``output_nll`` hot spot where the
        system has it (no logits kept with ``kernels.fused_output``).

        :param mask: real target positions, shape (B, T).  :returns: shape (B, T), zero on padding; float32
            (float64 for a float64 model)."""
        rows = spots.output_rows(mask)
        readout_in, target_context, _, _ = self.teacher_forced(tgt, memory, state, rows, spots)
        if rows is None:  # static shapes: every position read out, the padding's −log p zeroed (no host read)
            inputs = tuple(x.flatten(0, 1) for x in readout_in)
            context = None if target_context is None else target_context.flatten(0, 1)
            nll = self.output_nll(inputs, context, tgt.flatten(), spots).view(mask.shape)
            return nll.masked_fill(~mask.bool(), 0.0)
        target = tgt.flatten().index_select(0, rows)
        return scatter_positions(self.output_nll(readout_in, target_context, target, spots), mask)
