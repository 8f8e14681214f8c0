"""Surviving interruptions: atomic checkpoint writes, the resume checkpoint, and a run resumed from a mid-epoch
checkpoint that trains exactly as the uninterrupted one."""

from __future__ import annotations

import logging
import os
import re

import pytest
import torch
from omegaconf import OmegaConf

from sarnmt.data.loading.sampler import TokenBatchSampler
from sarnmt.errors import InputError
from sarnmt.training.resume import AtomicCheckpointIO
from sarnmt.training.run import train
from sarnmt.training.settings import check_training
from sarnmt.utils.compose import compose, resume_run_dir
from tests.cli_helpers import run_cli
from tests.conftest import compose_train
from tests.test_train import SMALL_TOY

RESUMABLE = [
    *SMALL_TOY,
    "data.max_tokens=300",
    "model.dropout_readout=0.3",
    "optim=adam",
    "optim.lr=0.003",
    "validation=cost",
    "trainer.val_check_interval=5",
    "callbacks.resume_checkpoint.train_time_interval=null",
    "callbacks.resume_checkpoint.every_n_train_steps=3",
    "test=false",
    "trainer.enable_progress_bar=false",
    "~callbacks.progress_bar",
    "~callbacks.model_summary",
    "trainer.max_epochs=100",
]


def _weights(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def test_mid_epoch_resume_trains_as_the_uninterrupted_run(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="sarnmt.data.loading.position")
    full = train(compose_train([*RESUMABLE, "trainer.max_steps=22"], output_dir=tmp_path / "full"))
    # stopped after 8 updates: as if killed there, the resume point is the last checkpoint (every 3 updates)
    train(compose_train([*RESUMABLE, "trainer.max_steps=8"], output_dir=tmp_path / "cut"))
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    cut = _weights(last)
    assert cut["global_step"] == 6 and cut["epoch"] == 0
    per_epoch = cut["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["processed"]
    resumed = train(
        compose_train([*RESUMABLE, "trainer.max_steps=22", f"ckpt_path={last}"], output_dir=tmp_path / "cut")
    )
    assert any("resuming epoch" in r.getMessage() for r in caplog.records), "the checkpoint was not mid-epoch"
    assert 0 < per_epoch
    a, b = _weights(full["best_model_path"]), _weights(resumed["best_model_path"])  # selected at step 20
    assert a["global_step"] == b["global_step"] == 20
    for name, tensor in a["state_dict"].items():
        assert torch.equal(tensor, b["state_dict"][name]), name  # same batches, same dropout masks, same updates
    assert resumed["val/loss"] == pytest.approx(full["val/loss"], abs=0)


def test_sampler_skips_only_the_next_iteration():
    sampler = TokenBatchSampler([3] * 40, [4] * 40, max_tokens=30, shuffle=True, seed=5)
    whole = list(sampler)
    sampler.skip_next(3)
    assert len(sampler) == len(whole) and list(sampler) == whole[3:]
    assert list(sampler) == whole
    with pytest.raises(ValueError, match="cannot skip -1"):
        sampler.skip_next(-1)


def test_sampler_skips_only_in_the_epoch_it_was_told():
    """Resuming an end-of-epoch checkpoint: all of epoch 0 is skipped if Lightning finishes epoch 0 again, nothing if it
    goes on with epoch 1."""
    sampler = TokenBatchSampler([3] * 40, [4] * 40, max_tokens=30, shuffle=True, seed=5)
    epoch1 = (sampler.set_epoch(1), list(sampler))[1]
    sampler.set_epoch(0)
    sampler.skip_next(len(sampler), epoch=0)
    assert list(sampler) == []
    sampler.skip_next(len(sampler), epoch=0)
    sampler.set_epoch(1)
    assert list(sampler) == epoch1


def test_atomic_checkpoint_io_never_leaves_a_partial_file(tmp_path, monkeypatch):
    io, path = AtomicCheckpointIO(), tmp_path / "a" / "last.ckpt"
    io.save_checkpoint({"x": torch.arange(3)}, path)
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.arange(3))

    def crash(obj, handle):
        handle.write(b"half a checkpoint")
        raise KeyboardInterrupt  # killed mid-write

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        io.save_checkpoint({"x": torch.arange(5)}, path)
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.arange(3))  # the previous file, intact
    assert os.listdir(path.parent) == ["last.ckpt"]  # no temporary file left behind


