"""GRU cells with dl4mt's bias placement (docs/models.md §GRU cells; appendix A.1 and A.3).

Both cells compute, for input x and previous state h (gate order r, u, candidate, as PyTorch does)::

    r  = σ(W_r x + U_r h + b_r)          u = σ(W_u x + U_u h + b_u)
    h̃  = tanh(W_x x + b_x + r ⊙ (U_x h))      (bias ``input``: encoder and decoder cell 1)
    h̃  = tanh(W_x x + r ⊙ (U_x h + b_x))      (bias ``hidden``: decoder cell 2, dl4mt's b_nl / bx_nl)
    h' = u ⊙ h + (1 − u) ⊙ h̃

There is a single 3d bias either way, so parameter counts equal dl4mt's exactly. The input projection is a separate
call so that teacher-forced training projects all time steps at once, before the recurrent loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.models.init import normal_, orthogonal_, orthogonal_blocks_, zeros_


class DL4MTGRUCell(nn.Module):
    """One GRU cell with a single bias vector placed on the ``input`` or the ``hidden`` side.

    :param input_size: size of x.
    :param hidden_size: size of h (d).
    :param bias_on: ``"input"`` (encoder, decoder cell 1) or ``"hidden"`` (decoder cell 2).
    :param square_input_gates: initialise the r/u input block as one orthogonal matrix when it is square
        (dl4mt's ``Wc``, 2d×2d, for cell 2); otherwise input weights are 0.01·N(0, 1).
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias_on: Literal["input", "hidden"] = "input",
        square_input_gates: bool = False,
    ) -> None:
        super().__init__()
        if bias_on not in ("input", "hidden"):
            raise ValueError(f"bias_on must be 'input' or 'hidden', got {bias_on!r}")
        self.hidden_size = hidden_size
        self.bias_on = bias_on
        self.square_input_gates = square_input_gates
        self.weight_ih = nn.Parameter(torch.empty(3 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(3 * hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(3 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        d = self.hidden_size
        normal_(self.weight_ih)
        if self.square_input_gates and self.weight_ih.size(1) == 2 * d:
            orthogonal_(self.weight_ih[: 2 * d])
        orthogonal_blocks_(self.weight_hh, d)
        zeros_(self.bias)

    def project_input(self, x: Tensor) -> Tensor:
        """Input-side gate pre-activations.

        :param x: shape (..., input_size).
        :returns: shape (..., 3d); includes the bias when it sits on the input side.
        """
        return F.linear(x, self.weight_ih, self.bias if self.bias_on == "input" else None)

    def hidden_bias(self) -> Tensor | None:
        """The bias added to U h: the cell's bias when it sits on the hidden side, else None."""
        return self.bias if self.bias_on == "hidden" else None

    def forward(
        self, gates_x: Tensor, h: Tensor, hidden_proj: Callable[[Tensor], Tensor] | None = None, fused: bool = True
    ) -> Tensor:
        """One step from projected input.

        :param gates_x: shape (B, 3d), from :meth:`project_input`.
        :param h: previous state, shape (B, d).
        :param hidden_proj: computes U h (+ the hidden-side bias) instead of ``F.linear`` (the teacher-forced loop
            passes a :class:`~sarnmt.models.loop_linear.LoopLinear` of ``weight_hh``).
        :param fused: the gates as :func:`gru_update` (else :func:`gru_update_plain`; :mod:`sarnmt.models.kernels`).
        :returns: the new state, shape (B, d).
        """
        gates_h = hidden_proj(h) if hidden_proj is not None else F.linear(h, self.weight_hh, self.hidden_bias())
        return (gru_update if fused else gru_update_plain)(gates_x, gates_h, h)


def gru_update_plain(gates_x: Tensor, gates_h: Tensor, h: Tensor) -> Tensor:
    """:func:`gru_update` as plain tensor operations (autograd records each): the textbook form."""
    d = h.size(-1)
    r, u = torch.sigmoid(gates_x[:, : 2 * d] + gates_h[:, : 2 * d]).chunk(2, dim=1)
    candidate = torch.tanh(gates_x[:, 2 * d :] + r * gates_h[:, 2 * d :])
    return u * h + (1 - u) * candidate


def gru_update(gates_x: Tensor, gates_h: Tensor, h: Tensor) -> Tensor:
    """The gates and the new state from both projections (the module docstring's equations, bias already added)::

        [r; u] = σ(gx_ru + gh_ru)      h̃ = tanh(gx_c + r ⊙ gh_c)      h' = h̃ + u ⊙ (h − h̃)

    One autograd node with a hand-written backward instead of the eight recorded by plain tensor code: the same
    arithmetic, half the kernel launches per step and no gradient concatenation (the recurrent loops call this
    T times per batch). Inputs of mixed dtypes (under autocast) are computed in their promoted dtype.

    :param gates_x: input-side pre-activations, shape (B, 3d).  :param gates_h: hidden-side ones, shape (B, 3d).
    :param h: the previous state, shape (B, d).  :returns: h', shape (B, d).
    """
    dtype = torch.promote_types(torch.promote_types(gates_x.dtype, gates_h.dtype), h.dtype)
    return _GRUUpdate.apply(gates_x.to(dtype), gates_h.to(dtype), h.to(dtype))


class _GRUUpdate(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, gates_x: Tensor, gates_h: Tensor, h: Tensor) -> Tensor:
        d = h.size(-1)
        ru = torch.add(gates_x[:, : 2 * d], gates_h[:, : 2 * d]).sigmoid_()
        hidden_c = gates_h[:, 2 * d :]
        candidate = torch.addcmul(gates_x[:, 2 * d :], ru[:, :d], hidden_c).tanh_()
        diff = h - candidate
        ctx.save_for_backward(ru, candidate, hidden_c, diff)
        return torch.addcmul(candidate, ru[:, d:], diff)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        ru, candidate, hidden_c, diff = ctx.saved_tensors
        d = candidate.size(-1)
        grad_h = grad * ru[:, d:]  # ∂h'/∂h = u
        grad_x = grad.new_empty(grad.size(0), 3 * d)
        grad_c = grad_x[:, 2 * d :]  # through tanh: (1 − u) g ⊙ (1 − h̃²)
        torch.ops.aten.tanh_backward.grad_input(grad - grad_h, candidate, grad_input=grad_c)
        grad_ru = grad_x[:, : 2 * d]  # through σ: [g_c ⊙ gh_c; g ⊙ (h − h̃)] ⊙ σ'
        torch.mul(grad_c, hidden_c, out=grad_ru[:, :d])
        torch.mul(grad, diff, out=grad_ru[:, d:])
        torch.ops.aten.sigmoid_backward.grad_input(grad_ru, ru, grad_input=grad_ru)
        grad_hidden = torch.empty_like(grad_x)  # the same, but r ⊙ g_c for the candidate's hidden part
        grad_hidden[:, : 2 * d] = grad_ru
        torch.mul(grad_c, ru[:, :d], out=grad_hidden[:, 2 * d :])
        return grad_x, grad_hidden, grad_h
