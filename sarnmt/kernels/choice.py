"""The configured choice of kernels, resolved per call to the implementation of every hot spot.

``kernels=auto`` (the default of ``train``, ``translate``, ``evaluate`` and ``bench``): every kernel on a CPU; on a
GPU every kernel but those only a CPU gains from (:data:`CPU_ONLY`: PyTorch's packed GRU for the encoder, the
search's energies in one piece, PyTorch's ``tanh``). ``kernels=fused``: every kernel
everywhere. ``kernels=plain``: none, the model's own equations (e.g. to compare speed or to debug a kernel).

The choice is a set of flags (:class:`~sarnmt.kernels.registry.Kernels`), one per kernel; the model calls its hot
spots through the :class:`~sarnmt.models.hot_spots.HotSpots` that :class:`KernelChoice` resolves from them, once per
model call (:mod:`sarnmt.kernels.registry` says which kernel replaces which hot spot under which flag).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Generic

import torch
from torch import Tensor

from sarnmt.errors import check_one_of
from sarnmt.kernels.registry import CPU_ONLY, FUSED, PLAIN, Kernels, Spots, resolve

__all__ = ["CHOICES", "CPU_ONLY", "FUSED", "PLAIN", "KernelChoice", "Kernels", "captures", "check_choice"]

CHOICES = ("auto", "fused", "plain")


def check_choice(choice: str) -> None:
    """Refuse a ``kernels=`` value that is not a choice: the one check, where the setting enters (each command that
    takes it, before it reads any data); :class:`KernelChoice` trusts it.

    :raises InputError: naming the key, the value and the choices."""
    check_one_of("kernels", choice, CHOICES, "sarnmt/kernels/")


def captures(choice: str) -> bool:
    """Whether steps under the ``kernels=`` ``choice`` may run as captured graphs (the search's,
    :mod:`sarnmt.decoding.captured`, and the training step's, :mod:`sarnmt.training.capture`): every choice but
    ``plain``, which runs every step eagerly."""
    return choice != "plain"


class KernelChoice(Generic[Spots]):
    """The configured choice, resolved per call from the tensors' device and whether autograd is recording.

    :param choice: ``auto``, ``fused`` or ``plain``.
    :param equations: the model's own implementation of every hot spot, a
        :class:`~sarnmt.models.hot_spots.HotSpots` (``kernels=plain`` runs them alone).

    ``choice`` is trusted: a command's ``kernels=`` is checked once, where it enters (:func:`check_choice`).
    """

    def __init__(self, choice: str, equations: Spots) -> None:
        assert choice in CHOICES, f"kernels={choice!r} reached the model unchecked (check_choice)"
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
        self._use(
            {
                (cuda, grad): replace(self._flags(cuda, grad), **flags)
                for cuda in (False, True)
                for grad in (False, True)
            }
        )

    def _use(self, flags_by_call: dict[tuple[bool, bool], Kernels]) -> None:
        """Resolve each (GPU?, autograd on?) once: every decoder step asks, and gets a dict lookup."""
        self._flags_by_call = flags_by_call
        self._resolved = {key: resolve(kernels, self.equations) for key, kernels in flags_by_call.items()}

    @contextmanager
    def static_shapes(self) -> Iterator[None]:
        """Within: every call resolves as it would now, with ``static_shapes`` on (the captured training step,
        :func:`sarnmt.training.capture.padded_loss`: no shape decided by a read of the device)."""
        saved = self._flags_by_call, self._resolved
        self._use({key: replace(kernels, static_shapes=True) for key, kernels in saved[0].items()})
        try:
            yield
        finally:
            self._flags_by_call, self._resolved = saved

    @property
    def capture(self) -> bool:
        """Whether a step under this choice may run as a captured graph (:func:`captures`)."""
        return captures(self.choice)

    def rules(self, device: torch.device, grad: bool = False) -> Kernels:
        """The flags a call on ``device`` runs under, with autograd on or off (``grad``): the rules of a device,
        read without a tensor there (a test reads a GPU's on a machine without one)."""
        return self._flags_by_call[(device.type == "cuda", grad)]

    @staticmethod
    def on_gpu(like: Tensor) -> bool:
        """Whether a call on ``like``'s device runs under a GPU's rules (a CUDA device; the tests of the captured
        steps read a device without data, ``meta``, as one)."""
        return like.is_cuda

    def flags(self, like: Tensor) -> Kernels:
        """The flags a call on ``like``'s device, with autograd as it is now, runs under."""
        return self._flags_by_call[(self.on_gpu(like), torch.is_grad_enabled())]

    def __call__(self, like: Tensor) -> Spots:
        """:param like: any tensor of the call (its device decides ``auto``).
        :returns: the implementation of every hot spot for this call."""
        return self._resolved[(self.on_gpu(like), torch.is_grad_enabled())]

    def __repr__(self) -> str:
        return f"KernelChoice({self.choice!r})"
