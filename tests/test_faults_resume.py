"""Killed and preempted training runs resume exactly: real ``python -m sarnmt.train`` processes killed with SIGKILL
at three points and stopped by SIGTERM, each resumed from its last checkpoint, give the uninterrupted run's loss at
every step and its weights bit for bit; SIGTERM during a validation and a cluster's SIGUSR2 (with the handler a
launcher such as submitit installed) are honoured at the next step boundary.

The kill points come from the fault injector (:mod:`tests.fault_injection`, added to the runs' callbacks), so they
fall on exact updates: 13 batches an epoch, a resume checkpoint every 3 updates, a validation every 5.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sarnmt.errors import TrainingStopped
from sarnmt.training.run import train
from tests.conftest import ROOT, compose_train
from tests.fault_injection import inject
from tests.test_resume import RESUMABLE

pytestmark = pytest.mark.faults

RUN = [
    *RESUMABLE,  # 13 batches an epoch, a resume checkpoint every 3 updates, a validation every 5
    "val_bleu=false",
    "trainer.log_every_n_steps=1",
    "+logger.csv.flush_logs_every_n_steps=1",
]
STEPS = 30  # updates in all; 13 an epoch


def _start(out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.Popen(
        [sys.executable, "-m", "sarnmt.train", *RUN, f"trainer.max_steps={STEPS}", f"hydra.run.dir={out}", *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen) -> tuple[int, str]:
    _, err = process.communicate(timeout=300)
    return process.returncode, err


def _metrics(out: Path) -> list[dict[str, dict[int, str]]]:
    """Per run of the folder (csv/version_*), ``{metric: {step: value}}`` as logged (exact text)."""
    runs = []
    for path in sorted((out / "csv").glob("version_*/metrics.csv"), key=lambda p: int(p.parent.name[8:])):
        values: dict[str, dict[int, str]] = {"train/loss": {}, "val/loss": {}}
        for row in csv.DictReader(path.open()):
            for name in values:
                if row.get(name):
                    values[name][int(row["step"])] = row[name]
        runs.append(values)
    return runs


def _step(path: Path) -> int:
    return torch.load(path, map_location="cpu", weights_only=True)["global_step"]


def test_resumed_run_keeps_writing_last_ckpt_after_a_signal_before_its_first_save(tmp_path):
    """SIGTERM at update 2, before the first resume checkpoint (update 3): the checkpoint written on the signal holds
    no resume-checkpoint path, and the resumed run still writes ``last.ckpt`` (not ``last-v1.ckpt`` beside a stale
    one, which the next resume would start from)."""
    out, last = tmp_path / "run", tmp_path / "run" / "checkpoints" / "last.ckpt"
    code, err = _finish(_start(out, *inject(signal_at_step=1)))
    assert code == 143 and _step(last) == 2, err[-2000:]
    code, err = _finish(_start(out, f"ckpt_path={last}"))
    assert code == 0, err[-2000:]
    assert sorted(p.name for p in last.parent.glob("last*")) == ["last.ckpt"]
    assert _step(last) == STEPS  # the resumed run saved its progress there


def test_sigkill_at_three_points_and_sigterm_resume_to_the_uninterrupted_losses_and_weights(tmp_path):
    """A run SIGKILLed in its first epoch, mid-epoch later and right after a checkpoint, then SIGTERMed at an epoch's
    last update, resumed each time from its last checkpoint, logs the uninterrupted run's loss at every step and ends
    with its weights and optimizer state bit for bit."""
    whole = _start(tmp_path / "whole")  # alongside the interrupted one
    cut, last = tmp_path / "cut", tmp_path / "cut" / "checkpoints" / "last.ckpt"
    resumed_from = []
    for extra, kill_point in (
        (inject(kill_at_step=4), None),  # first epoch: last checkpoint at update 3
        (inject(kill_at_step=17), 3),  # mid second epoch (its 5th batch): checkpoint at 15
        (inject(kill_at_step=21), 15),  # right after the checkpoint of update 21
    ):
        code, err = _finish(_start(cut, *extra, *([f"ckpt_path={last}"] if kill_point else [])))
        assert code == -signal.SIGKILL, err[-2000:]
        resumed_from.append(_step(last))
    assert resumed_from == [3, 15, 21]
    # SIGTERM during update 26, the second epoch's last: a checkpoint at that step boundary, status 128 + 15
    code, err = _finish(_start(cut, *inject(signal_at_step=25), f"ckpt_path={last}"))
    assert code == 143, err[-2000:]
    assert f"stopped: SIGTERM received: stopped after update 26, checkpoint {last}; resume with ckpt_path={last}" in err
    assert "Traceback" not in err and _step(last) == 26
    code, err = _finish(_start(cut, f"ckpt_path={last}"))
    assert code == 0, err[-2000:]
    code, err = _finish(whole)
    assert code == 0, err[-2000:]

    (reference,) = _metrics(tmp_path / "whole")
    assert sorted(reference["train/loss"]) == list(range(STEPS))
    runs = _metrics(cut)
    assert len(runs) == 5
    for number, run in enumerate(runs):
        for name, values in run.items():
            for step, value in values.items():  # every value any part logged, the killed parts' included
                assert value == reference[name][step], f"run {number}: {name} at step {step}"
    assert set().union(*(run["train/loss"] for run in runs)) == set(range(STEPS))
    a = torch.load(tmp_path / "whole" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    b = torch.load(last, map_location="cpu", weights_only=True)
    assert a["global_step"] == b["global_step"] == STEPS
    for name, tensor in a["state_dict"].items():
        assert torch.equal(tensor, b["state_dict"][name]), name
    for sa, sb in zip(
        a["optimizer_states"][0]["state"].values(), b["optimizer_states"][0]["state"].values(), strict=True
    ):
        assert all(torch.equal(sa[k], sb[k]) for k in sa)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)["state_dict"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    """The in-process reference run (22 updates); its last checkpoint is written after update 21."""
    out = tmp_path_factory.mktemp("whole")
    train(compose_train([*RUN, "trainer.max_steps=22"], output_dir=out))
    return out / "checkpoints" / "last.ckpt"


def test_sigterm_during_validation_lets_it_finish_then_stops_and_resumes_exactly(uninterrupted, tmp_path):
    """SIGTERM arriving in the middle of a validation: the validation finishes, the run stops after the next update
    with a checkpoint (exit status 143) and resumes to the uninterrupted run's weights."""
    overrides = [*RUN, "trainer.max_steps=22"]
    with pytest.raises(TrainingStopped, match="SIGTERM received: stopped after update 6") as stop:
        train(compose_train([*overrides, *inject(signal_in_validation_after_step=5)], output_dir=tmp_path))
    assert stop.value.status == 143
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert _step(last) == 6
    train(compose_train([*overrides, f"ckpt_path={last}"], output_dir=tmp_path))
    reference = _weights(uninterrupted)
    assert all(torch.equal(v, reference[k]) for k, v in _weights(last).items())


