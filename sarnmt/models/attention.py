"""Additive (Bahdanau) attention over the source annotations (paper eqs. 5-7; appendix A.2).

The cGRU's form: docs/models.md §Attention and §Conditional GRU, eqs. C6-C8.

    e_j = v_aᵀ tanh(W_a h_j + b_a + U_a s'_t) + c      α = softmax_j(e_j) over real positions      c_t = Σ_j α_j h_j

As in dl4mt's cGRU the query is the intermediate state s'_t of cell 1. The key projection W_a h_j + b_a depends only
on the source, so it is computed once per batch (:meth:`SourceAttention.project_keys`) and carried in
:class:`~sarnmt.models.state.SourceMemory`. The scalar score bias c (dl4mt's ``c_tt``) cancels in the softmax; it is
kept only so that parameter counts equal the paper's.

The energies are the ``attention_scores`` hot spot, handed in by the caller (:mod:`sarnmt.models.hot_spots`; in
search, without autograd, they are formed a few sentences at a time in a cache-sized buffer,
:func:`sarnmt.kernels.attention.scores_in_chunks`); a teacher-forced loop attends through the ``step_attention`` hot
spot
(:class:`sarnmt.kernels.loop_attention.LoopAttention` computes these equations with fewer passes in the backward).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from sarnmt.models.init import init_linear_, normal_, zeros_
from sarnmt.models.state import SourceMemory


def energy_scores(keys: Tensor, query: Tensor, v: Tensor, bias: Tensor) -> Tensor:
    """e_j = v_aᵀ tanh(k_j + q) + c (eq. C8), the ``attention_scores`` hot spot's own form.

    :param keys: k_j = W_a h_j + b_a, shape (B, S, 2d).  :param query: q = U_a s'_t, shape (B, g, 1, 2d).
    :param v: v_a, shape (2d,).  :param bias: c, shape ().  :returns: e, shape (B, g, S).
    """
    hidden = torch.tanh_(keys.unsqueeze(1) + query)  # in place: one (B, g, S, 2d) buffer
    return torch.matmul(hidden, v) + bias


class SourceAttention(nn.Module):
    """:param query_dim: d.  :param annotation_dim: 2d (also the attention's inner size, as in dl4mt)."""

    def __init__(self, query_dim: int, annotation_dim: int) -> None:
        super().__init__()
        self.key_proj = init_linear_(nn.Linear(annotation_dim, annotation_dim))  # Wc_att (orth), b_att
        self.query_proj = init_linear_(nn.Linear(query_dim, annotation_dim, bias=False))  # W_comb_att
        self.v = nn.Parameter(torch.empty(annotation_dim))  # U_att
        self.score_bias = nn.Parameter(torch.zeros(()))  # c_tt
        normal_(self.v)
        zeros_(self.score_bias)

    def project_keys(self, annotations: Tensor) -> Tensor:
        """:param annotations: shape (B, S, 2d).  :returns: keys W_a h + b_a, shape (B, S, 2d)."""
        return self.key_proj(annotations)

    def forward(
        self, query: Tensor, memory: SourceMemory, scores: Callable[..., Tensor] = energy_scores
    ) -> tuple[Tensor, Tensor]:
        """Attend once: eqs. C6-C8 from s'_t.

        :param query: s'_t, shape (B·g, d), where g = ``memory.beams``: rows b·g .. b·g + g - 1 read sentence b.
        :param memory: keys from :meth:`project_keys` and annotations, shape (B, S, 2d); mask (B, S).
        :param scores: the ``attention_scores`` hot spot (the call's :class:`~sarnmt.models.hot_spots.HotSpots`).
        :returns: the context c_t, shape (B·g, 2d), and the weights α, shape (B·g, S) (exactly 0 on padding).
        """
        return self.attend(self.query_proj(query), memory, scores)

    def attend(
        self, projected: Tensor, memory: SourceMemory, scores: Callable[..., Tensor] = energy_scores
    ) -> tuple[Tensor, Tensor]:
        """:meth:`forward` from the projected query U_a s'_t, shape (B·g, 2d)."""
        batch, length, dim = memory.keys.shape
        if projected.size(0) != batch * memory.beams:
            raise ValueError(f"attention: {projected.size(0)} query rows for {batch} sentences × {memory.beams} beams")
        query = projected.view(batch, memory.beams, 1, dim)
        energies = scores(memory.keys, query, self.v, self.score_bias)  # (B, g, S)
        weights = torch.softmax(energies.masked_fill(~memory.mask.unsqueeze(1), float("-inf")), dim=-1)
        context = torch.bmm(weights, memory.annotations)  # (B, g, 2d)
        return context.view(-1, memory.annotations.size(2)), weights.view(-1, length)


class BilinearAttention(nn.Module):
    """Multiplicative attention (the tutorial's, seed 004; Luong et al. 2015's *general* score)::

        e_{t,i} = h_tᵀ W_attProj h_i^enc      α_t = softmax_i(e_t) over real positions      a_t = Σ_i α_{t,i} h_i^enc

    W_attProj h_i^enc depends only on the source: it is computed once per batch (:meth:`project_keys`). No bias, as
    in the tutorial's equations.

    :param query_dim: h, the decoder state size.  :param annotation_dim: 2h, the bi-LSTM's annotation size.
    """

    def __init__(self, query_dim: int, annotation_dim: int) -> None:
        super().__init__()
        self.key_proj = init_linear_(nn.Linear(annotation_dim, query_dim, bias=False))  # W_attProj

    def project_keys(self, annotations: Tensor) -> Tensor:
        """:param annotations: shape (B, S, 2h).  :returns: W_attProj h_i^enc, shape (B, S, h)."""
        return self.key_proj(annotations)

    def forward(self, query: Tensor, memory: SourceMemory) -> tuple[Tensor, Tensor]:
        """:param query: h_t, shape (B·g, h), g = ``memory.beams`` (rows b·g .. b·g + g - 1 read sentence b).
        :returns: a_t, shape (B·g, 2h), and α_t, shape (B·g, S) (exactly 0 on padding)."""
        batch, length, dim = memory.keys.shape
        if query.size(0) != batch * memory.beams:
            raise ValueError(f"attention: {query.size(0)} query rows for {batch} sentences × {memory.beams} beams")
        scores = torch.bmm(query.view(batch, memory.beams, dim), memory.keys.mT)  # (B, g, S)
        weights = torch.softmax(scores.masked_fill(~memory.mask.unsqueeze(1), float("-inf")), dim=-1)
        context = torch.bmm(weights, memory.annotations)
        return context.view(-1, memory.annotations.size(2)), weights.view(-1, length)
