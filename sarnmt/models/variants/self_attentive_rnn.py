"""Self-attentive RNN (paper §5.2, eqs. 18-21; appendix A.3.3; docs/models.md §Self-attentive RNN).

The readout gets an extra term for an attention summary of previous decoder states::

    p(y_t | ...) = softmax(W_o tanh(W_st s_t + W_yt ȳ_{t-1} + W_ct c_t + W_mt s̃_t)),  s̃_t = Σ_{i=0}^{t-1} α_i^t s_i

over s_0 .. s_{t-1}. Two scorers:

- ``count_consistent`` (default): e_i = vᵀ tanh(W_m s_i), +d² + d + de parameters: reproduces Table 1's 110.2M.
- ``appendix``: e_i^t = vᵀ tanh(W_m s_i + W_s s_t) as in appendix A.3.3; +2d² + d + de (111.3M).
"""

from __future__ import annotations

from typing import Literal

from torch import nn

from sarnmt.models.history import state_attention
from sarnmt.models.init import init_linear_
from sarnmt.models.variants.base import DecoderVariant


class SelfAttentiveRNN(DecoderVariant):
    """:param form: ``count_consistent`` or ``appendix`` (see the module docstring)."""

    streams = False  # its history is the decoder's states, which a language model's readout does not window

    def __init__(
        self,
        emb_dim: int,
        hidden_dim: int,
        form: Literal["count_consistent", "appendix"] = "count_consistent",
        out_dim: int | None = None,
    ) -> None:
        super().__init__(emb_dim, hidden_dim, out_dim)
        self.attention = state_attention(hidden_dim, form)
        self.queried = form == "appendix"
        self.summary_proj = init_linear_(nn.Linear(hidden_dim, self.out_dim, bias=False), orthogonal_if_square=False)

    def init_state(self, initial_hidden):
        return self.attention.empty(initial_hidden)

    def target_context(self, prev_emb, summary):
        """R_t = W_yt ȳ_{t-1} + W_mt s̃_t (eq. 18's readout terms)."""
        return self.prev_proj(prev_emb) + self.summary_proj(summary)

    def summary_step(self, prev_emb, prev_hidden, hidden, state, steps):
        state = self.attention.append(state, prev_hidden)
        summary, weights = self.attention.attend(state, hidden if self.queried else None)
        return summary, state, weights

    def summary_all(self, prev_embs, prev_hiddens, hiddens):
        """Every step at once, with a causal mask (:meth:`~sarnmt.models.history.HistoryAttention.attend_all`)."""
        return self.attention.attend_all(prev_hiddens, hiddens if self.queried else None)