def test_resume_checkpoint_needs_exactly_one_interval(tmp_path):
    """Checked where the run's config enters (:func:`~sarnmt.training.settings.check_training`), before any data is
    read; :class:`ResumeCheckpoint` trusts it."""
    both_null = ["callbacks.resume_checkpoint.train_time_interval=null"]
    with pytest.raises(InputError, match=r"every_n_train_steps=null: give it or .*train_time_interval.*both are null"):
        check_training(compose_train(both_null, output_dir=tmp_path))


@pytest.mark.parametrize(
    ("ckpt_path", "expected"),
    [
        ("outputs/train/run1/checkpoints/last.ckpt", "outputs/train/run1"),
        ("/abs/run/checkpoints/epoch003.ckpt", "/abs/run"),
        ("checkpoints/last.ckpt", "."),  # from inside the run's folder
        ("/models/last.ckpt", "fresh"),  # not in a run's checkpoints/ folder
        (None, "fresh"),
    ],
)
def test_the_run_folder_of_a_resumed_run_is_its_checkpoints_run(ckpt_path, expected):
    assert resume_run_dir(ckpt_path, "fresh") == expected


def test_train_and_lm_resolve_their_run_folder_from_ckpt_path():
    """``hydra.run.dir`` of the training commands: the checkpoint's run, unless the command line names a folder;
    translate's stays a fresh folder (it only reads the checkpoint)."""
    last = "/runs/a/checkpoints/last.ckpt"

    def run_dir(name: str, *overrides: str) -> str:
        cfg = compose(name, [*overrides], return_hydra_config=True)
        return OmegaConf.select(cfg, "hydra.run.dir")

    assert run_dir("train", f"ckpt_path={last}") == "/runs/a"
    assert run_dir("lm", f"ckpt_path={last}") == "/runs/a"
    assert run_dir("train", f"ckpt_path={last}", "hydra.run.dir=/elsewhere") == "/elsewhere"
    assert run_dir("train").startswith("outputs/train/")
    assert run_dir("translate", f"ckpt_path={last}") != "/runs/a"


# the run of the test below, with its progress bar: 13 batches an epoch, last.ckpt every 3 updates, validation every 5
SHOWN = [
    *(o for o in RESUMABLE if o not in ("trainer.enable_progress_bar=false", "~callbacks.progress_bar")),
    "val_bleu=false",
]


def test_a_resumed_run_goes_on_in_its_own_folder(tmp_path, monkeypatch, capsys, recwarn):
    """``sarnmt train ... ckpt_path=<run>/checkpoints/last.ckpt``, as the stop message says to resume, writes its
    checkpoints and logs into ``<run>``, not a new folder; Lightning does not warn that the checkpoint folder
    changed (which would drop the selected checkpoint's path), and the resumed epoch's progress bar has its total."""
    monkeypatch.chdir(tmp_path)
    first = run_cli(capsys, "train", [*SHOWN, "trainer.max_steps=8"])
    assert first.code == 0, first.err[-2000:]
    (run,) = (tmp_path / "outputs" / "train").iterdir()
    last = run.relative_to(tmp_path) / "checkpoints" / "last.ckpt"
    assert _weights(last)["global_step"] == 6  # mid-epoch: 6 of 13 batches
    resumed = run_cli(capsys, "train", [*SHOWN, "trainer.max_steps=16", f"ckpt_path={last}"])
    assert resumed.code == 0, resumed.err[-2000:]
    assert list((tmp_path / "outputs" / "train").iterdir()) == [run]  # no second run folder
    assert sorted(p.name for p in (run / "csv").iterdir()) == ["version_0", "version_1"]  # both starts' metrics
    assert _weights(run / "checkpoints" / "last.ckpt")["global_step"] == 15
    best = resumed.out.split("best checkpoint: ")[1].strip()
    assert best.startswith(str(run)) and "step000015" in best, resumed.out[-500:]  # selected in this run's folder
    assert (run / "curves.png").is_file()
    said = [str(w.message) for w in recwarn] + [resumed.err]
    assert not [text for text in said if "dirpath has changed" in text or "exists and is not empty" in text]
    assert re.search(r"Epoch 0: +\d+%\|[^|]*\| *6/13", resumed.out), resumed.out[-1500:]  # the resumed epoch's bar
