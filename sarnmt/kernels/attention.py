"""The ``attention_scores`` hot spot in search, and tanh as 2σ(2x) − 1 (``kernels.chunked_attention``,
``kernels.sigmoid_tanh``).

Search runs without autograd, and there the energies tanh(k_j + q) of a batch of B sentences × g beams (B·g·S·2d
numbers, tens of megabytes) are formed a few sentences at a time in one buffer that stays in the CPU's cache,
instead of in one tensor that goes to main memory and back at every step (batched beam-5 search on 2 CPU cores:
+4-5% sentences/s). The pieces are a CPU's rule (:func:`chunk_rows`): on a GPU the energies are one piece.
Their tanh may be computed as 2σ(2x) − 1 (:func:`tanh_`), the same function: PyTorch's CPU ``tanh`` for float32
takes about 7 ns a number on the AMD EPYC of these machines, its ``sigmoid`` about 1.2 (both one thread, in cache;
docs/performance.md), and the energies are the largest elementwise work of a step.
"""

from __future__ import annotations

import torch
from torch import Tensor

CACHE_CHUNK = 1 << 19  # numbers in the search-time energy buffer: 2 MiB in fp32, about one core's L2 cache


def tanh_(x: Tensor, by_sigmoid: bool) -> Tensor:
    """tanh of ``x`` in place, for tensors autograd does not record (it overwrites ``x`` several times).

    With ``by_sigmoid`` (``kernels.sigmoid_tanh``) and a float32 or float64 ``x``: tanh x = 2σ(2x) − 1, exactly the
    same function, within 2e-7 of ``torch.tanh`` in float32 (1e-16 in float64). Half-precision tensors keep
    ``torch.tanh``: in bfloat16 the subtraction would cost tanh's relative precision near 0.

    :param x: any shape.  :returns: ``x``.
    """
    if not by_sigmoid or x.dtype not in (torch.float32, torch.float64):
        return x.tanh_()
    return x.mul_(2).sigmoid_().mul_(2).sub_(1)


def chunk_rows(device: torch.device, batch: int, beams: int, length: int, dim: int) -> int:
    """Sentences per piece of :func:`scores_in_chunks`: on a CPU as many as fill :data:`CACHE_CHUNK` numbers
    (B·g·S·2d in all); on any other device all B at once, one piece: a GPU has no cache of that size to fit, and a
    piece per sentence there is a Python loop over the batch at every step.

    :param device: where the energies are formed.  :param batch: B.  :param beams: g.  :param length: S.
    :param dim: 2d.  :returns: rows per piece, 1..B (B: one piece).
    """
    if device.type != "cpu":
        return max(1, batch)
    return min(max(1, batch), max(1, CACHE_CHUNK // (beams * length * dim)))


def scores_in_chunks(keys: Tensor, query: Tensor, v: Tensor, bias: Tensor, by_sigmoid: bool) -> Tensor:
    """v_aᵀ tanh(k_j + q) + c (:func:`sarnmt.models.attention.energy_scores`) without autograd, a few sentences at
    a time in one reused buffer.

    :param keys: k_j, shape (B, S, 2d).  :param query: U_a s'_t, shape (B, g, 1, 2d).  :param v: v_a, shape (2d,).
    :param bias: c, shape ().  :param by_sigmoid: tanh as 2σ(2x) − 1 (:func:`tanh_`).  :returns: shape (B, g, S).
    """
    batch, beams, _, dim = query.shape
    rows = chunk_rows(query.device, batch, beams, keys.size(1), dim)
    buffer = torch.empty(
        (min(rows, batch), beams, keys.size(1), dim), dtype=torch.result_type(keys, query), device=query.device
    )
    scores = []
    for start in range(0, batch, rows):
        part = buffer[: min(rows, batch - start)]
        torch.add(keys[start : start + rows].unsqueeze(1), query[start : start + rows], out=part)
        tanh_(part, by_sigmoid)
        scores.append(torch.matmul(part, v))
    return (scores[0] if len(scores) == 1 else torch.cat(scores)) + bias
