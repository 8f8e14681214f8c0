"""Diverged batches and full disks during training: a NaN update is skipped and reported, K in a row stop the run
with the last checkpoint intact; a checkpoint write that fails (simulated and, where a tmpfs can be mounted, real
ENOSPC) leaves the previous checkpoint loadable and says what happened."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import uuid
from pathlib import Path

import pytest
import torch

from sarnmt.checkpoints.reading import load_model
from sarnmt.errors import TrainingStopped, WriteError
from sarnmt.training.resume import AtomicCheckpointIO
from sarnmt.training.run import train
from tests.conftest import compose_train
from tests.fault_injection import inject
from tests.test_faults_resume import RUN

pytestmark = pytest.mark.faults


def _checkpoint(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def _finite(state: dict[str, torch.Tensor]) -> bool:
    return all(torch.isfinite(t).all() for t in state.values() if t.is_floating_point())


def test_a_nan_update_is_skipped_counted_and_logged_with_its_sentence_ids(tmp_path, caplog):
    """A batch whose gradients are NaN (injected into update 5): the update is skipped (weights and optimizer state
    unchanged), counted in the checkpoint and the metrics, and logged with the batch's sentence ids; training goes
    on."""
    caplog.set_level(logging.WARNING, logger="sarnmt")
    overrides = [*RUN, "trainer.max_steps=6", *inject(nan_at_steps=[4])]
    result = train(compose_train(overrides, output_dir=tmp_path))
    messages = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(messages) == 1 and messages[0].startswith("update 5 skipped: non-finite loss or gradients")
    assert "line numbers (0-based) in the training split: " in messages[0]
    ids = [int(i) for i in messages[0].rsplit(": ", 1)[1].replace(", ...", "").split(", ")]
    assert ids and all(0 <= i < 300 for i in ids)
    assert result["train/skipped_updates"] == 1.0
    last = _checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert last["global_step"] == 6 and _finite(last["state_dict"])
    guard = next(v for k, v in last["callbacks"].items() if k.startswith("NonFiniteGuard"))
    assert guard == {"skipped": 1, "consecutive": 0}
    steps = {int(s["step"]) for s in last["optimizer_states"][0]["state"].values()}
    assert steps == {5}  # Adam made 5 of the 6 updates: the skipped one left its state alone


def test_k_nan_updates_in_a_row_stop_the_run_with_the_last_good_checkpoint_loadable(tmp_path):
    """Three NaN updates in a row (max_consecutive=3) stop the run with one message naming the updates and the last
    checkpoint; that checkpoint holds the last good update's weights, loads, decodes and resumes."""
    overrides = [*RUN, "callbacks.nonfinite.max_consecutive=3", "callbacks.resume_checkpoint.every_n_train_steps=1"]
    train(compose_train([*overrides, "trainer.max_steps=7"], output_dir=tmp_path / "good"))
    with pytest.raises(TrainingStopped) as stop:
        train(
            compose_train(
                [*overrides, "trainer.max_steps=12", *inject(nan_at_steps=[7, 8, 9])],
                output_dir=tmp_path,
            )
        )
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert str(stop.value) == (
        "3 updates in a row had non-finite loss or gradients (updates 8-10, skipped, so the weights are still those "
        f"after update 7, as in the last checkpoint, {last}). Lower the learning rate (optim.lr) or look at the "
        f"batches logged above, then resume with ckpt_path={last}"
    )
    assert stop.value.status == 2 and stop.value.prefix == "stopped"
    written = _checkpoint(last)
    assert written["global_step"] == 9  # after update 9, skipped like update 8: the weights of update 7
    good = _checkpoint(tmp_path / "good" / "checkpoints" / "last.ckpt")["state_dict"]
    assert all(torch.equal(v, good[k]) for k, v in written["state_dict"].items())
    assert load_model(last).src_codec is not None
    resumed = train(compose_train([*overrides, "trainer.max_steps=12", f"ckpt_path={last}"], output_dir=tmp_path))
    assert resumed["val/loss"] > 0 and _checkpoint(last)["global_step"] == 12


def test_a_full_disk_during_a_checkpoint_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    """The disk fills up in the middle of writing the second resume checkpoint (at the validation after update 5):
    the run stops with one message naming the file and saying the previous one is unchanged; that one loads and the
    run resumes from it."""
    real_save, calls = torch.save, []

    def save(obj, handle, *args, **kwargs):
        if ".last.ckpt.tmp-" in str(getattr(handle, "name", "")):
            calls.append(obj["global_step"])
        if len(calls) == 2 and calls[-1] == obj["global_step"]:
            handle.write(b"half a checkpoint")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(obj, handle, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    overrides = [*RUN, "trainer.max_steps=9"]
    with pytest.raises(WriteError) as failed:
        train(compose_train(overrides, output_dir=tmp_path))
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert str(failed.value) == (
        f"could not write {last}: No space left on device; the previous last.ckpt is "
        "unchanged; free some space and run again"
    )
    assert _checkpoint(last)["global_step"] == 3
    assert not [p for p in last.parent.iterdir() if ".tmp-" in p.name]  # no temporary file left
    monkeypatch.setattr(torch, "save", real_save)
    train(compose_train([*overrides, f"ckpt_path={last}"], output_dir=tmp_path))
    assert _checkpoint(last)["global_step"] == 9


@pytest.fixture
def tiny_disk(tmp_path):
    """A 300 KB tmpfs (root only; skipped where mounting is not allowed)."""
    where = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(where)], capture_output=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_real_full_disk_keeps_the_previous_checkpoint(tiny_disk):
    """On a real full file system (a 300 KB tmpfs), a checkpoint that does not fit beside the previous one fails with
    ENOSPC: the previous checkpoint stays loadable and no temporary file is left."""
    io, path = AtomicCheckpointIO(), tiny_disk / "last.ckpt"
    io.save_checkpoint({"weights": torch.zeros(40_000)}, path)  # 160 KB
    with pytest.raises(WriteError, match=r"No space left on device; the previous last.ckpt is unchanged"):
        io.save_checkpoint({"weights": torch.ones(40_000)}, path)  # 160 KB more: no room beside the first
    assert torch.equal(_checkpoint(path)["weights"], torch.zeros(40_000))
    assert os.listdir(tiny_disk) == ["last.ckpt"]
