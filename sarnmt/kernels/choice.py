"""The configured choice of kernels, resolved per call to the implementation of every hot spot.

``kernels=auto`` (the default of ``train``, ``translate``, ``evaluate`` and ``bench``): every kernel on a CPU; on a
GPU every kernel but those only a CPU gains from (:data:`CPU_ONLY`: PyTorch's packed GRU for the encoder, the
search's energies in one piece, PyTorch's ``tanh``). ``kernels=fused``: every kernel
everywhere. ``kernels=plain``: none, the model's own equations (e.g. to compare speed or to debug a kernel).

The choice is a set of flags (:class:`Kernels`), one per kernel; the model calls its hot spots through the
:class:`HotSpots` that :class:`KernelChoice` resolves from them (:mod:`sarnmt.kernels.registry` says which kernel
replaces which hot spot under which flag).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from sarnmt.errors import InputError
from sarnmt.kernels.registry import resolve

CHOICES = ("auto", "fused", "plain")


def check_choice(choice: str) -> None:
    """Refuse a ``kernels=`` value that is not a choice; commands call it before they read any data.

    :raises InputError: naming the key, the value and the choices."""
    if choice not in CHOICES:
        raise InputError(f"kernels={choice!r} is not a choice: use one of {', '.join(CHOICES)} (sarnmt/kernels/)")


@dataclass(frozen=True)
class Kernels:
    """Which kernels one call runs, one flag each (:mod:`sarnmt.kernels`).

    :param loop_weights: the teacher-forced loops' weight gradients, and the attention's source-side gradients,
        formed once after the loop (only with autograd on).
    :param gru_update: the GRU's gates and new state as one autograd node.
    :param unrolled_encoder: the bi-GRU as one Python loop over both directions (else PyTorch's packed GRU).
    :param fused_output: the output layer and the cross-entropy as one operation.
    :param chunked_attention: the search-time attention energies in cache-sized pieces (only without autograd).
    :param sigmoid_tanh: in those pieces and in the loop attention, tanh as 2σ(2x) − 1.
    """

    loop_weights: bool
    gru_update: bool
    unrolled_encoder: bool
    fused_output: bool
    chunked_attention: bool
    sigmoid_tanh: bool


FUSED = Kernels(*[True] * len(Kernels.__dataclass_fields__))
PLAIN = Kernels(*[False] * len(Kernels.__dataclass_fields__))
# the kernels that only pay on a CPU, off on a GPU under ``kernels=auto``: the unrolled encoder (PyTorch's packed GRU
# is cuDNN's there), the cache-sized pieces of the search's energies (a Python loop over the batch at every step on
# a GPU; under ``kernels=fused`` they run as one piece there: :func:`sarnmt.kernels.attention.chunk_rows`) and tanh
# by the sigmoid (a CPU's tanh is slow, a GPU's is not). What else is sized for a CPU's cache is sized by the device
# where it runs: :func:`~sarnmt.kernels.attention.chunk_rows`, :func:`~sarnmt.kernels.output.block_rows`.
CPU_ONLY = ("unrolled_encoder", "chunked_attention", "sigmoid_tanh")


@dataclass(frozen=True)
class HotSpots:
    """The implementation each hot spot runs in one call: the model's equation, or a kernel computing the same.

    :param gru_update: ``(gates_x (B, 3d), gates_h (B, 3d), h (B, d)) -> h' (B, d)``: the GRU's gates and new
        state from the input- and hidden-side pre-activations (docs/models.md eqs. A.1a-d, C2-C5, C9-C12).
    :param step_linear: ``(weight (out, in), bias (out,) or None) -> map``: a linear map that a recurrent loop
        applies at every step, ``map(x (B, in)) -> (B, out)``; build one per teacher-forced loop (or search step).
    :param step_attention: ``(attention, memory) -> attend``: the source attention of one loop (or search step)
        over ``memory`` (a :class:`~sarnmt.models.state.SourceMemory`), ``attend(U_a s'_t (B·g, 2d)) -> (c_t
        (B·g, 2d), α_t (B·g, S))`` (paper eqs. 5-7).
    :param attention_scores: ``(keys (B, S, 2d), query (B, g, 1, 2d), v (2d,), c ()) -> e (B, g, S)``: the
        energies v_aᵀ tanh(k_j + q) + c (eq. C8).
    :param bigru: ``(rnn, emb (B, S, e), src_mask (B, S)) -> annotations (B, S, 2d)``: the encoder's bi-GRU
        (eq. 2, A.1a-e), zero at padding.
    :param output_nll: ``(features (N, e), weight (V, e), bias (V,) or None, target (N,)) -> nll (N,)``:
        −log softmax(features Wᵀ + b)[target], float32 (float64 for float64 inputs) (eq. 1, A.3g).
    """

    gru_update: Callable[[Tensor, Tensor, Tensor], Tensor]
    step_linear: Callable[[Tensor, Tensor | None], Callable[[Tensor], Tensor]]
    step_attention: Callable[[Any, Any], Callable[[Tensor], tuple[Tensor, Tensor]]]
    attention_scores: Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
    bigru: Callable[[Any, Tensor, Tensor], Tensor]
    output_nll: Callable[[Tensor, Tensor, Tensor | None, Tensor], Tensor]


class KernelChoice:
    """The configured choice, resolved per call from the tensors' device and whether autograd is recording.

    :param choice: ``auto``, ``fused`` or ``plain``.
    :param equations: the model's own implementation of every hot spot (``kernels=plain`` runs them alone).
    :raises InputError: for another ``choice`` (:func:`check_choice`).
    """

    def __init__(self, choice: str, equations: HotSpots) -> None:
        check_choice(choice)
        self.choice = choice
        self.equations = equations
        self.override()

    def _flags(self, cuda: bool, grad: bool) -> Kernels:
        kernels = PLAIN if self.choice == "plain" else FUSED
        if self.choice == "auto" and cuda:
            kernels = replace(kernels, **dict.fromkeys(CPU_ONLY, False))
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
        self._flags_by_call = {
            (cuda, grad): replace(self._flags(cuda, grad), **flags) for cuda in (False, True) for grad in (False, True)
        }
        self._resolved = {key: resolve(kernels, self.equations) for key, kernels in self._flags_by_call.items()}

    def rules(self, device: torch.device, grad: bool = False) -> Kernels:
        """The flags a call on ``device`` runs under, with autograd on or off (``grad``): the rules of a device,
        read without a tensor there (a test reads a GPU's on a machine without one)."""
        return self._flags_by_call[(device.type == "cuda", grad)]

    def flags(self, like: Tensor) -> Kernels:
        """The flags a call on ``like``'s device, with autograd as it is now, runs under."""
        return self._flags_by_call[(like.is_cuda, torch.is_grad_enabled())]

    def __call__(self, like: Tensor) -> HotSpots:
        """:param like: any tensor of the call (its device decides ``auto``).
        :returns: the implementation of every hot spot for this call."""
        return self._resolved[(like.is_cuda, torch.is_grad_enabled())]

    def __repr__(self) -> str:
        return f"KernelChoice({self.choice!r})"
