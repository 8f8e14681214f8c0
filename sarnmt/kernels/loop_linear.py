"""The ``step_linear`` hot spot of a loop that will be differentiated (``kernels.loop_weights``): a linear map applied
at every step, with its weight gradient formed once after the loop.

Inside the teacher-forced loop the decoder applies the same matrices at every step (U of both cells, the attention's
query projection, cell 2's input matrix). Plain autograd computes each step's weight gradient g_tᵀ x_t as its own
product with an inner size of only B (the batch) and adds it into the weight's gradient: T small matrix products and
T full-size additions (under bf16 autocast each addition also converts bf16 to fp32). :class:`LoopLinear` keeps the
per-step backward for the inputs (g_t W, which backpropagation through time needs) but records g_t, and forms the
weight gradient once::

    ∂L/∂W = Σ_t g_tᵀ x_t = Gᵀ X      (G: (T·B, out), X: (T·B, in))      ∂L/∂b = Σ_t Σ_rows g_t

as one product with inner size T·B. It is the same sum in another order (exact up to rounding; the tests compare the
gradients with plain autograd and with the reference implementation in float64). Only the weight gradient is
deferred; hooks on the parameters (DDP's gradient buckets among them) fire as usual, once.

How it is ordered: every step's node also takes a one-element token made from the weight by a gathering node.
Autograd runs the gathering node only after every step's node has passed its (zero) gradient to the token, that is
after every g_t has been recorded (:func:`gather_token`; :mod:`sarnmt.kernels.loop_attention` defers the attention's
source-side gradients the same way).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from sarnmt.utils.precision import autocast_dtype


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, record: Any, *tensors: Tensor | None) -> Tensor:
        ctx.record = record
        return tensors[0].new_zeros(1)

    @staticmethod
    def backward(ctx: Any, _token_grad: Tensor):
        return None, *ctx.record.gradients()


def gather_token(record: Any, *tensors: Tensor | None) -> Tensor:
    """The token of one loop: a one-element tensor whose gradient node returns ``record.gradients()`` (one per
    tensor, or None) as the gradients of ``tensors``. Every step's node takes the token as an input and returns a
    zero gradient for it, so autograd runs the gathering node only after every step has recorded what it leaves."""
    return _Gather.apply(record, *tensors)


class _Record:
    """What the steps leave for the gathering node: inputs x_t and output gradients g_t, by step."""

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        self.dtype, self.has_bias = weight.dtype, bias is not None
        self.inputs: list[Tensor] = []
        self.grads: dict[int, Tensor] = {}

    def gradients(self) -> tuple[Tensor | None, Tensor | None]:
        """∂L/∂W = Gᵀ X and ∂L/∂b = Σ rows of G, in the parameters' dtype; the record is emptied."""
        steps = sorted(self.grads)
        if not steps:
            return None, None
        grads = torch.cat([self.grads[t] for t in steps], dim=-2)  # ([K,] N, out)
        inputs = torch.cat([self.inputs[t] for t in steps], dim=-2).to(grads.dtype)  # ([K,] N, in)
        weight_grad = (grads.mT @ inputs).to(self.dtype)
        bias_grad = grads.sum(dim=-2).to(self.dtype) if self.has_bias else None
        self.grads.clear()
        self.inputs.clear()
        return weight_grad, bias_grad


class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, token: Tensor, weight: Tensor, bias: Tensor | None, record: _Record) -> Tensor:
        ctx.record, ctx.step, ctx.token_dtype = record, len(record.inputs), token.dtype
        ctx.save_for_backward(weight)
        record.inputs.append(x.detach())
        out = x @ weight.mT
        return out if bias is None else out + bias.unsqueeze(-2)

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        (weight,) = ctx.saved_tensors
        ctx.record.grads[ctx.step] = grad
        grad_x = grad @ weight.to(grad.dtype) if ctx.needs_input_grad[0] else None
        return grad_x, grad.new_zeros(1, dtype=ctx.token_dtype), None, None, None


class LoopLinear:
    """``x_t Wᵀ + b`` for one unrolled loop; call it once per step.

    :param weight: W, shape (out, in), or a stack of K such maps applied to K inputs at once, shape (K, out, in).
    :param bias: b, shape ([K,] out), or None.
    Build it where the loop starts (under autocast the weight is cast once, there). Meant for loops that will be
    differentiated: under ``torch.no_grad`` use the plain layer.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None = None) -> None:
        self.record = _Record(weight, bias)
        self.token = gather_token(self.record, weight, bias)
        self.dtype = autocast_dtype(weight.device.type)
        # the steps see W without its autograd history: its only gradient path is the gathering node
        self.weight = weight.detach() if self.dtype is None else weight.detach().to(self.dtype)
        self.bias = None if bias is None else bias.detach().to(self.weight.dtype)

    @classmethod
    def of(cls, layer: nn.Linear) -> LoopLinear:
        return cls(layer.weight, layer.bias)

    def __call__(self, x: Tensor) -> Tensor:
        """:param x: shape ([K,] B, in).  :returns: shape ([K,] B, out)."""
        if self.dtype is None:
            return _Step.apply(x, self.token, self.weight, self.bias, self.record)
        with torch.autocast(x.device.type, enabled=False):
            return _Step.apply(x.to(self.dtype), self.token, self.weight, self.bias, self.record)
