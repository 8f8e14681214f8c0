"""Running sarnmt's command line entry points inside the test process, as ``sarnmt <name>`` would, and the hostile
files the fault tests feed them."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from sarnmt.cli import main
from sarnmt.training.run import train
from tests.conftest import compose_train

QUIET_HYDRA = ["hydra/job_logging=none", "hydra/hydra_logging=none"]

# runs a module as `python -m` does and, at exit, writes the process's peak resident memory (VmHWM, in kB) to the
# file $PEAK_RSS_FILE. VmHWM is the memory of this program alone; the ru_maxrss that os.wait4 gives of a child also
# counts what the parent held when it forked (exec records the old address space's high-water mark), so a pytest
# worker that had trained models passed its own 1 GiB to every child it measured
PEAK = """import atexit, os, runpy, sys
def peak():
    with open("/proc/self/status") as status, open(os.environ["PEAK_RSS_FILE"], "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM:")).split()[1])
atexit.register(peak)
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@dataclass
class Outcome:
    code: int
    out: str
    err: str


@dataclass
class Measured(Outcome):
    peak_bytes: int  # the peak resident memory of the process alone


def run_measured(
    args: list[str], cwd: Path, logs: Path, stdin: str | Path | None = None, timeout: float = 300
) -> Measured:
    """``python -m sarnmt args`` as a process in ``cwd``, its stdout and stderr written to files in ``logs``, with
    ``WANDB_MODE=disabled`` and one thread: its exit status, output and peak resident memory (``PEAK``); killed after
    ``timeout`` seconds (``subprocess.TimeoutExpired``)."""
    peak_file = logs / "peak_rss_kb"
    peak_file.unlink(missing_ok=True)
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1", "PEAK_RSS_FILE": str(peak_file)}
    env.pop("HYDRA_FULL_ERROR", None)
    command = [sys.executable, "-c", PEAK, "sarnmt", *args]
    with (
        open(os.devnull if stdin is None else stdin, "rb") as source,
        open(logs / "stdout", "wb") as out,
        open(logs / "stderr", "wb") as err,
    ):
        code = subprocess.run(command, stdin=source, stdout=out, stderr=err, cwd=cwd, env=env, timeout=timeout)
    text = [(logs / name).read_text(errors="replace") for name in ("stdout", "stderr")]
    return Measured(code.returncode, text[0], text[1], int(peak_file.read_text()) * 1024)


def run_cli(capsys, name: str, args: list[str], stdin: bytes | None = None) -> Outcome:
    """``sarnmt <name> args`` in this process (:func:`sarnmt.cli.main`); ``stdin`` as the bytes of standard input."""
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        code = main([name, *args, *QUIET_HYDRA])  # Hydra's logging setup would outlive the captured streams
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.stdin = saved
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def one_error(outcome: Outcome) -> str:
    """The single ``error: ...`` line a refused input prints (asserting that it is the only output on stderr)."""
    assert outcome.code == 2, outcome
    lines = outcome.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in outcome.err, outcome.err
    return lines[0]


# the toy run of the fault and wheel tests: a 43K-parameter model, 200 pairs (3 updates an epoch), no test decoding
TINY = [
    "data.n_train=200",
    "data.n_dev=20",
    "data.n_test=20",
    "model.emb_dim=16",
    "model.hidden_dim=32",
    "test=false",
    "validation=cost",
    "val_bleu=false",
    "trainer.enable_progress_bar=false",
    "~callbacks.progress_bar",
    "~callbacks.model_summary",
]


def train_tiny(out: Path) -> Path:
    """A 43K-parameter model trained 3 updates on the toy corpus; its checkpoint."""
    train(
        compose_train(
            [*TINY, "trainer.max_steps=3"],
            output_dir=out,
        )
    )
    return out / "checkpoints" / "last.ckpt"


class RunsCode:
    """Unpickling it runs ``touch <marker>``: what a malicious checkpoint would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def hostile_checkpoints(folder: Path, good: Path) -> dict[str, tuple[Path, str]]:
    """``{case: (checkpoint, what its refusal says)}``; the code-running ones would create ``folder/pwned``."""
    folder.mkdir(parents=True, exist_ok=True)
    data = good.read_bytes()
    (folder / "truncated.ckpt").write_bytes(data[: len(data) // 2])
    torch.save({"state_dict": {"encoder.weight": torch.zeros(2, 2)}, "epoch": 3}, folder / "other.ckpt")
    torch.save({"model": RunsCode(folder / "pwned")}, folder / "runs_code.ckpt")  # a torch zip file
    (folder / "runs_code.pkl").write_bytes(pickle.dumps(RunsCode(folder / "pwned")))  # a bare pickle
    (folder / "a_folder.ckpt").mkdir(exist_ok=True)
    (folder / "empty.ckpt").write_bytes(b"")
    assert zipfile.is_zipfile(folder / "runs_code.ckpt")
    return {
        "truncated": (folder / "truncated.ckpt", "is corrupt or truncated"),
        "another project's": (folder / "other.ckpt", "is not a sarnmt checkpoint (no 'sarnmt'/'state_dict' entry"),
        "pickle running code": (
            folder / "runs_code.ckpt",
            "is not a sarnmt checkpoint: it holds Python objects "
            "(posix.system) that sarnmt never loads, as loading them could run code; refused "
            "without running any of its content",
        ),
        "bare pickle running code": (folder / "runs_code.pkl", "is not a PyTorch checkpoint file"),
        "a folder": (folder / "a_folder.ckpt", "is a folder; give a .ckpt file"),
        "empty": (folder / "empty.ckpt", "checkpoint"),
        "missing": (folder / "missing.ckpt", "does not exist"),
    }
