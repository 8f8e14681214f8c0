"""A capture with a CUDA graph's replay semantics on the CPU, for the captured steps' tests
(:class:`~sarnmt.utils.graphs.GraphBackend`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx


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
