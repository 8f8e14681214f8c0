"""The fault suite's injector (:mod:`tests.fault_injection`), in the quick suite: off by default, and each fault at
the update it is given, on a stand-in trainer (the fault suite, in `make test-full`, runs it in real trainings)."""

from __future__ import annotations

import re
import signal
from types import SimpleNamespace

import pytest
import torch

from sarnmt.utils.instantiate import instantiate_dict
from tests.conftest import ROOT, compose_train
from tests.fault_injection import FaultInjection, inject


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
    monkeypatch.setattr("tests.fault_injection.os.kill", lambda pid, sig: sent.append(sig))
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


@pytest.mark.parametrize("callbacks", ["default", "none"])
def test_inject_adds_the_injector_to_a_runs_callbacks_as_any_callback(callbacks, tmp_path):
    """The overrides of :func:`inject` put one more entry into ``callbacks``, which a run instantiates as it does every
    callback (:func:`sarnmt.utils.instantiate.instantiate_dict`), with ``callbacks=none`` too."""
    faults = inject(kill_at_step=4, nan_at_steps=[7, 8], signal_name="SIGUSR2")
    cfg = compose_train([f"callbacks={callbacks}", *faults], output_dir=tmp_path)
    built = [c for c in instantiate_dict(cfg.callbacks) if isinstance(c, FaultInjection)]
    assert len(built) == 1
    assert (built[0].kill_at_step, built[0].nan_at_steps, built[0].signal) == (4, {7, 8}, signal.SIGUSR2)
    plain = compose_train([], output_dir=tmp_path)
    assert not any(isinstance(c, FaultInjection) for c in instantiate_dict(plain.callbacks))


def test_the_package_ships_no_fault_injection():
    """Fault injection is the tests': no config group, no module of the package names it, and a run's code has no
    switch for it (it is a callback the tests add)."""
    assert "faults" not in compose_train([])
    assert not (ROOT / "sarnmt" / "conf" / "faults").exists() and not (ROOT / "sarnmt" / "testing").exists()
    imports_tests = re.compile(r"^\s*(from|import)\s+tests\b|FaultInjection", re.MULTILINE)
    named = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "sarnmt").rglob("*.py")
        if imports_tests.search(path.read_text(encoding="utf-8"))
    ]
    assert named == []
