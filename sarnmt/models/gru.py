"""GRU cells with dl4mt's bias placement (docs/models.md §GRU cells; appendix A.1 and A.3).

Both cells compute, for input x and previous state h (gate order r, u, candidate, as PyTorch does)::

    r  = σ(W_r x + U_r h + b_r)          u = σ(W_u x + U_u h + b_u)
    h̃  = tanh(W_x x + b_x + r ⊙ (U_x h))      (bias ``input``: encoder and decoder cell 1)
    h̃  = tanh(W_x x + r ⊙ (U_x h + b_x))      (bias ``hidden``: decoder cell 2, dl4mt's b_nl / bx_nl)
    h' = u ⊙ h + (1 − u) ⊙ h̃

There is a single 3d bias either way, so parameter counts equal dl4mt's exactly. The cell holds the parameters and
the input projection (a separate call, so that teacher-forced training projects all time steps at once, before the
recurrent loop); :func:`gru_update` is the rest of the step, given U h (+ b) as well.
"""

from __future__ import annotations

from typing import Literal

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

    def input_bias(self) -> Tensor | None:
        """The bias added to W x: the cell's bias when it sits on the input side, else None."""
        return self.bias if self.bias_on == "input" else None

    def hidden_bias(self) -> Tensor | None:
        """The bias added to U h: the cell's bias when it sits on the hidden side, else None."""
        return self.bias if self.bias_on == "hidden" else None

    def project_input(self, x: Tensor) -> Tensor:
        """Input-side gate pre-activations W x (+ the bias when it sits on the input side).

        :param x: shape (..., input_size).  :returns: shape (..., 3d).
        """
        return F.linear(x, self.weight_ih, self.input_bias())


def gru_update(gates_x: Tensor, gates_h: Tensor, h: Tensor) -> Tensor:
    """The gates and the new state from both pre-activations (the module docstring's equations, bias already
    added; the ``gru_update`` hot spot, :mod:`sarnmt.kernels.gru` computes the same as one autograd node)::

        [r; u] = σ(gx_ru + gh_ru)      h̃ = tanh(gx_c + r ⊙ gh_c)      h' = u ⊙ h + (1 − u) ⊙ h̃

    :param gates_x: input-side pre-activations W x (+ b), shape (B, 3d).  :param gates_h: hidden-side ones U h
        (+ b), shape (B, 3d).  :param h: the previous state, shape (B, d).  :returns: h', shape (B, d).
    """
    d = h.size(-1)
    r, u = torch.sigmoid(gates_x[:, : 2 * d] + gates_h[:, : 2 * d]).chunk(2, dim=1)
    candidate = torch.tanh(gates_x[:, 2 * d :] + r * gates_h[:, 2 * d :])
    return u * h + (1 - u) * candidate
