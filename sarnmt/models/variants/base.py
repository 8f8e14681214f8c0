"""The interface every decoder variant implements: two hooks into the shared cGRU decoder.

Hook 1, *recurrence*: :meth:`DecoderVariant.recurrent_input` chooses the state that decoder cell 1 reads at step t
(s_{t-1} by default; the Memory RNN's attention summary s̃_t instead, paper eq. 14).

Hook 2, *readout*: the target-context term of the readout (appendix A.3 and A.3.1)::

    p(y_t | ...) = softmax(W_o tanh(W_st s_t + W_ct c_t + R_t))

where the variant computes R_t. The baseline's R_t is W_yt ȳ_{t-1} (the previous word, a zero vector at t = 1);
the residual variants replace ȳ_{t-1} by a summary d_t of all previous words (paper eq. 8). The variant owns this
e×o matrix (dl4mt's ``ff_logit_prev``, 0.01·N(0,1) and never orthogonal, docs/models.md §Initialisation) and any
additional one.
o is the width of the layer R_t is added into: the readout's e for the cGRU, the vocabulary V for the LSTM decoders
of the lecture notes (seed 003), whose scores are l(j) = V·[γ(j); y_{j-1}; c(j)] + b: there R_t = V_y y_{j-1} + b.

:attr:`DecoderVariant.hooks` names the hooks a variant uses; a model declares which it offers and which it needs
filled (:mod:`sarnmt.models.factory` checks the pair before anything is built).

Hook 2 is written once, as a formula that holds at every step (:meth:`DecoderVariant.target_context`: R_t from
ȳ_{t-1} and a summary d_t of the variant's history; the base formula is eq. 8's R_t = W_yt d_t, with d_t = ȳ_{t-1}
for the baseline), and the summary once in its step form (:meth:`DecoderVariant.summary_step`, the history carried in
the variant's state). The skeleton calls hook 2 in two forms built from these: :meth:`readout_step` (one step, used
by search) and :meth:`readout_all` (every step of a teacher-forced sequence at once, after the recurrent loop), whose
summary (:meth:`summary_all`) is by default the step form run over the sequence; a variant may give a faster
:meth:`summary_all`, which the tests hold to the step form and to the oracle. A third form,
:meth:`readout_window`, is the language models' (Table 6): a segment of a continuous stream whose history is a
window carried across segments; a variant that has it (:meth:`summary_window`) says so with
:attr:`DecoderVariant.streams`. So a new variant is one method (its :meth:`summary_step`, or its
:meth:`target_context`) and one yaml. Variant state lives in the ``dict`` that :meth:`init_state` returns; it is
carried by :class:`~sarnmt.models.state.DecoderState` and reordered generically. Every tensor in it must be
batch-first.

A state that grows from step to step (a history of previous words or states) has a second, fixed-shape form, which
the search needs where it replays its steps from a capture (:mod:`sarnmt.decoding.captured`): room for every step
from the start. :meth:`with_capacity` gives it, and it is derived: every
:class:`~sarnmt.models.history.HistoryAttention` of the variant pads its own entries, so a variant whose history is
one (the self-attentive residual decoder, the Memory RNN, the self-attentive RNN) writes nothing for it. A variant
whose state grows in another way overrides :meth:`with_capacity`; one whose state keeps its shapes (the baseline,
the mean residual decoder's running sum, a window of fixed length) has that form already.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.models.history import HistoryAttention
from sarnmt.models.init import init_linear_

VariantState = dict[str, Tensor]


class DecoderVariant(nn.Module):
    """Base class; by itself it is the baseline decoder (dl4mt session 2, paper eq. 3).

    :param emb_dim: e, the target embedding size (also the cGRU's readout width).
    :param hidden_dim: d, the decoder state size.
    :param out_dim: o, the width of R_t (None: e, the cGRU's readout).
    """

    hooks: ClassVar[frozenset[str]] = frozenset({"readout"})
    # whether :meth:`readout_window` computes this variant (the language models of Table 6 need it)
    streams: ClassVar[bool] = True

    def __init__(self, emb_dim: int, hidden_dim: int, out_dim: int | None = None) -> None:
        super().__init__()
        self.emb_dim = emb_dim
        self.hidden_dim = hidden_dim
        self.out_dim = emb_dim if out_dim is None else out_dim
        self.prev_proj = init_linear_(nn.Linear(emb_dim, self.out_dim), orthogonal_if_square=False)

    def init_state(self, initial_hidden: Tensor) -> VariantState:
        """:param initial_hidden: s_0, shape (B, d).  :returns: the variant's state before step 1."""
        return {}

    def with_capacity(self, state: VariantState, capacity: int) -> VariantState:
        """The state in its fixed-shape form: the same shapes at every step up to step ``capacity`` (the module
        docstring; a captured search step carries it). Derived: each
        :class:`~sarnmt.models.history.HistoryAttention` of the variant pads its own entries to ``capacity`` items
        (:meth:`~sarnmt.models.history.HistoryAttention.with_capacity`); every other entry is left as it is, so a
        variant whose state grows otherwise must override this.

        :param state: the variant's state, each tensor batch-first.  :param capacity: T, the most items a history
            will hold.  :returns: a new dict (``state`` untouched)."""
        for history in self.modules():
            if isinstance(history, HistoryAttention):
                state = history.with_capacity(state, capacity)
        return state

    def recurrent_input(self, hidden: Tensor, state: VariantState) -> tuple[Tensor, VariantState, Tensor | None]:
        """Hook 1, called at the start of step t.

        :param hidden: s_{t-1}, shape (B, d).
        :returns: the state that cell 1 reads, shape (B, d); the new variant state; attention weights over the
            variant's history, shape (B, t), or None.
        """
        return hidden, state, None

    # --- hook 2, written once: the formula and the summary's step form ---
    def target_context(self, prev_emb: Tensor, summary: Tensor | None) -> Tensor:
        """R_t = W_yt d_t (paper eq. 8), at one step or at every step at once (any leading shape).

        :param prev_emb: ȳ_{t-1}, shape (..., e).  :param summary: d_t, shape (..., e), or None: d_t = ȳ_{t-1} (the
            baseline, paper eq. 3).  :returns: R_t, shape (..., o)."""
        return self.prev_proj(prev_emb if summary is None else summary)

    def summary_step(
        self, prev_emb: Tensor, prev_hidden: Tensor, hidden: Tensor, state: VariantState, steps: int | Tensor
    ) -> tuple[Tensor | None, VariantState, Tensor | None]:
        """The history summary that :meth:`target_context` reads at one step.

        :param prev_emb: ȳ_{t-1}, shape (B, e) (zeros at t = 1).
        :param prev_hidden: s_{t-1}, shape (B, d).
        :param hidden: s_t, shape (B, d).
        :param steps: t - 1, a long tensor of shape () on the state's device (read there: a step never builds a
            tensor from a host number).
        :returns: the summary, shape (B, ·), or None (the baseline has none); the new variant state; attention
            weights over the history, shape (B, t), or None.
        """
        return None, state, None

    def summary_all(
        self, prev_embs: Tensor, prev_hiddens: Tensor, hiddens: Tensor
    ) -> tuple[Tensor | None, Tensor | None]:
        """The summaries of every step at once: by default :meth:`summary_step` run over the sequence.

        :param prev_embs: ȳ_0 .. ȳ_{T-1}, shape (B, T, e) (ȳ_0 = 0).
        :param prev_hiddens: s_0 .. s_{T-1}, shape (B, T, d).
        :param hiddens: s_1 .. s_T, shape (B, T, d).
        :returns: the summaries, shape (B, T, ·), or None; attention weights, shape (B, T, T) (row t over items
            0..t), or None.
        """
        if type(self).summary_step is DecoderVariant.summary_step:  # the baseline's formula: no history
            return None, None
        state, steps = self.init_state(prev_hiddens[:, 0]), prev_embs.size(1)
        counts = torch.arange(steps, device=prev_embs.device)  # t − 1 of every step, read in place
        summaries, weights = [], []
        for t, (prev_emb, prev_hidden, hidden) in enumerate(
            zip(prev_embs.unbind(1), prev_hiddens.unbind(1), hiddens.unbind(1), strict=True)
        ):
            summary, state, step_weights = self.summary_step(prev_emb, prev_hidden, hidden, state, counts[t])
            if summary is None:  # no history: no summary at any step
                return None, None
            summaries.append(summary)
            if step_weights is not None:
                weights.append(F.pad(step_weights, (0, steps - step_weights.size(1))))
        return torch.stack(summaries, dim=1), torch.stack(weights, dim=1) if weights else None

    def summary_window(self, items: Tensor, hiddens: Tensor, window: int) -> tuple[Tensor | None, Tensor | None]:
        """The summaries of a segment of a continuous stream (:meth:`readout_window`); None for the baseline.
        :returns: shape (B, T, ·), or None; attention weights, shape (B, T, M + T), or None."""
        return None, None

    # --- hook 2's forms, from the formula and the summary ---
    def readout_step(
        self, prev_emb: Tensor, prev_hidden: Tensor, hidden: Tensor, state: VariantState, steps: int | Tensor
    ) -> tuple[Tensor, VariantState, Tensor | None]:
        """Hook 2, one step (arguments as :meth:`summary_step`).

        :returns: R_t, shape (B, o); the new variant state; attention weights, shape (B, t), or None.
        """
        summary, state, weights = self.summary_step(prev_emb, prev_hidden, hidden, state, steps)
        return self.target_context(prev_emb, summary), state, weights

    def readout_all(self, prev_embs: Tensor, prev_hiddens: Tensor, hiddens: Tensor) -> tuple[Tensor, Tensor | None]:
        """Hook 2, every step at once (arguments as :meth:`summary_all`).

        :returns: R_1 .. R_T, shape (B, T, o), and attention weights, shape (B, T, T) (row t over items 0..t), or None.
        """
        summary, weights = self.summary_all(prev_embs, prev_hiddens, hiddens)
        return self.target_context(prev_embs, summary), weights

    def readout_window(self, items: Tensor, hiddens: Tensor, window: int) -> tuple[Tensor, Tensor | None]:
        """Hook 2 in a language model (Table 6, :class:`sarnmt.lm.heads.ResidualOutput`): every step of a
        segment of a continuous stream, the history limited to a window and carried across segments.

        :param items: the embeddings of the previous words: M carried from the previous segment, then the segment's
            T inputs w_1 .. w_T, shape (B, M + T, e). Step t predicts w_{t+1}; its history is the ``window`` words
            ending with its input w_t (the counterpart of ȳ_0 .. ȳ_{t-1} in translation, whose last item is the
            decoder's input).
        :param hiddens: the recurrent outputs h_1 .. h_T, shape (B, T, d) (the scope query of eq. 12).
        :returns: R_1 .. R_T, shape (B, T, o), and attention weights, shape (B, T, M + T), or None.
        """
        summary, weights = self.summary_window(items, hiddens, window)
        return self.target_context(items[:, items.size(1) - hiddens.size(1) :], summary), weights


class Baseline(DecoderVariant):
    """The NMT baseline: the readout sees the previous word only (paper eq. 3, Table 1 row "NMT baseline")."""


class NoTargetContext(nn.Module):
    """No target-context term at all: the output layer sees neither the previous word nor a summary of the
    history. The decoder of a model whose output layer has no such term (the tutorial's input-feeding LSTM, seed
    004: P_t = softmax(W_vocab o_t)) takes this, and only this; it has no parameters and no hooks."""

    hooks: ClassVar[frozenset[str]] = frozenset()
    streams: ClassVar[bool] = False

    def __init__(self, emb_dim: int, hidden_dim: int, out_dim: int | None = None) -> None:
        super().__init__()

    def with_capacity(self, state: VariantState, capacity: int) -> VariantState:
        """No history: the state's shapes never change (:meth:`DecoderVariant.with_capacity`)."""
        return state
