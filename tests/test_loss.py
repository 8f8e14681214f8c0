"""The fused output layer and cross-entropy (:func:`sarnmt.training.loss.linear_nll`) against PyTorch's own."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sarnmt.training.loss import linear_nll

N, E, V = 7, 5, 11


def _inputs(dtype=torch.float64, bias=True, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(N, E, generator=gen, dtype=dtype) * 2).requires_grad_()
    w = (torch.randn(V, E, generator=gen, dtype=dtype) * 2).requires_grad_()
    b = (torch.randn(V, generator=gen, dtype=dtype)).requires_grad_() if bias else None
    target = torch.randint(0, V, (N,), generator=gen)
    target[0] = target[1]  # a repeated id: the onehot subtraction must not depend on distinct targets
    upstream = torch.rand(N, generator=gen, dtype=dtype)  # a different gradient per row
    return x, w, b, target, upstream


def _grads(loss, tensors):
    return torch.autograd.grad(loss, [t for t in tensors if t is not None])


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("chunk_rows", [1, 3, N, None])
def test_values_and_gradients_equal_cross_entropy_of_linear(bias, chunk_rows):
    x, w, b, target, upstream = _inputs(bias=bias)
    fused = linear_nll(x, w, b, target, chunk_rows=chunk_rows)
    plain = F.cross_entropy(F.linear(x, w, b), target, reduction="none")
    torch.testing.assert_close(fused, plain, atol=1e-12, rtol=1e-12)
    for got, want in zip(
        _grads((fused * upstream).sum(), (x, w, b)), _grads((plain * upstream).sum(), (x, w, b)), strict=True
    ):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)


def test_gradcheck():
    x, w, b, target, _ = _inputs()
    assert torch.autograd.gradcheck(lambda x, w, b: linear_nll(x, w, b, target, chunk_rows=3), (x, w, b))


def test_only_requested_gradients_are_formed():
    x, w, b, target, _ = _inputs()
    (grad_w,) = torch.autograd.grad(linear_nll(x.detach(), w, b.detach(), target).sum(), [w])
    assert grad_w.shape == w.shape


def test_bf16_autocast_follows_linear_then_float_cross_entropy():
    x, w, b, target, upstream = _inputs(dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = linear_nll(x, w, b, target, chunk_rows=3)
        plain = F.cross_entropy(F.linear(x, w, b).float(), target, reduction="none")
    assert fused.dtype == torch.float32
    torch.testing.assert_close(fused, plain, atol=1e-5, rtol=1e-6)  # the same bf16 products, fp32 softmax
    for got, want in zip(
        _grads((fused * upstream).sum(), (x, w, b)), _grads((plain * upstream).sum(), (x, w, b)), strict=True
    ):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want, atol=0.05, rtol=0.02)  # bf16 rounding of the gradient's factors


def test_bad_shapes_are_refused():
    x, w, b, target, _ = _inputs()
    with pytest.raises(ValueError, match=r"features \(7, 5\).*target \(6,\)"):
        linear_nll(x, w, b, target[:6])
    with pytest.raises(ValueError, match="shape \\(N, e\\)"):
        linear_nll(x.unsqueeze(0), w, b, target)
