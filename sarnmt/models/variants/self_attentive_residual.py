"""Self-attentive residual connections (paper §4.2, eqs. 10-13; appendix A.3.1).

What the released code does beyond the paper: docs/models.md §Self-attentive residual connections.

    d_t = Σ_{i=0}^{t-1} α_i^t ȳ_i,  α^t = softmax(e^t),  ȳ_0 = 0 (the released code's zero slot)
    content (eq. 13):        e_i^t = vᵀ tanh(W_y ȳ_i + b)
    content+scope (eq. 12):  e_i^t = vᵀ tanh(W_y ȳ_i + b + W_s s_t)

d_t replaces ȳ_{t-1} in the readout only; cell 1 still reads ȳ_{t-1}. Keys and values come from the decoder's own
target embeddings. ``content`` is the released model and Table 1's row (+e² + 2e parameters); ``content_scope`` adds
W_s (d×e) and is Table 4's other row.
"""

from __future__ import annotations

from typing import Literal

from sarnmt.models.history import HistoryAttention
from sarnmt.models.variants.base import DecoderVariant


class SelfAttentiveResidual(DecoderVariant):
    """:param scorer: ``content`` (eq. 13) or ``content_scope`` (eq. 12)."""

    def __init__(
        self,
        emb_dim: int,
        hidden_dim: int,
        scorer: Literal["content", "content_scope"] = "content",
        out_dim: int | None = None,
    ) -> None:
        super().__init__(emb_dim, hidden_dim, out_dim)
        assert scorer in ("content", "content_scope"), scorer  # checked where it enters (models/factory.py)
        self.scoped = scorer == "content_scope"
        self.attention = HistoryAttention(emb_dim, hidden_dim if self.scoped else None, key_bias=True, prefix="y_")

    def init_state(self, initial_hidden):
        return self.attention.empty(initial_hidden.new_zeros(initial_hidden.size(0), self.emb_dim))

    def summary_step(self, prev_emb, prev_hidden, hidden, state, steps):
        state = self.attention.append(state, prev_emb)
        summary, weights = self.attention.attend(state, hidden if self.scoped else None)
        return summary, state, weights

    def summary_all(self, prev_embs, prev_hiddens, hiddens):
        """Every step at once, with a causal mask (:meth:`~sarnmt.models.history.HistoryAttention.attend_all`)."""
        return self.attention.attend_all(prev_embs, hiddens if self.scoped else None)

    def summary_window(self, items, hiddens, window):
        """d_t over the ``window`` embeddings ending with the input w_t (eqs. 10-13 over a window of a stream)."""
        return self.attention.attend_window(
            items, hiddens if self.scoped else None, hiddens.size(1), window, current=True
        )
