"""The code's layout is the formatter's and its rules ruff's: ``make lint``, run by the suite so that CI holds it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ["sarnmt", "tests", "benchmarks"]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_is_clean(command):
    done = subprocess.run([sys.executable, "-m", "ruff", *command, *TREES], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
