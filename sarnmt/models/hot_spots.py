"""The model's own implementation of each hot spot: the equations as the paper writes them, gathered for
:class:`~sarnmt.kernels.choice.KernelChoice` (``kernels=plain`` runs them alone; the others put the kernels of
:mod:`sarnmt.kernels` in their place where the configuration, the device and autograd allow).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

from sarnmt.kernels import HotSpots, KernelChoice
from sarnmt.models.attention import SourceAttention, energy_scores
from sarnmt.models.encoder import DL4MTBiGRU
from sarnmt.models.gru import gru_update
from sarnmt.models.state import SourceMemory


def step_linear(weight: Tensor, bias: Tensor | None) -> Callable[[Tensor], Tensor]:
    """x Wᵀ + b, applied at each step.  :param weight: W, shape (out, in).  :param bias: b, shape (out,), or None."""
    return partial(F.linear, weight=weight, bias=bias)


def step_attention(attention: SourceAttention, memory: SourceMemory) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
    """The source attention over ``memory`` from the projected query (:meth:`SourceAttention.attend`)."""
    return partial(attention.attend, memory=memory)


def output_nll(features: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor) -> Tensor:
    """−log softmax(features Wᵀ + b)[target] (eq. 1 over the output layer's logits; float32, or float64 for a
    float64 model).  :param features: shape (N, e).  :param weight: W_o, shape (V, e).  :param bias: shape (V,), or
    None.  :param target: ids, shape (N,).  :returns: shape (N,)."""
    logits = F.linear(features, weight, bias)
    return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), target, reduction="none")


EQUATIONS = HotSpots(
    gru_update=gru_update,
    step_linear=step_linear,
    step_attention=step_attention,
    attention_scores=energy_scores,
    bigru=DL4MTBiGRU.packed,
    output_nll=output_nll,
)


def kernel_choice(choice: str = "auto") -> KernelChoice:
    """A model's kernel choice: ``auto``, ``fused`` or ``plain`` over :data:`EQUATIONS`."""
    return KernelChoice(choice, EQUATIONS)
