"""bf16 where the CPU only emulates it: ``translate``, ``evaluate`` and ``train`` refuse it with one ``error:`` line
naming the instruction set the CPU lacks, exit 2, before any checkpoint is read or run folder written.

The CPU's answer is replaced (``native_bf16`` returns False), so the refusal is tested on every machine, with
AVX-512 BF16 or without; :func:`test_the_probe_says_what_this_cpu_has` checks the probe itself against
``/proc/cpuinfo``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sarnmt.utils import precision
from tests.cli_helpers import TINY, one_error, run_cli


@pytest.fixture
def no_bf16(monkeypatch):
    monkeypatch.setattr(precision, "native_bf16", lambda device: False)


def test_translate_and_evaluate_refuse_emulated_bf16(capsys, no_bf16, tmp_path):
    missing = tmp_path / "missing.ckpt"  # never read: the setting is refused first
    for command, args in (
        ("translate", [f"ckpt_path={missing}", "precision=bf16", "progress=false"]),
        ("evaluate", [f"ckpt_path={missing}", "precision=bf16", f"output_dir={tmp_path / 'eval'}"]),
    ):
        line = one_error(run_cli(capsys, command, args, b"x\n"))
        assert line.startswith("error: precision=bf16: this cpu has no AVX-512 BF16 or AMX"), line
        assert "use precision=fp32" in line
    assert not (tmp_path / "eval").exists()


def test_train_refuses_emulated_bf16_before_writing_a_run(capsys, no_bf16, tmp_path):
    out = tmp_path / "run"
    args = [*TINY, "trainer.max_steps=1", "trainer.accelerator=cpu", "trainer.precision=bf16-mixed"]
    line = one_error(run_cli(capsys, "train", [*args, f"hydra.run.dir={out}"]))
    assert line.startswith("error: trainer.precision=bf16-mixed: this cpu has no AVX-512 BF16 or AMX"), line
    assert not list(Path(out).glob("checkpoints/*"))


def test_fp32_passes_the_check(no_bf16):
    precision.check_native_bf16(torch.device("cpu"), "fp32")
    precision.check_native_bf16(torch.device("cpu"), "32-true", "trainer.precision")


def test_the_probe_says_what_this_cpu_has():
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        pytest.skip("no /proc/cpuinfo flags on this machine")
    has = any(flag in flags.split() for flag in ("avx512_bf16", "amx_bf16", "amx_tile"))
    assert precision.native_bf16(torch.device("cpu")) == has
