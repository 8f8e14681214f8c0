"""Which implementation runs each of the models' hot spots: chosen here, in one place, by configuration and device.

Every fused path computes the same equations as the plain one (the tests compare them in float64); they differ in
how many kernels run and how much memory traffic there is (docs/performance.md):

- ``loop_weights``: in the teacher-forced loop, the per-step matrices' weight gradients and the attention's
  source-side gradients are formed once after the loop (:class:`~sarnmt.models.loop_linear.LoopLinear`,
  :class:`~sarnmt.models.loop_attention.LoopAttention`) instead of at every step. Only with autograd on.
- ``gru_update``: the GRU's gates and new state as one autograd node with a hand-written backward
  (:func:`~sarnmt.models.gru.gru_update`) instead of eight recorded tensor operations.
- ``unrolled_encoder``: the bi-GRU as one Python loop running both directions as one batch
  (:meth:`~sarnmt.models.encoder.DL4MTBiGRU.unrolled`) instead of PyTorch's GRU over packed sequences (cuDNN on a GPU,
  which is faster there; on a CPU PyTorch's GRU has no fused backward).
- ``fused_output``: the output layer and the cross-entropy as one operation (:func:`~sarnmt.training.loss.linear_nll`)
  instead of logits followed by ``F.cross_entropy``.
- ``chunked_attention``: without autograd (search), the attention's energies formed a few sentences at a time in a
  cache-sized buffer instead of in one tensor.
- ``sigmoid_tanh``: where the source attention's energies tanh(k_j + q_t) are formed outside autograd's recording
  (search, and :class:`~sarnmt.models.loop_attention.LoopAttention`, which has its own backward), tanh is computed
  as 2σ(2x) − 1 (:func:`tanh_`), the same function: PyTorch's CPU ``tanh`` for float32 takes about 7 ns a number on
  the AMD EPYC of these machines, its ``sigmoid`` about 1.2 (both one thread, in cache; docs/performance.md), and the
  energies are the largest elementwise work of a step (B·S·2d numbers).

``kernels=auto`` (the default of ``train``, ``translate``, ``evaluate`` and ``bench``): all fused on a CPU; on a
GPU the same but PyTorch's packed GRU for the encoder and PyTorch's ``tanh``. ``kernels=fused``: all fused
everywhere. ``kernels=plain``: none (the textbook operations, e.g. to compare speed or to debug a fused path).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

CHOICES = ("auto", "fused", "plain")


@dataclass(frozen=True)
class Kernels:
    """The implementations one call uses (see the module docstring)."""

    loop_weights: bool
    gru_update: bool
    unrolled_encoder: bool
    fused_output: bool
    chunked_attention: bool
    sigmoid_tanh: bool


FUSED = Kernels(
    loop_weights=True,
    gru_update=True,
    unrolled_encoder=True,
    fused_output=True,
    chunked_attention=True,
    sigmoid_tanh=True,
)
PLAIN = Kernels(
    loop_weights=False,
    gru_update=False,
    unrolled_encoder=False,
    fused_output=False,
    chunked_attention=False,
    sigmoid_tanh=False,
)


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


class KernelChoice:
    """The configured choice, resolved per call from the tensors' device and whether autograd is recording.

    :param choice: ``auto``, ``fused`` or ``plain``.
    """

    def __init__(self, choice: str = "auto") -> None:
        if choice not in CHOICES:
            raise ValueError(f"kernels must be one of {CHOICES}, got {choice!r}")
        self.choice = choice
        self.override()

    def _resolve(self, cuda: bool, grad: bool) -> Kernels:
        kernels = PLAIN if self.choice == "plain" else FUSED
        if self.choice == "auto" and cuda:
            kernels = replace(kernels, unrolled_encoder=False, sigmoid_tanh=False)
        # deferring gradients needs them; chunking is for the buffer-free search
        return replace(
            kernels,
            loop_weights=kernels.loop_weights and grad,
            chunked_attention=kernels.chunked_attention and not grad,
        )

    def override(self, **flags: bool) -> None:
        """From now on resolve to the configured choice with ``flags`` set (e.g. ``sigmoid_tanh=False``), whatever
        the device and autograd (no flags: the configured choice alone); another call replaces the previous flags
        (``benchmarks/ab_kernels.py`` times one kernel on and off this way on the same model).

        :raises ValueError: for a name that is not a kernel flag."""
        unknown = sorted(set(flags) - set(Kernels.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown kernel flags {unknown}; the flags are {list(Kernels.__dataclass_fields__)}")
        # resolved once for each (GPU?, autograd on?): every decoder step asks, and gets a dict lookup
        self._resolved = {
            (cuda, grad): replace(self._resolve(cuda, grad), **flags)
            for cuda in (False, True)
            for grad in (False, True)
        }

    def __call__(self, like: Tensor) -> Kernels:
        """:param like: any tensor of the call (its device decides ``auto``)."""
        return self._resolved[(like.is_cuda, torch.is_grad_enabled())]

    def __repr__(self) -> str:
        return f"KernelChoice({self.choice!r})"
