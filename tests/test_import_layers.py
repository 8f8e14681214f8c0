"""The floors of the package, its lack of circles and the checkpoint readers' independence of training
(``.importlinter``): import-linter keeps the three contracts on the checkout, and fails, naming the import, on a copy
of the package given one import from a lower floor up to a higher one, one type-only import that closes a circle
inside a package, or one import of the training package by a command that decodes checkpoints."""

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
    assert "Contracts: 3 kept, 0 broken." in done.stdout


def copy_package(folder: Path) -> Path:
    """A copy of the checkout's package and contract in ``folder``, which keeps the contracts: the package's folder."""
    shutil.copytree(ROOT / "sarnmt", folder / "sarnmt", ignore=shutil.ignore_patterns("__pycache__", "conf"))
    shutil.copy(ROOT / ".importlinter", folder)
    assert lint(folder).returncode == 0  # the copy as it is
    return folder / "sarnmt"


def test_an_import_from_a_lower_floor_up_breaks_the_contract(tmp_path):
    gru = copy_package(tmp_path) / "models" / "gru.py"
    gru.write_text(gru.read_text() + "\nfrom sarnmt.training.loss import translation_loss  # noqa: E402\n")
    done = lint(tmp_path)
    assert done.returncode != 0 and "BROKEN" in done.stdout
    assert "sarnmt.models is not allowed to import sarnmt.training" in done.stdout
    assert "sarnmt.models.gru -> sarnmt.training.loss" in done.stdout


def test_a_type_only_import_that_closes_a_circle_breaks_the_contract(tmp_path):
    """decoding/beam.py imports decoding/rule.py; rule.py naming beam.py's class for its annotations only closes a
    circle, which the second contract names, though the floors do not see it."""
    rule = copy_package(tmp_path) / "decoding" / "rule.py"
    circle = "\nfrom typing import TYPE_CHECKING  # noqa: E402\n\nif TYPE_CHECKING:\n"
    rule.write_text(rule.read_text() + circle + "    from sarnmt.decoding.beam import BeamSearch  # noqa: F401\n")
    done = lint(tmp_path)
    assert done.returncode != 0 and "sarnmt's floors: each package imports only the floors below it KEPT" in done.stdout
    assert "No cycles are allowed in sarnmt.decoding." in done.stdout
    assert ".rule -> .beam" in done.stdout


def test_a_command_that_decodes_checkpoints_reaching_training_breaks_the_contract(tmp_path):
    """translate reads checkpoints through sarnmt.checkpoints; reading them through the training package again (here
    its identity module, which reads checkpoints too) makes translation depend on training, which the third contract
    names, though the floors allow it (cli is above training)."""
    translate = copy_package(tmp_path) / "cli" / "translate.py"
    translate.write_text(
        translate.read_text() + "\nfrom sarnmt.training.identity import resume_point  # noqa: E402,F401\n"
    )
    done = lint(tmp_path)
    assert done.returncode != 0 and "sarnmt's floors: each package imports only the floors below it KEPT" in done.stdout
    assert "sarnmt.cli.translate is not allowed to import sarnmt.training" in done.stdout
    assert "sarnmt.cli.translate -> sarnmt.training.identity" in done.stdout


def test_checkpoints_are_read_and_written_in_the_checkpoint_package_alone():
    """Every call of ``torch.load`` and ``torch.save`` (a checkpoint read or written) is in sarnmt/checkpoints: training
    writes through :func:`sarnmt.checkpoints.writing.write_checkpoint`, the sweeps and commands read through
    :mod:`sarnmt.checkpoints.reading`."""
    import ast

    def calls(path: Path) -> bool:
        return any(
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("load", "save")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )

    found = {path.relative_to(ROOT).as_posix() for path in (ROOT / "sarnmt").rglob("*.py") if calls(path)}
    assert found == {
        "sarnmt/checkpoints/reading.py",
        "sarnmt/checkpoints/writing.py",
        "sarnmt/checkpoints/averaging.py",
    }
