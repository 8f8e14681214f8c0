"""sarnmt.training.optim.Adadelta: PyTorch's Adadelta update, fused by torch.compile, interchangeable with torch's."""

from __future__ import annotations

import copy
import logging

import pytest
import torch
from hydra.utils import instantiate
from torch import nn

from sarnmt.training import optim as optim_module
from sarnmt.training.optim import Adadelta
from tests.conftest import compose_train


def _params(seed: int) -> list[nn.Parameter]:
    """A matrix, a vector and a non-contiguous matrix (a transposed leaf), as a model's parameters come."""
    gen = torch.Generator().manual_seed(seed)
    return [
        nn.Parameter(torch.randn(5, 7, generator=gen)),
        nn.Parameter(torch.randn(7, generator=gen)),
        nn.Parameter(torch.randn(4, 3, generator=gen).t()),
    ]


def _run(optimizer: torch.optim.Optimizer, params: list[nn.Parameter], steps: int, seed: int = 9) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        optimizer.step()


@pytest.mark.parametrize("options", [{}, {"weight_decay": 0.1, "maximize": True}])
@pytest.mark.parametrize("compiled", [True, False])
def test_matches_torch_adadelta(options, compiled):
    """Five steps of the fused update give torch.optim.Adadelta's parameters and state (up to float32 rounding:
    the fused kernel may contract multiply-adds)."""
    ours, theirs = _params(0), _params(0)
    settings = {"lr": 0.7, "rho": 0.95, "eps": 1e-6, **options}
    opt = Adadelta(ours, compiled=compiled, **settings)
    ref = torch.optim.Adadelta(theirs, **settings)
    _run(opt, ours, 5)
    _run(ref, theirs, 5)
    for p, q in zip(ours, theirs, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        for key in ("square_avg", "acc_delta", "step"):
            torch.testing.assert_close(opt.state[p][key], ref.state[q][key], rtol=1e-5, atol=1e-7)
    assert not torch.equal(ours[0], _params(0)[0])  # it did move


def test_state_dicts_move_between_the_two():
    """Three steps with torch's Adadelta, then its state dict loaded into sarnmt's (a checkpoint resumed after a
    change of optimiser): three more steps end where torch's alone ends."""
    params = _params(1)
    ref = torch.optim.Adadelta(params, rho=0.95)
    _run(ref, params, 3)
    resumed = [nn.Parameter(p.detach().clone()) for p in params]
    opt = Adadelta(resumed, rho=0.95)
    opt.load_state_dict(copy.deepcopy(ref.state_dict()))  # loading keeps the tensors: no sharing
    _run(ref, params, 3, seed=10)
    _run(opt, resumed, 3, seed=10)
    for p, q in zip(resumed, params, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt.state[p]["acc_delta"], ref.state[q]["acc_delta"], rtol=1e-5, atol=1e-7)


def test_falls_back_to_eager_when_compiling_fails(monkeypatch, caplog):
    """No compiler: one warning, and the same update computed eagerly."""

    def broken(fn, **_):
        def fail(*args, **kwargs):
            raise RuntimeError("no C++ compiler")

        return fail

    monkeypatch.setattr(optim_module.torch, "compile", broken)
    ours, theirs = _params(2), _params(2)
    opt = Adadelta(ours, rho=0.95)
    ref = torch.optim.Adadelta(theirs, rho=0.95)
    with caplog.at_level(logging.WARNING, logger="sarnmt.training.optim"):
        _run(opt, ours, 3)
    _run(ref, theirs, 3)
    assert [r.message for r in caplog.records if "torch.compile failed" in r.message] == [
        "Adadelta: torch.compile failed (RuntimeError: no C++ compiler); using the eager update"
    ]
    for p, q in zip(ours, theirs, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_sparse_gradients_are_refused():
    weight = nn.Parameter(torch.randn(4, 2))
    weight.grad = torch.randn(4, 2).to_sparse()
    with pytest.raises(RuntimeError, match="sparse"):
        Adadelta([weight]).step()


def test_the_configs_name_both_implementations():
    """optim=adadelta is the fused one with the paper's settings, optim=adadelta_torch PyTorch's own."""
    params = _params(3)
    fused = instantiate(compose_train([]).optim)(params=params)
    stock = instantiate(compose_train(["optim=adadelta_torch"]).optim)(params=params)
    assert type(fused) is Adadelta and fused.compiled
    assert type(stock) is torch.optim.Adadelta
    for opt in (fused, stock):
        group = opt.param_groups[0]
        assert (group["lr"], group["rho"], group["eps"], group["weight_decay"]) == (1.0, 0.95, 1e-6, 0.0)


@pytest.mark.parametrize("options", [{}, {"weight_decay": 0.1, "maximize": True}])
def test_the_multi_tensor_update_is_the_per_parameter_one(options):
    """foreach=True (the update on a GPU: one torch._foreach_* kernel per pass over every parameter) gives the
    per-parameter update's parameters and state after five steps, to float32 rounding."""
    hyper = {"lr": 1.0, "rho": 0.95, "eps": 1e-6, **options}
    per_parameter, multi_tensor = _params(3), _params(3)
    one = Adadelta(per_parameter, compiled=False, foreach=False, **hyper)
    many = Adadelta(multi_tensor, foreach=True, **hyper)
    assert many._multi_tensor() and not one._multi_tensor()
    assert not Adadelta(_params(3), **hyper)._multi_tensor()  # the default: per parameter on the CPU
    _run(one, per_parameter, 5)
    _run(many, multi_tensor, 5)
    assert all(group["foreach"] for group in many.param_groups)  # torch's _multi_tensor_adadelta runs
    for a, b, start in zip(per_parameter, multi_tensor, _params(3), strict=True):
        assert not torch.equal(a, start) and torch.allclose(a, b, rtol=1e-6, atol=1e-7)
        for key in ("square_avg", "acc_delta", "step"):
            assert torch.allclose(one.state[a][key], many.state[b][key], rtol=1e-6, atol=1e-7)
