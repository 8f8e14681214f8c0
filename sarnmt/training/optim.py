"""The paper's optimiser with its update fused into one kernel per parameter.

:class:`Adadelta` is ``torch.optim.Adadelta`` (Zeiler 2012; the paper's Section 6.2 setting: rho 0.95, eps 1e-6,
lr 1.0), the same update in the same order of operations, with the same state (``step``, ``square_avg``,
``acc_delta``: checkpoints and state dicts move freely between the two). PyTorch's eager implementation makes about
ten passes over every parameter per step, each its own kernel reading and writing whole tensors; at ``model=small``
that is about 10% of a CPU training step. Here the update of a parameter is one ``torch.compile``'d function, which
PyTorch's compiler fuses into a single pass (a C++ loop on the CPU, a Triton kernel on a GPU): three to four times
faster per step (docs/performance.md). The first step compiles it (a few seconds; the float hyperparameters are
traced symbolically, so a learning-rate schedule does not recompile). Where compiling fails (no C++ compiler, an
unsupported device) a warning says so once and the eager update of ``torch.optim.Adadelta`` is used.

On a GPU the per-parameter kernels are launches from Python, one or more per parameter (29 calls, about 4.6 ms an
update at paper size, on an H100), so there the update is instead ``torch.optim.Adadelta``'s multi-tensor one
(``foreach``: each of its ~10 passes one ``torch._foreach_*`` kernel over every parameter at once): ``foreach=None``
(the default) picks it when the parameters are on a CUDA device, ``foreach=True`` everywhere, ``foreach=False``
never. The arithmetic is the same update (``tests/test_optim.py`` checks it against the per-parameter one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

log = logging.getLogger(__name__)


def adadelta_update(
    param: Tensor,
    grad: Tensor,
    square_avg: Tensor,
    acc_delta: Tensor,
    lr: float,
    rho: float,
    eps: float,
    weight_decay: float,
    maximize: bool,
) -> None:
    """One Adadelta step of one parameter, in place, as ``torch.optim.Adadelta`` computes it::

        g ← −g if maximize;  g ← g + λ θ          E[g²] ← ρ E[g²] + (1 − ρ) g²
        Δ = √(E[Δ²] + ε) / √(E[g²] + ε) · g       E[Δ²] ← ρ E[Δ²] + (1 − ρ) Δ²       θ ← θ − lr Δ

    :param param: θ; ``grad``, ``square_avg`` (E[g²]) and ``acc_delta`` (E[Δ²]) have its shape.
    """
    if maximize:
        grad = -grad
    if weight_decay != 0:
        grad = grad.add(param, alpha=weight_decay)
    square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
    std = square_avg.add(eps).sqrt_()
    delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
    acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
    param.add_(delta, alpha=-lr)


class Adadelta(torch.optim.Adadelta):
    """``torch.optim.Adadelta`` whose per-parameter update is one compiled kernel (module docstring).

    :param params: parameters or parameter groups.  :param lr: learning rate (1.0 in dl4mt, which ignores it).
    :param rho: decay of the running averages.  :param eps: added inside both square roots.
    :param weight_decay: L2 penalty added to the gradient.  :param maximize: ascend instead of descend.
    :param compiled: fuse the update with ``torch.compile``; False runs ``torch.optim.Adadelta``'s own step.
    :param foreach: the multi-tensor update (``torch.optim.Adadelta``'s ``foreach``) instead of one update per
        parameter: None on CUDA parameters only, True always, False never (module docstring).
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        maximize: bool = False,
        compiled: bool = True,
        foreach: bool | None = None,
    ) -> None:
        super().__init__(params, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach)
        self.compiled, self.foreach = compiled, foreach
        # torch.compile only wraps here; it compiles at the first call. None: PyTorch's own step
        self._update: Callable[..., None] | None = torch.compile(adadelta_update, dynamic=True) if compiled else None

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One update of every parameter that has a gradient.  :param closure: re-evaluates the loss (optional)."""
        if self._update is None or self._multi_tensor():
            return super().step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            hyper = (group["lr"], group["rho"], group["eps"], group["weight_decay"], group["maximize"])
            for param in group["params"]:
                if param.grad is None:
                    continue
                if param.grad.is_sparse:
                    raise RuntimeError("Adadelta does not support sparse gradients")
                state = self.state[param]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["square_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["acc_delta"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["step"] += 1
                tensors = (param, param.grad, state["square_avg"], state["acc_delta"])
                self._apply(tensors, hyper)
        return loss

    def _multi_tensor(self) -> bool:
        """Whether this step is torch's multi-tensor update (``foreach``; None: the parameters are on CUDA)."""
        if self.foreach is not None:
            return self.foreach
        return any(p.is_cuda for group in self.param_groups for p in group["params"])

    def _apply(self, tensors: tuple[Tensor, ...], hyper: tuple) -> None:
        """The update of one parameter: compiled over flat views (one graph for every shape; complex tensors as
        their real and imaginary parts, as PyTorch does), eager for non-contiguous tensors, and eager from then on
        if compiling fails."""
        tensors = tuple(torch.view_as_real(t) if t.is_complex() else t for t in tensors)
        update = self._update
        if update is adadelta_update or not all(t.is_contiguous() for t in tensors):
            adadelta_update(*tensors, *hyper)
            return
        try:
            update(*(t.view(-1) for t in tensors), *hyper)
        except Exception as err:  # noqa: BLE001 - any compiler failure: the eager update computes the same
            log.warning("Adadelta: torch.compile failed (%s: %s); using the eager update", type(err).__name__, err)
            self._update = adadelta_update
            adadelta_update(*tensors, *hyper)
