"""Signals and pipes as Unix tools have them (:func:`sarnmt.errors.reported`, every command's wrapper): SIGINT and
SIGTERM print one line and exit 130 / 143 after the stack unwound, so ``translate output= attention=`` leaves the
previous files and no ``.tmp-PID`` file; a closed standard output (``| head -1``) ends quietly with status 141; a
full one (``> /dev/full``) is named. Real ``python -m sarnmt`` processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sarnmt.errors import Terminated, _raise_terminated, reported
from tests.cli_helpers import train_tiny
from tests.conftest import ROOT
from tests.fault_injection import inject

pytestmark = pytest.mark.faults
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
LINE = "ta brin blorp nu gorm ta vosk\n"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("tiny"))


def _translate(ckpt: Path, *args: str, **popen) -> subprocess.Popen:
    command = [sys.executable, "-m", "sarnmt", "translate", f"ckpt_path={ckpt}", "progress=false", *args]
    return subprocess.Popen(command, cwd=ROOT, env=ENV, stderr=subprocess.PIPE, **popen)


@pytest.mark.parametrize("name,status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_during_translate_keeps_the_previous_files_and_leaves_no_temporary_file(ckpt, tmp_path, name, status):
    """SIGINT or SIGTERM while translate writes output= and attention=: one line, exit 130 / 143, the previous
    output and attention files unchanged, no .tmp-PID file left."""
    source = tmp_path / "in.txt"
    source.write_text(LINE * 60_000)
    out, attention = tmp_path / "out.txt", tmp_path / "att.jsonl"
    out.write_text("previous translation\n")
    attention.write_text("previous attention\n")
    process = _translate(ckpt, f"input={source}", f"output={out}", f"attention={attention}", stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not any(".tmp-" in p.name for p in tmp_path.iterdir()):  # decoding has begun writing
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()
        time.sleep(0.2)
    time.sleep(0.5)
    process.send_signal(getattr(signal, name))
    _, err = process.communicate(timeout=120)
    assert process.returncode == status and err.decode().splitlines() == [f"interrupted: stopped by {name}"], err
    assert out.read_text() == "previous translation\n" and attention.read_text() == "previous attention\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["att.jsonl", "in.txt", "out.txt"]


def test_a_closed_stdout_ends_quietly(ckpt, tmp_path):
    """translate | head -1: the reader goes away after one line; translate ends with status 141 (SIGPIPE's) and
    prints nothing (no "Broken pipe", no "Exception ignored")."""
    source = tmp_path / "in.txt"
    source.write_text(LINE * 20_000)  # far more output than a pipe holds
    process = _translate(ckpt, f"input={source}", stdout=subprocess.PIPE)
    assert process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=240) == 141 and err == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_full_stdout_is_named(ckpt, tmp_path):
    """translate > /dev/full: one line naming standard output, exit 2."""
    with open("/dev/full", "w") as full:
        process = _translate(ckpt, stdin=subprocess.PIPE, stdout=full)
        _, err = process.communicate(LINE.encode() * 2, timeout=240)
    assert process.returncode == 2
    assert err.decode().splitlines() == ["error: could not write standard output: No space left on device"]


def test_sigterm_inside_reported_unwinds_and_restores_the_default(capsys):
    """In any command: SIGTERM raises where the work is (a finally block runs), one line, exit 143; the default
    action is back afterwards."""
    cleaned = []
    with pytest.raises(SystemExit) as stop, reported():
        assert signal.getsignal(signal.SIGTERM) is _raise_terminated
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the signal arrives before this ends
        finally:
            cleaned.append(True)
    assert stop.value.code == 143 and cleaned == [True]
    assert capsys.readouterr().err == "interrupted: stopped by SIGTERM\n"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_sigterm_composed_into_another_handler_is_left_to_it():
    """Where another handler calls ours from its own (Lightning's during training, which checkpoints and stops),
    ours does nothing: that handler is in charge."""
    calls = []

    def composed(signum, frame):
        calls.append(signum)
        _raise_terminated(signum, frame)

    with reported():
        previous = signal.signal(signal.SIGTERM, composed)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
        finally:
            signal.signal(signal.SIGTERM, previous)
    assert calls == [signal.SIGTERM]
    with pytest.raises(Terminated):
        signal.signal(signal.SIGTERM, _raise_terminated)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_what_a_sigkilled_translate_left_is_removed_by_the_next_write(ckpt, tmp_path):
    """SIGKILL cannot be caught: translate killed while writing output= and attention= leaves its .tmp-PID files
    (the previous files intact); the next translate to the same files removes them. A temporary file of a process
    that still runs (another writer) is kept."""
    source = tmp_path / "in.txt"
    source.write_text(LINE * 60_000)
    out, attention = tmp_path / "out.txt", tmp_path / "att.jsonl"
    out.write_text("previous translation\n")
    process = _translate(ckpt, f"input={source}", f"output={out}", f"attention={attention}", stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not any(".tmp-" in p.name for p in tmp_path.iterdir()):
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()
        time.sleep(0.2)
    process.kill()
    process.communicate(timeout=60)
    left = sorted(p.name for p in tmp_path.iterdir() if ".tmp-" in p.name)
    assert left == [f".att.jsonl.tmp-{process.pid}", f".out.txt.tmp-{process.pid}"]
    assert out.read_text() == "previous translation\n"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (tmp_path / f".out.txt.tmp-{live.pid}").write_text("another writer's")
        source.write_text(LINE)
        again = _translate(ckpt, f"input={source}", f"output={out}", f"attention={attention}", stdout=subprocess.PIPE)
        _, err = again.communicate(timeout=240)
        assert again.returncode == 0, err
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            ".out.txt.tmp-" + str(live.pid),
            "att.jsonl",
            "in.txt",
            "out.txt",
        ]
        assert out.read_text().count("\n") == 1
    finally:
        live.kill()
        live.wait()


def test_sigint_during_training_ends_with_status_130(tmp_path):
    """SIGINT during a training run (sent by the run itself at update 2): Lightning's graceful shutdown, then one
    line and status 130 (Lightning alone exits 1), no traceback."""
    from tests.cli_helpers import TINY

    command = [sys.executable, "-m", "sarnmt", "train", *TINY, "trainer.max_steps=6"]
    command += [*inject(signal_at_step=2, signal_name="SIGINT"), f"hydra.run.dir={tmp_path / 'run'}"]
    done = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, timeout=600)
    err = done.stderr.decode()
    assert done.returncode == 130 and err.strip().splitlines()[-1] == "interrupted: stopped by SIGINT", err
    assert "Traceback" not in err
