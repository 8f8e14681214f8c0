"""A run is one run: a checkpoint resumed with another configuration, vocabulary or corpus is refused before training
with one ``error:`` line naming every differing key and both values (the checkpoint untouched); a run folder has one
writer (a second run is refused naming the holder, a killed holder's lock is taken over); ``average`` writes over no
checkpoint a run resumes from and combines no checkpoints with different vocabularies."""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from sarnmt.training.run import train
from sarnmt.training.run_lock import LOCK_NAME, RunFolderLocked, run_lock
from tests.cli_helpers import TINY, one_error, run_cli
from tests.conftest import ROOT, compose_train

pytestmark = pytest.mark.faults

EPOCH = [*TINY, "trainer.max_epochs=1"]  # 3 updates


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A toy run of one epoch (data.seed=1234); its folder."""
    folder = tmp_path_factory.mktemp("run")
    train(compose_train(EPOCH, output_dir=folder))
    return folder


def _resume(capsys, folder: Path, checkpoint: Path, *overrides: str, command: str = "train", base=EPOCH):
    return run_cli(capsys, command, [*base, *overrides, f"ckpt_path={checkpoint}", f"hydra.run.dir={folder}"])


@pytest.mark.parametrize(
    "override, named",
    [
        pytest.param("data.seed=999", ["data.seed: 1234 in the checkpoint, 999 now"], id="another data.seed"),
        pytest.param(
            "decoder=mean_residual",
            [
                'decoder._target_: "sarnmt.models.variants.SelfAttentiveResidual" in the checkpoint, '
                '"sarnmt.models.variants.MeanResidual" now',
                'decoder.first_step: absent in the checkpoint, "zero_slot" now',
            ],
            id="another decoder",
        ),
        pytest.param(
            "data.n_train=300", ["data.n_train: 200 in the checkpoint, 300 now"], id="another vocabulary size"
        ),
        pytest.param("optim.lr=0.5", ["optim.lr: 1.0 in the checkpoint, 0.5 now"], id="another learning rate"),
    ],
)
def test_resuming_with_another_configuration_is_refused_naming_the_keys(capsys, run, override, named):
    """Resuming with another data.seed (other words behind the same ids), decoder, vocabulary size or learning rate
    is refused before training: one error line naming each differing key with both values, exit 2, the checkpoint
    untouched."""
    last = run / "checkpoints" / "last.ckpt"
    before = last.read_bytes()
    line = one_error(_resume(capsys, run, last, override))
    assert line.startswith(f"error: checkpoint {last} belongs to another run: "), line
    assert all(part in line for part in named), line
    assert "trainer.max_epochs" in line  # what may change is listed
    assert last.read_bytes() == before


def test_resuming_with_only_max_epochs_changed_trains_on(capsys, run, tmp_path):
    """Resuming with only trainer.max_epochs changed (and another folder for the logs) trains on from the
    checkpoint."""
    last = run / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 3
    outcome = _resume(capsys, tmp_path, last, "trainer.max_epochs=2")
    assert outcome.code == 0, outcome.err[-3000:]
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 6


def test_lstm_checkpoint_resumed_as_a_cgru_with_decoder_baseline_is_refused(capsys, tmp_path):
    """train ckpt_path=<LSTM checkpoint> decoder=baseline (the cGRU model=tiny) is refused naming the model, not a
    traceback from loading its weights."""
    lstm = [*EPOCH, "model=lstm_ff_attention_tiny", "model.emb_dim=16", "model.hidden_dim=32"]
    train(compose_train(lstm, output_dir=tmp_path))
    last = tmp_path / "checkpoints" / "last.ckpt"
    line = one_error(_resume(capsys, tmp_path, last, "decoder=baseline", base=EPOCH))
    assert (
        'model._target_: "sarnmt.models.lstm.AttentionLSTM" in the checkpoint, "sarnmt.models.seq2seq.Seq2Seq" now'
        in line
    )


def test_lm_refuses_a_translation_checkpoint(capsys, run, tmp_path):
    """lm ckpt_path=<translation checkpoint> is refused naming what the checkpoint holds."""
    last = run / "checkpoints" / "last.ckpt"
    line = one_error(_resume(capsys, tmp_path, last, "lm_data=toy", command="lm", base=[]))
    assert line == f"error: checkpoint {last} holds a translation model, not a language model (python -m sarnmt lm)"


def test_resuming_from_an_averaged_checkpoint_is_refused(capsys, run, tmp_path):
    """A run resumed from an averaged (weights only) checkpoint is refused, pointing at last.ckpt."""
    last = run / "checkpoints" / "last.ckpt"
    averaged = tmp_path / "avg.ckpt"
    assert run_cli(capsys, "average", [f"checkpoints=[{last}]", f"output={averaged}"]).code == 0
    line = one_error(_resume(capsys, tmp_path, averaged, "trainer.max_epochs=2"))
    assert "holds weights only (an averaged checkpoint, for decoding)" in line and "checkpoints/last.ckpt" in line


def test_a_checkpoint_without_an_identity_resumes_with_a_warning_and_its_model_is_still_checked(
    capsys, run, tmp_path, caplog
):
    """A checkpoint written before identities were stored resumes with a warning; another decoder is still refused
    (the model config and vocabularies every sarnmt checkpoint holds)."""
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    del checkpoint["sarnmt"]["identity"]
    old = tmp_path / "old.ckpt"
    torch.save(checkpoint, old)
    line = one_error(_resume(capsys, tmp_path / "a", old, "decoder=mean_residual"))
    assert 'decoder._target_: "sarnmt.models.variants.SelfAttentiveResidual" in the checkpoint' in line
    caplog.set_level(logging.WARNING, logger="sarnmt")
    outcome = _resume(capsys, tmp_path / "b", old, "trainer.max_epochs=2")
    assert outcome.code == 0, outcome.err[-3000:]
    assert any("was written before sarnmt stored a run's identity" in r.getMessage() for r in caplog.records)


def test_changed_text_files_under_the_same_paths_are_refused_by_their_hashes(capsys, tmp_path):
    """data=files whose training text changed under the same paths: the config is the same, the vocabulary and corpus
    hashes are not, and the resume is refused naming them."""
    rng = random.Random(0)
    words = "ta brin blorp nu gorm vosk kel dra mun pif zot wex".split()

    def lines(n: int) -> str:
        return "".join(" ".join(rng.choice(words) for _ in range(rng.randint(2, 7))) + "\n" for _ in range(n))

    for name, n in (("train.src", 60), ("train.tgt", 60), ("dev.src", 10), ("dev.tgt", 10)):
        (tmp_path / name).write_text(lines(n))
    files = [
        *TINY[3:],
        "data=files",
        "data.vocab_size=40",
        *(
            f"data.{key}_{side}={tmp_path}/{name}.{side}"
            for key, name in (("train", "train"), ("dev", "dev"))
            for side in ("src", "tgt")
        ),
        "trainer.max_epochs=1",
    ]
    folder = tmp_path / "run"
    train(compose_train(files, output_dir=folder))
    (tmp_path / "train.src").write_text(lines(60))
    last = folder / "checkpoints" / "last.ckpt"
    line = one_error(_resume(capsys, folder, last, "trainer.max_epochs=2", base=files))
    assert "corpus: sha256:" in line and "vocabulary.src: sha256:" in line and "vocabulary.tgt" not in line


# --- average ---------------------------------------------------------------------------------------------------------
def test_average_refuses_to_write_over_a_resume_checkpoint(capsys, run):
    """average output=<run>/checkpoints/last.ckpt is refused: the resume checkpoint stays as it was."""
    last = run / "checkpoints" / "last.ckpt"
    before = last.read_bytes()
    line = one_error(run_cli(capsys, "average", [f"checkpoints=[{last}]", f"output={last}"]))
    assert line.startswith(f"error: output={last} is a checkpoint a run resumes from"), line
    assert last.read_bytes() == before


def test_average_refuses_checkpoints_with_different_vocabularies(capsys, run, tmp_path):
    """average refuses two checkpoints of one model size whose vocabularies differ, naming both."""
    last = run / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, weights_only=True)
    itos = checkpoint["sarnmt"]["codecs"]["src"]["itos"]
    itos[2], itos[3] = itos[3], itos[2]  # two words swap ids: the same size, another vocabulary
    other = tmp_path / "other.ckpt"
    torch.save(checkpoint, other)
    line = one_error(run_cli(capsys, "average", [f"checkpoints=[{last},{other}]", f"output={tmp_path / 'a.ckpt'}"]))
    assert line.startswith(f"error: cannot average {other} with {last}: their source vocabularies differ (sha256:")
    assert not (tmp_path / "a.ckpt").exists()


def test_average_refuses_last_0(capsys, run, tmp_path):
    """average last=0 is refused."""
    line = one_error(
        run_cli(capsys, "average", [f"dir={run / 'checkpoints'}", "last=0", f"output={tmp_path / 'a.ckpt'}"])
    )
    assert line == "error: last=0: give the number of checkpoints to average, 1 or more"


# --- the run folder's lock -------------------------------------------------------------------------------------------
def _wait_for_lock(folder: Path, process: subprocess.Popen) -> dict:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()[-3000:]
        try:
            return json.loads((folder / LOCK_NAME).read_text())
        except (OSError, ValueError):
            time.sleep(0.2)
    raise AssertionError("the first run took no lock")


def test_a_second_train_into_a_locked_folder_is_refused_and_a_killed_holders_lock_is_taken_over(
    capsys, tmp_path, caplog
):
    """A second train into the folder of a running one is refused naming the holder's PID (and the folder's .hydra
    files still describe the holder); after kill -9 of the holder, a new run takes the lock over with a warning."""
    folder = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    first = subprocess.Popen(
        [sys.executable, "-m", "sarnmt.train", *TINY, "seed=7", "trainer.max_epochs=100000", f"hydra.run.dir={folder}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        holder = _wait_for_lock(folder, first)
        assert holder["pid"] == first.pid and holder["host"] == socket.gethostname()
        line = one_error(run_cli(capsys, "train", [*EPOCH, "seed=8", f"hydra.run.dir={folder}"]))
        assert line.startswith(f"error: run folder {folder} is in use by another run: PID {first.pid} on host "), line
        assert "seed=7" in (folder / ".hydra" / "overrides.yaml").read_text()  # put back: the holder's
    finally:
        first.kill()
        first.communicate()
    caplog.set_level(logging.WARNING, logger="sarnmt")
    outcome = run_cli(capsys, "train", [*EPOCH, "seed=8", f"hydra.run.dir={folder}"])
    assert outcome.code == 0, outcome.err[-3000:]
    assert any(
        f"it was locked by PID {first.pid} on host" in r.getMessage() and "taking its lock over" in r.getMessage()
        for r in caplog.records
    )
    assert not (folder / LOCK_NAME).exists()  # released at the end
    assert "seed=8" in (folder / ".hydra" / "overrides.yaml").read_text()


def _lock(folder: Path, **record) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    base = {"pid": 4242, "host": "elsewhere", "started": "2025-01-01T00:00:00+00:00", "token": "t"}
    (folder / LOCK_NAME).write_text(json.dumps({**base, **record}))
    return folder / LOCK_NAME


def test_a_lock_from_another_host_is_refused_naming_it(tmp_path):
    """A lock held by a process on another host (which cannot be checked) is refused, naming host and PID and how
    to remove it; the same SLURM job requeued (a higher SLURM_RESTART_COUNT) takes it over."""
    path = _lock(tmp_path, slurm_job="77", slurm_restart=0)
    with pytest.raises(RunFolderLocked, match=f"locked by PID 4242 on host elsewhere .*delete {path}"):
        with run_lock(tmp_path):
            pass
    os.environ["SLURM_JOB_ID"], os.environ["SLURM_RESTART_COUNT"] = "77", "1"
    try:
        with run_lock(tmp_path) as record:
            assert json.loads(path.read_text())["token"] == record["token"]
    finally:
        del os.environ["SLURM_JOB_ID"], os.environ["SLURM_RESTART_COUNT"]
    assert not path.exists()


def test_a_lock_is_released_on_an_error_and_left_alone_by_ddp_ranks(tmp_path, monkeypatch):
    """The lock goes when the run ends by an error; a DDP rank other than 0 takes none (its rank 0 holds it); a
    lock naming this very PID that this process does not hold (a restarted container) is stale."""
    with pytest.raises(KeyError):
        with run_lock(tmp_path):
            assert (tmp_path / LOCK_NAME).exists()
            raise KeyError("a bug")
    assert not (tmp_path / LOCK_NAME).exists()
    path = _lock(tmp_path, pid=os.getpid(), host=socket.gethostname())
    monkeypatch.setenv("LOCAL_RANK", "1")
    with run_lock(tmp_path) as record:
        assert record is None and path.exists()
    monkeypatch.delenv("LOCAL_RANK")
    with run_lock(tmp_path) as record:
        assert record is not None
    assert not path.exists()
