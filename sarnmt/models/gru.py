"""GRU cells with dl4mt's bias placement (reference note §2.2 and §2.5; appendix A.1 and A.3).

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

    def project_input(self, x: Tensor) -> Tensor:
        """Input-side gate pre-activations.

        :param x: shape (..., input_size).
        :returns: shape (..., 3d); includes the bias when it sits on the input side.
        """
        return F.linear(x, self.weight_ih, self.bias if self.bias_on == "input" else None)

    def hidden_bias(self) -> Tensor | None:
        """The bias added to U h: the cell's bias when it sits on the hidden side, else None."""
        return self.bias if self.bias_on == "hidden" else None

    def forward(self, gates_x: Tensor, h: Tensor, hidden_proj: Callable[[Tensor], Tensor] | None = None) -> Tensor:
        """One step from projected input.

        :param gates_x: shape (B, 3d), from :meth:`project_input`.
        :param h: previous state, shape (B, d).
        :param hidden_proj: computes U h (+ the hidden-side bias) instead of ``F.linear`` (the teacher-forced loop
            passes a :class:`~sarnmt.models.loop_linear.LoopLinear` of ``weight_hh``).
        :returns: the new state, shape (B, d).
        """
        d = self.hidden_size
        gates_h = hidden_proj(h) if hidden_proj is not None else F.linear(h, self.weight_hh, self.hidden_bias())
        # split, not slices: the backward of a slice builds a zero tensor of the full size
        x_ru, x_c = gates_x.split([2 * d, d], dim=1)
        h_ru, h_c = gates_h.split([2 * d, d], dim=1)
        r, u = torch.sigmoid(x_ru + h_ru).chunk(2, dim=1)
        candidate = torch.tanh(x_c + r * h_c)
        return candidate + u * (h - candidate)
