"""The fault suite's injector (:mod:`sarnmt.testing.faults`), in the quick suite: off by default, and each fault at
the update it is given, on a stand-in trainer (the fault suite, in `make test-full`, runs it in real trainings)."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest
import torch

from sarnmt.testing.faults import FaultInjection


def trainer(step: int, fn: str = "fit") -> SimpleNamespace:
    return SimpleNamespace(global_step=step, state=SimpleNamespace(fn=fn), callbacks=[])


def test_nan_gradients_only_at_the_updates_listed():
    module = torch.nn.Linear(2, 1)
    faults = FaultInjection(nan_at_steps=[3])
    for step in range(6):
        module.zero_grad()
        module(torch.ones(1, 2)).sum().backward()
        faults.on_after_backward(trainer(step), module)
        grads = torch.cat([p.grad.flatten() for p in module.parameters()])
        assert grads.isnan().any().item() == (step == 3), step


def test_off_by_default_and_a_signal_is_sent_once_at_its_update(monkeypatch):
    sent = []
    monkeypatch.setattr("sarnmt.testing.faults.os.kill", lambda pid, sig: sent.append(sig))
    idle = FaultInjection()
    for step in range(5):
        idle.on_train_batch_start(trainer(step), None, None, step)
        idle.on_validation_batch_start(trainer(step), None)
    assert sent == []
    faults = FaultInjection(signal_at_step=2, signal_name="SIGUSR2", kill_at_step=4)
    for step in range(4):
        faults.on_train_batch_start(trainer(step), None, None, step)
    assert sent == [signal.SIGUSR2]
    faults.on_train_batch_start(trainer(4), None, None, 4)
    assert sent == [signal.SIGUSR2, signal.SIGKILL]
    late = FaultInjection(signal_in_validation_after_step=3)
    for step in (1, 3, 4):
        late.on_validation_batch_start(trainer(step), None)
    late.on_validation_batch_start(trainer(9, fn="validate"), None)
    assert sent[2:] == [signal.SIGTERM]


def test_an_unknown_signal_name_is_refused():
    with pytest.raises(KeyError):
        FaultInjection(signal_name="SIGNOPE")
