"""Which implementation runs each of the models' hot spots: chosen here, in one place, by configuration and device.

Every fused path computes the same equations as the plain one (the tests compare them in float64); they differ in
how many kernels run and how much memory traffic there is (README, Performance):

- ``loop_weights``: in the teacher-forced loop, the per-step matrices' weight gradients and the attention's
  source-side gradients are formed once after the loop (:class:`~sarnmt.models.loop_linear.LoopLinear`,
  :class:`~sarnmt.models.loop_attention.LoopAttention`) instead of at every step. Only with autograd on.
- ``gru_update``: the GRU's gates and new state as one autograd node with a hand-written backward
  (:func:`~sarnmt.models.gru.gru_update`) instead of eight recorded tensor operations.
- ``unrolled_encoder``: the bi-GRU as one Python loop running both directions as one batch
  (:meth:`~sarnmt.models.encoder.DL4MTBiGRU.unrolled`) instead of PyTorch's GRU over packed sequences (cuDNN on a GPU,
  which is faster there; on a CPU PyTorch's GRU has no fused backward).
- ``fused_output``: the output layer and the cross-entropy as one operation (:func:`~sarnmt.loss.linear_nll`)
  instead of logits followed by ``F.cross_entropy``.
- ``chunked_attention``: without autograd (search), the attention's energies formed a few sentences at a time in a
  cache-sized buffer instead of in one tensor.

``kernels=auto`` (the default of ``train``, ``translate``, ``evaluate`` and ``bench``): all fused on a CPU; on a
GPU the same but PyTorch's packed GRU for the encoder. ``kernels=fused``: all fused everywhere. ``kernels=plain``:
none (the textbook operations, e.g. to compare speed or to debug a fused path).
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


FUSED = Kernels(loop_weights=True, gru_update=True, unrolled_encoder=True, fused_output=True, chunked_attention=True)
PLAIN = Kernels(loop_weights=False, gru_update=False, unrolled_encoder=False, fused_output=False,
                chunked_attention=False)  # fmt: skip


class KernelChoice:
    """The configured choice, resolved per call from the tensors' device and whether autograd is recording.

    :param choice: ``auto``, ``fused`` or ``plain``.
    """

    def __init__(self, choice: str = "auto") -> None:
        if choice not in CHOICES:
            raise ValueError(f"kernels must be one of {CHOICES}, got {choice!r}")
        self.choice = choice
        # resolved once for each (GPU?, autograd on?): every decoder step asks, and gets a dict lookup
        self._resolved = {(cuda, grad): self._resolve(cuda, grad) for cuda in (False, True) for grad in (False, True)}

    def _resolve(self, cuda: bool, grad: bool) -> Kernels:
        kernels = PLAIN if self.choice == "plain" else FUSED
        if self.choice == "auto" and cuda:
            kernels = replace(kernels, unrolled_encoder=False)
        # deferring gradients needs them; chunking is for the buffer-free search
        return replace(kernels, loop_weights=kernels.loop_weights and grad,
                       chunked_attention=kernels.chunked_attention and not grad)  # fmt: skip

    def __call__(self, like: Tensor) -> Kernels:
        """:param like: any tensor of the call (its device decides ``auto``)."""
        return self._resolved[(like.is_cuda, torch.is_grad_enabled())]

    def __repr__(self) -> str:
        return f"KernelChoice({self.choice!r})"
