"""What a CUDA graph asks of a step, checked on the CPU, for the captured steps' tests: a capture with a graph's
replay semantics (:class:`Traced`, a :class:`~sarnmt.utils.graphs.GraphBackend`), and a step run on a device without
data under a GPU's kernel rules (:func:`meta_as_a_gpu`) with every request to the host listed (:class:`HostTraffic`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from sarnmt.kernels.choice import KernelChoice


class Traced:
    """``make_fx`` runs the body once and records its operations, backward pass included, on the very tensors it
    touched (buffers, parameters, gradients); a replay runs the recorded operations again on them, without autograd,
    with every Python value (a step number, a shape, a branch, a scalar read) frozen as it was at capture. A body
    that read per-step state from Python instead of from its buffers goes wrong here as it would on a GPU."""

    def __init__(self) -> None:
        self.captures = 0

    def capture(self, body: Callable[[], Any]) -> Callable[[], Any]:
        self.captures += 1
        graph = make_fx(body)()

        def replay() -> Any:
            with torch.no_grad():
                return graph()

        return replay


class HostTraffic(TorchFunctionMode):
    """What a step asks of the host while it runs on ``meta`` tensors (shapes without data), which a CUDA graph
    cannot hold: a value read on the host fails on its own there (``.item()``, ``nonzero``, a boolean index, a
    ``.cpu()``); this mode also lists, in ``found``, a tensor made from host data (``torch.tensor``,
    ``torch.as_tensor`` of a Python value: a host-to-device copy), an index given as a list (copied the same way),
    a host tensor copied to the device, and any host tensor an operation reads (a scalar tensor on the host would be
    frozen into a graph at capture)."""

    MADE_ON_HOST = frozenset({torch.tensor, torch.as_tensor, torch.asarray, torch.from_numpy})
    INDEXING = frozenset({Tensor.__getitem__, Tensor.__setitem__, Tensor.index_put_, Tensor.index_put})

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__qualname__", repr(func))
        leaves = tree_leaves((args, kwargs))
        if func in self.MADE_ON_HOST and not (args and isinstance(args[0], Tensor) and args[0].device.type != "cpu"):
            self.found.append(f"{name}: a tensor made from host data")
        elif func in self.INDEXING and any(isinstance(index, list) for index in _indices(args)):
            self.found.append(f"{name}: an index given as a Python list")
        host = [tuple(t.shape) for t in leaves if isinstance(t, Tensor) and t.device.type == "cpu"]
        if host and func not in self.MADE_ON_HOST:
            self.found.append(f"{name} reads host tensors of shapes {host}")
        return func(*args, **kwargs)


def _indices(args: tuple) -> list:
    index = args[1] if len(args) > 1 else None
    return list(index) if isinstance(index, tuple) else [index]


@contextmanager
def meta_as_a_gpu(monkeypatch) -> Iterator[None]:
    """Within: a call on ``meta`` tensors runs under a CUDA device's kernel rules
    (:meth:`~sarnmt.kernels.choice.KernelChoice.on_gpu`), and autocast, which knows no ``meta`` device, treats it
    as the CPU (off unless asked)."""

    def as_cpu(function):
        def call(device_type=None, *args, **kwargs):
            return function("cpu" if device_type == "meta" else device_type, *args, **kwargs)

        return call

    with monkeypatch.context() as patch:
        patch.setattr(KernelChoice, "on_gpu", staticmethod(lambda like: like.is_cuda or like.is_meta))
        for name in ("autocast", "is_autocast_enabled", "get_autocast_dtype"):
            patch.setattr(torch, name, as_cpu(getattr(torch, name)))
        yield


def on_meta(value: Any) -> Any:
    """``value`` with every tensor moved to ``meta``: a tensor, an object with ``map`` (the decoder state, the
    source memory) or a dataclass of those (a step's buffers)."""
    if isinstance(value, Tensor):
        return value.to("meta")
    if hasattr(value, "map"):
        return value.map(on_meta)
    if dataclasses.is_dataclass(value):
        moved = {f.name: on_meta(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **moved)
    return value
