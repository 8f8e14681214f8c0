"""The floors of the package (``.importlinter``): import-linter keeps the contract on the checkout, and fails, naming
the import, on a copy of the package given one import from a lower floor up to a higher one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

LINT = Path(sys.executable).parent / "lint-imports"


def lint(folder: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the ``sarnmt`` package and the ``.importlinter`` contract in ``folder``."""
    if not LINT.is_file():
        pytest.skip(f"{LINT}: import-linter is not installed (make install)")
    env = {**os.environ, "PYTHONPATH": str(folder)}  # this folder's sarnmt, before the editable install's
    return subprocess.run([str(LINT)], cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_the_checkout_keeps_the_floors():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Contracts: 1 kept, 0 broken." in done.stdout


def test_an_import_from_a_lower_floor_up_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "sarnmt", tmp_path / "sarnmt", ignore=shutil.ignore_patterns("__pycache__", "conf"))
    shutil.copy(ROOT / ".importlinter", tmp_path)
    assert lint(tmp_path).returncode == 0  # the copy as it is
    gru = tmp_path / "sarnmt" / "models" / "gru.py"
    gru.write_text(gru.read_text() + "\nfrom sarnmt.training.loss import translation_loss  # noqa: E402\n")
    done = lint(tmp_path)
    assert done.returncode != 0 and "BROKEN" in done.stdout
    assert "sarnmt.models is not allowed to import sarnmt.training" in done.stdout
    assert "sarnmt.models.gru -> sarnmt.training.loss" in done.stdout
