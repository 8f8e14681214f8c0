"""The ``output_nll`` hot spot as one operation: the output layer and the cross-entropy (``kernels.fused_output``).

The model's own form (:func:`sarnmt.models.hot_spots.output_nll`) forms the logits (N, V) and then their
cross-entropy; here each block of logits is turned into what the loss and the backward pass need while it is in
cache, and the logits are never kept (docs/performance.md).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from sarnmt.utils.precision import autocast_dtype

# numbers of logits formed at once on CPU: 2 MiB in fp32, about one core's L2 cache
CPU_CHUNK = 1 << 19


def linear_nll(
    features: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, chunk_rows: int | None = None
) -> Tensor:
    """−log softmax(features Wᵀ + b)[target] per row: the output layer and the cross-entropy in one operation.

    The same values and gradients as ``F.cross_entropy(F.linear(features, W, b), target, reduction="none")``
    (up to rounding), with less memory traffic: the logits are formed a few rows at a time, and each block is
    turned into its log-sum-exp, its picked logit and the gradient factor softmax − onehot while it is in cache
    (on CPU, blocks of :data:`CPU_CHUNK` numbers; on GPU, all rows at once). Only that factor P (N, V) is kept
    for the backward pass, in place of the logits' log-softmax; the backward pass is then two matrix products
    with P, the upstream gradient g scaling the N×e sides (∂x = diag(g) P W, ∂W = Pᵀ diag(g) x, ∂b = Pᵀ g), so P
    is never read elementwise again. Under autocast the products run in the autocast dtype and the softmax in
    float32, as ``F.linear`` followed by ``.float()`` and ``F.cross_entropy`` would; P is kept in the autocast
    dtype, which is where the gradient of the logits would be cast anyway.

    :param features: shape (N, e).  :param weight: W, shape (V, e).  :param bias: b, shape (V,), or None.
    :param target: ids, shape (N,).  :param chunk_rows: rows per block (default: from the device, see above).
    :returns: −log p, shape (N,), in float32 (float64 for float64 inputs).
    """
    if features.dim() != 2 or target.shape != features.shape[:1]:
        raise ValueError(
            f"linear_nll: features {tuple(features.shape)} need shape (N, e) and target "
            f"{tuple(target.shape)} shape (N,)"
        )
    device = features.device.type
    dtype = autocast_dtype(device) or torch.promote_types(features.dtype, weight.dtype)
    if chunk_rows is None:
        chunk_rows = block_rows(features.device, features.size(0), weight.size(0))
    with torch.autocast(device, enabled=False):
        return _LinearNLL.apply(
            features.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype), target, chunk_rows
        )


def block_rows(device: torch.device, rows: int, vocab: int) -> int:
    """Rows of logits :func:`linear_nll` forms at once: on a CPU as many as fill :data:`CPU_CHUNK` numbers, on any
    other device all N (one block).  :param rows: N.  :param vocab: V.  :returns: 1..N (N: one block)."""
    if device.type != "cpu":
        return max(1, rows)
    return max(1, CPU_CHUNK // vocab)


class _LinearNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, rows: int) -> Tensor:
        n, vocab = x.size(0), weight.size(0)
        factor = x.new_empty(n, vocab)  # P = softmax − onehot
        loss_dtype = torch.promote_types(x.dtype, torch.float32)  # float32 under bf16 autocast
        nll = torch.empty(n, dtype=loss_dtype, device=x.device)
        in_place = factor.dtype == loss_dtype
        for start in range(0, n, rows):
            block = slice(start, start + rows)
            picked_ids = target[block].unsqueeze(1)
            if not in_place:
                logits = F.linear(x[block], weight, bias).to(loss_dtype)
            elif bias is None:
                logits = torch.mm(x[block], weight.t(), out=factor[block])
            else:
                logits = torch.addmm(bias, x[block], weight.t(), out=factor[block])
            lse = torch.logsumexp(logits, dim=1, keepdim=True)
            torch.sub(lse, logits.gather(1, picked_ids), out=nll[block].unsqueeze(1))
            logits.sub_(lse).exp_().scatter_add_(1, picked_ids, logits.new_full(picked_ids.shape, -1.0))
            if not in_place:
                factor[block] = logits
        ctx.has_bias = bias is not None
        ctx.save_for_backward(x, weight, factor)
        return nll

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        x, weight, factor = ctx.saved_tensors
        scale = grad.to(factor.dtype)
        grad_x = (factor @ weight).mul_(scale.unsqueeze(1)) if ctx.needs_input_grad[0] else None
        grad_w = factor.t() @ (x * scale.unsqueeze(1)) if ctx.needs_input_grad[1] else None
        grad_b = factor.t() @ scale if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b, None, None


def every_position(positions: Tensor) -> None:
    """The ``output_rows`` hot spot of a step with static shapes (``static_shapes``): None, every one of the B·T
    positions, padding included (the model zeroes the padding's −log p), so that no host synchronisation decides a
    shape.  :param positions: shape (B, T), bool; unread."""
    return None
