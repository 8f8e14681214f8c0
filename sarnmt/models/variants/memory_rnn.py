"""Memory RNN (paper §5.1, eqs. 14-17; appendix A.3.2; docs/models.md §Memory RNN).

Cell 1 reads an attention summary of previous decoder states instead of s_{t-1}::

    s̃_t = Σ_{i=0}^{t-1} α_i^t s_i,   s'_t = GRU1(ȳ_{t-1}, s̃_t)

The memory holds s_0 .. s_{t-1} (s_0 included, like the residual decoders' zero slot). Two scorers:

- ``count_consistent`` (default): e_i = vᵀ tanh(W_m s_i), +d² + d parameters: reproduces Table 1's 109.7M.
- ``appendix``: e_i^t = vᵀ tanh(W_m s_i + W_s s_{t-1}) as in appendix A.3.2, with the query s_{t-1} because s_t is
  computed from the summary; +2d² + d parameters (110.8M, not Table 1's figure).

This is the only variant whose attention feeds the recurrence, so it attends inside the recurrent loop.
"""

from __future__ import annotations

from typing import Literal

from sarnmt.models.history import state_attention
from sarnmt.models.variants.base import DecoderVariant


class MemoryRNN(DecoderVariant):
    """:param form: ``count_consistent`` or ``appendix`` (see the module docstring)."""

    streams = False  # its history is the decoder's states, which a language model's readout does not window

    hooks = frozenset({"readout", "recurrence"})

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

    def init_state(self, initial_hidden):
        return self.attention.empty(initial_hidden)

    def recurrent_input(self, hidden, state):
        state = self.attention.append(state, hidden)
        summary, weights = self.attention.attend(state, hidden if self.queried else None)
        return summary, state, weights
