"""Additive (Bahdanau) attention over the source annotations (paper eqs. 5-7; appendix A.2).

The cGRU's form: docs/models.md §Attention and §Conditional GRU, eqs. C6-C8.

    e_j = v_aᵀ tanh(W_a h_j + b_a + U_a s'_t) + c      α = softmax_j(e_j) over real positions      c_t = Σ_j α_j h_j

As in dl4mt's cGRU the query is the intermediate state s'_t of cell 1. The key projection W_a h_j + b_a depends only
on the source, so it is computed once per batch (:meth:`SourceAttention.project_keys`) and carried in
:class:`~sarnmt.models.state.SourceMemory`. The scalar score bias c (dl4mt's ``c_tt``) cancels in the softmax; it is
kept only so that parameter counts equal the paper's.

Search runs without autograd, and there (``kernels.chunked_attention``, :mod:`sarnmt.models.kernels`) the energies
tanh(W_a h_j + b_a + U_a s'_t) of a batch of B sentences × g beams (B·g·S·2d numbers, tens of megabytes) are formed
a few sentences at a time in one buffer that stays in the CPU's cache, instead of in one tensor that goes to main
memory and back at every step (batched beam-5 search on 2 CPU cores: +4-5% sentences/s), their tanh as 2σ(2x) − 1
(``kernels.sigmoid_tanh``: the same function, several times faster on a CPU). With autograd they are
formed in one piece, kept for backward; the teacher-forced training loop attends through
:class:`~sarnmt.models.loop_attention.LoopAttention`, the same equations with fewer passes in the backward.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from sarnmt.models.init import init_linear_, normal_, zeros_
from sarnmt.models.kernels import tanh_
from sarnmt.models.state import SourceMemory

CACHE_CHUNK = 1 << 19  # numbers in the search-time energy buffer: 2 MiB in fp32, about one core's L2 cache


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
        self, query: Tensor, memory: SourceMemory, chunked: bool = False, sigmoid_tanh: bool = False
    ) -> tuple[Tensor, Tensor]:
        """Attend once.

        :param query: s'_t, shape (B·g, d), where g = ``memory.beams``: rows b·g .. b·g + g - 1 read sentence b.
        :param memory: keys from :meth:`project_keys` and annotations, shape (B, S, 2d); mask (B, S).
        :param chunked: form the energies in cache-sized pieces (search, no autograd: ``kernels.chunked_attention``).
        :param sigmoid_tanh: in those pieces, tanh as 2σ(2x) − 1 (``kernels.sigmoid_tanh``, :func:`tanh_`).
        :returns: the context c_t, shape (B·g, 2d), and the weights α, shape (B·g, S) (exactly 0 on padding).
        """
        batch, length, dim = memory.keys.shape
        if query.size(0) != batch * memory.beams:
            raise ValueError(f"attention: {query.size(0)} query rows for {batch} sentences × {memory.beams} beams")
        query = self.query_proj(query).view(batch, memory.beams, 1, dim)
        if chunked:
            scores = self._scores_in_chunks(query, memory.keys, sigmoid_tanh)
        else:
            hidden = torch.tanh_(memory.keys.unsqueeze(1) + query)  # in place: one (B, g, S, 2d) buffer
            scores = torch.matmul(hidden, self.v) + self.score_bias  # (B, g, S)
        weights = torch.softmax(scores.masked_fill(~memory.mask.unsqueeze(1), float("-inf")), dim=-1)
        context = torch.bmm(weights, memory.annotations)  # (B, g, 2d)
        return context.view(-1, memory.annotations.size(2)), weights.view(-1, length)

    def _scores_in_chunks(self, query: Tensor, keys: Tensor, sigmoid_tanh: bool) -> Tensor:
        """v_aᵀ tanh(keys + query) + c without autograd, a few sentences at a time in one reused buffer.

        :param query: U_a s'_t, shape (B, g, 1, 2d).  :param keys: shape (B, S, 2d).  :returns: shape (B, g, S).
        """
        batch, beams, _, dim = query.shape
        rows = max(1, CACHE_CHUNK // (beams * keys.size(1) * dim))
        buffer = torch.empty(
            (min(rows, batch), beams, keys.size(1), dim), dtype=torch.result_type(keys, query), device=query.device
        )
        scores = []
        for start in range(0, batch, rows):
            part = buffer[: min(rows, batch - start)]
            torch.add(keys[start : start + rows].unsqueeze(1), query[start : start + rows], out=part)
            tanh_(part, sigmoid_tanh)
            scores.append(torch.matmul(part, self.v))
        return torch.cat(scores) + self.score_bias


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
