"""The command-line entry points as a user runs them (subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

TINY = ["data.n_train=200", "data.n_dev=20", "data.n_test=20", "model.emb_dim=16", "model.hidden_dim=32"]


def _run(args: list[str], env: dict[str, str] | None = None, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_params_table():
    out = _run(["sarnmt", "params", "model=paper", "decoder=all"])
    assert out.returncode == 0, out.stderr
    for figure in ("108,725,885", "108,976,885", "109,775,485", "110,287,485", "110,824,061", "111,336,061"):
        assert figure in out.stdout


def test_params_unknown_decoder_lists_choices():
    out = _run(["sarnmt", "params", "decoder=nope"])
    assert out.returncode == 2
    assert "Could not find 'decoder/nope'" in out.stderr and "self_attentive_content" in out.stderr


def test_a_group_option_or_key_the_config_lacks_is_one_error_line_in_every_hydra_command():
    """Hydra prints its composition errors on several lines and exits 1; sarnmt says each in one line, exit 2."""
    cases = [
        (["sarnmt.train", "decoder=nope"], "error: In 'train': Could not find 'decoder/nope'; Available options in"),
        (["sarnmt", "translate", "nogroup=x"], "error: Could not override 'nogroup'. To append to your config use"),
    ]
    for args, start in cases:
        out = _run(args, env={"HYDRA_FULL_ERROR": ""})
        assert out.returncode == 2 and out.stderr.startswith(start), out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "--help lists the groups" in out.stderr
    out = _run(cases[0][0], env={"HYDRA_FULL_ERROR": "1"})  # the traceback too, the same last line and status
    assert out.returncode == 2 and "Traceback" in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith(cases[0][1])


def test_train_and_params_refuse_a_pair_that_does_not_go_together_in_one_line():
    out = _run(["sarnmt.train", "model=lstm_input_feeding_tiny", "decoder=mean_residual"])
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "error: decoder MeanResidual (hooks: readout) does not go with model InputFeedingLSTM (offers: no hook; "
        "needs: nothing); valid decoder= options for this model: none"
    )
    out = _run(["sarnmt", "params", "model=lstm_fixed_context", "decoder=memory_rnn"])
    assert out.returncode == 2 and "valid decoder= options for this model: baseline, mean_residual" in out.stderr
    out = _run(["sarnmt", "params", "model=lstm_ff_attention_small", "decoder=all"])
    assert out.returncode == 0 and "| self_attentive_content |" in out.stdout and "memory_rnn" not in out.stdout


def test_an_unknown_kernels_choice_is_one_line_before_any_data_is_read(tmp_path):
    # the corpus folder does not exist: reading it would be a different error
    args = ["kernels=fast", "data=multi30k_en_de", f"data.root={tmp_path / 'absent'}", f"hydra.run.dir={tmp_path}"]
    out = _run(["sarnmt.train", *args])
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "error: kernels='fast' is not a choice: use one of auto, fused, plain (sarnmt/kernels/)"
    )


def test_train_help_lists_groups():
    out = _run(["sarnmt.train", "--help"])
    assert out.returncode == 0
    assert "decoder: baseline, mean_residual" in out.stdout and "python -m sarnmt.train" in out.stdout


def test_multirun_gives_one_wandb_run_per_job(tmp_path):
    out = _run(
        [
            "sarnmt.train",
            "--multirun",
            "decoder=baseline,mean_residual",
            "logger=wandb",
            "trainer.max_steps=1",
            "trainer.val_check_interval=1",
            "trainer.limit_val_batches=1",
            "trainer.limit_test_batches=1",
            "trainer.enable_progress_bar=false",
            "~callbacks.progress_bar",
            *TINY,
            f"hydra.sweep.dir={tmp_path}",
        ],
        env={"WANDB_MODE": "offline", "WANDB_SILENT": "true"},
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    for job in ("0", "1"):
        runs = list((tmp_path / job / "wandb").glob("offline-run-*"))
        assert len(runs) == 1, f"job {job}: {runs}"
    assert out.stdout.count("test BLEU = ") == 2
