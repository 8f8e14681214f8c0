"""LoopLinear: the per-step linear map whose weight gradient is formed once after the loop."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sarnmt.kernels.loop_linear import LoopLinear


def _unroll(step, x0: torch.Tensor, inputs: list[torch.Tensor]) -> torch.Tensor:
    """A small recurrence h_t = tanh(step(h_{t-1}) + u_t); the loss reads every h_t but the last."""
    h, outputs = x0, []
    for u in inputs:
        h = torch.tanh(step(h) + u)
        outputs.append(h)
    return sum((o * (i + 1)).sum() for i, o in enumerate(outputs[:-1]))


def test_gradients_equal_plain_autograd():
    torch.manual_seed(0)
    weight = torch.randn(5, 5, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(5, dtype=torch.float64, requires_grad=True)
    x0 = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    inputs = [torch.randn(3, 5, dtype=torch.float64) for _ in range(6)]
    plain = torch.autograd.grad(_unroll(lambda h: F.linear(h, weight, bias), x0, inputs), (weight, bias, x0))
    loop = LoopLinear(weight, bias)
    deferred = torch.autograd.grad(_unroll(loop, x0, inputs), (weight, bias, x0))
    for got, want in zip(deferred, plain, strict=True):
        assert want.abs().max() > 0.1
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    assert not loop.record.inputs and not loop.record.grads  # nothing kept after the backward pass


def test_bf16_autocast_casts_the_weight_once_and_returns_fp32_gradients():
    torch.manual_seed(0)
    weight = torch.randn(8, 8, requires_grad=True)
    x0 = torch.randn(4, 8)
    inputs = [torch.randn(4, 8) for _ in range(5)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loop = LoopLinear(weight)
        assert loop.weight.dtype == torch.bfloat16
        loss = _unroll(loop, x0, inputs)
    (grad,) = torch.autograd.grad(loss.float(), (weight,))
    (want,) = torch.autograd.grad(_unroll(lambda h: F.linear(h, weight), x0, inputs), (weight,))
    assert grad.dtype == torch.float32
    torch.testing.assert_close(grad, want, atol=0.1 * want.abs().max().item(), rtol=0)


def test_a_stack_of_weights_equals_plain_autograd_per_map():
    """K maps applied to K inputs at once (the encoder's two directions): each map's gradient as plain autograd."""
    torch.manual_seed(1)
    weights = [torch.randn(5, 5, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    biases = [torch.randn(5, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    x0 = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    inputs = [torch.randn(2, 3, 5, dtype=torch.float64) for _ in range(4)]

    def plain_step(h):
        return torch.stack([F.linear(h[k], weights[k], biases[k]) for k in range(2)])

    wrt = (*weights, *biases, x0)
    plain = torch.autograd.grad(_unroll(plain_step, x0, inputs), wrt)
    loop = LoopLinear(torch.stack(weights), torch.stack(biases))
    deferred = torch.autograd.grad(_unroll(loop, x0, inputs), wrt)
    for got, want in zip(deferred, plain, strict=True):
        assert want.abs().max() > 0.1
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