def test_cluster_signal_checkpoints_then_hands_over_to_the_launchers_handler(uninterrupted, tmp_path):
    """SIGUSR2, SLURM's warning before the end of a job under submitit: checkpoint after the update in progress, then
    the handler installed before training (submitit's, which requeues the job) is called, and the status is 140."""
    calls = []

    def launcher_handler(signum, frame):  # what submitit installs: requeue the job
        calls.append((signum, _step(tmp_path / "checkpoints" / "last.ckpt")))

    previous = signal.signal(signal.SIGUSR2, launcher_handler)
    try:
        with pytest.raises(TrainingStopped, match="SIGUSR2 received: stopped after update 10") as stop:
            train(
                compose_train(
                    [
                        *RUN,
                        "trainer.max_steps=22",
                        *inject(signal_at_step=9, signal_name="SIGUSR2"),
                    ],
                    output_dir=tmp_path,
                )
            )
        assert signal.getsignal(signal.SIGUSR2) is launcher_handler  # given back after training
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert stop.value.status == 128 + signal.SIGUSR2
    assert calls == [(signal.SIGUSR2, 10)]  # once, after the checkpoint was written
    last = tmp_path / "checkpoints" / "last.ckpt"
    train(compose_train([*RUN, "trainer.max_steps=22", f"ckpt_path={last}"], output_dir=tmp_path))
    reference = _weights(uninterrupted)
    assert all(torch.equal(v, reference[k]) for k, v in _weights(last).items())


def test_sigterm_at_an_epochs_last_update_resumes_exactly_in_an_epoch_bounded_run(tmp_path):
    """An epoch-bounded run (max_epochs, no max_steps) stopped by SIGTERM at its first epoch's last update resumes
    into the second epoch with the uninterrupted run's batches and ends with its weights."""
    overrides = [*RUN, "trainer.max_epochs=2"]
    train(compose_train(overrides, output_dir=tmp_path / "whole"))
    with pytest.raises(TrainingStopped, match="SIGTERM received: stopped after update 13"):
        train(compose_train([*overrides, *inject(signal_at_step=12)], output_dir=tmp_path / "cut"))
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    train(compose_train([*overrides, f"ckpt_path={last}"], output_dir=tmp_path / "cut"))
    reference = _weights(tmp_path / "whole" / "checkpoints" / "last.ckpt")
    assert _step(last) == 26 and all(torch.equal(v, reference[k]) for k, v in _weights(last).items())
