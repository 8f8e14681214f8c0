"""``sarnmt <command> --help`` prints without importing torch, Lightning or matplotlib where the help does not need
them: every Hydra command's help comes from its config alone (:func:`sarnmt.cli.run`), and ``params`` and ``curves``
import their heavy modules only to run. How long each takes is a benchmark's to say
(``benchmarks/help_times.py``), not a timed test's. ``analyze``, ``bench`` and ``--version`` (which names torch's
CUDA devices) still import torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sarnmt.cli import COMMANDS

HEAVY = ("torch", "lightning", "matplotlib")
STILL_HEAVY = {"analyze", "bench", "version"}  # see the module docstring
PROBE = (
    "import sys\n"
    "from sarnmt.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
)


@pytest.mark.parametrize("name", [n for n in COMMANDS if n not in STILL_HEAVY])
def test_help_imports_no_heavy_library(name):
    done = subprocess.run([sys.executable, "-c", PROBE, name, "--help"], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(done.stdout.splitlines()) > 3  # the help itself
