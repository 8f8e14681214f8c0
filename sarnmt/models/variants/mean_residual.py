"""Mean residual connections (paper §4.1, eq. 9; appendix A.3.1 d_t^avg).

d_t replaces ȳ_{t-1} in the readout. Two conventions for the first steps (docs/models.md §Mean residual connections):

- ``zero_slot`` (default, mirrors the released self-attentive code): uniform weights over the slots
  {ȳ_0 = 0, y_1 .. y_{t-1}}, so d_t = (Σ_{i<t} y_i) / t and d_1 = 0; equal to the self-attentive model at init.
- ``paper``: eq. 9 literally, d_t = (Σ_{i<t} y_i) / (t - 1), with d_1 = 0.

No parameters beyond the baseline's.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from sarnmt.models.variants.base import DecoderVariant, VariantState


class MeanResidual(DecoderVariant):
    """:param first_step: ``zero_slot`` or ``paper`` (see the module docstring)."""

    def __init__(
        self,
        emb_dim: int,
        hidden_dim: int,
        first_step: Literal["zero_slot", "paper"] = "zero_slot",
        out_dim: int | None = None,
    ) -> None:
        super().__init__(emb_dim, hidden_dim, out_dim)
        assert first_step in ("zero_slot", "paper"), first_step  # checked where it enters (models/factory.py)
        self.offset = 0 if first_step == "zero_slot" else 1

    def init_state(self, initial_hidden: Tensor) -> VariantState:
        return {"sum": initial_hidden.new_zeros(initial_hidden.size(0), self.emb_dim)}

    @staticmethod
    def mean(sums: Tensor, counts: Tensor) -> Tensor:
        """Eq. 9: d_t = Σ_i ȳ_i / n_t, at one step or at every step at once.

        :param sums: Σ ȳ_i over the history, shape (..., e).  :param counts: n_t (≥ 1), shape (...,) or ().
        :returns: shape (..., e)."""
        return sums / counts.unsqueeze(-1)

    def counts(self, words: Tensor) -> Tensor:
        """n_t for a history of ``words`` slots ȳ_0 .. ȳ_{t-1} under ``first_step``: t or t - 1, at least 1."""
        return (words - self.offset).clamp(min=1)

    def summary_step(self, prev_emb, prev_hidden, hidden, state, steps):
        total = state["sum"] + prev_emb
        words = (steps + 1).to(total.dtype)  # t slots ȳ_0 .. ȳ_{t-1}, counted on the device
        return self.mean(total, self.counts(words)), {"sum": total}, None

    def summary_all(self, prev_embs, prev_hiddens, hiddens):
        """The cumulative sums of ȳ_0 .. ȳ_{T-1} at once (the step form's running sum, in the same order)."""
        words = torch.arange(1, prev_embs.size(1) + 1, device=prev_embs.device, dtype=prev_embs.dtype)
        return self.mean(prev_embs.cumsum(dim=1), self.counts(words)), None

    def summary_window(self, items, hiddens, window):
        """d_t = the mean of the ``window`` embeddings ending with the input w_t (fewer at the start of a stream).
        A stream has no sentence start, so neither ``first_step`` convention applies: every window holds at least
        the input word."""
        steps, carried = hiddens.size(1), items.size(1) - hiddens.size(1)
        sums = torch.cat([items.new_zeros(items.size(0), 1, items.size(2)), items], dim=1).cumsum(dim=1)
        end = carried + torch.arange(1, steps + 1, device=items.device)  # items [start, end) are the window
        start = (end - window).clamp(min=0)
        return self.mean(sums[:, end] - sums[:, start], (end - start).to(items.dtype)), None
