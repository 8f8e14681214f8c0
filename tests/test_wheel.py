"""The wheel works without the checkout: built from it, installed into a fresh virtual environment and run from a folder
outside it, ``sarnmt.params`` prints Table 1 and ``sarnmt.train`` trains a toy model for one epoch, both with the
configs the wheel holds (``sarnmt/conf``, package data: :func:`sarnmt.utils.compose.config_dir`); ``sarnmt --version``
answers, ``sarnmt reproduce`` plans a table and ``sarnmt tables`` renders records it is given, with the table specs the
wheel holds (``sarnmt/sweep/specs``: :func:`sarnmt.utils.compose.specs_dir`).

What the fresh environment shares with this one: its third-party dependencies only. It is made with
``python -m venv --without-pip``, the wheel goes in with ``pip --python <fresh> install --no-deps --no-index``, and a
``.pth`` file in its site-packages appends this interpreter's site-packages folders to ``sys.path`` for torch,
Lightning, Hydra and the rest. Appended as folders, not as site dirs: the ``.pth`` files in them are not run, so the
editable install's finder (``__editable__.sarnmt-*.pth``, which maps ``sarnmt`` to the checkout) stays off, and
``sarnmt`` and ``hydra_plugins.sarnmt_slurm_launcher`` import from the wheel alone (asserted, with no ``sys.path``
entry in the checkout but those dependency folders). Installing the dependencies for real (``pip install <wheel> -c
constraints-cpu.txt``) resolves about 90 packages, more than a GB with torch: minutes and downloads on every run.

The wheel is built with ``--no-build-isolation`` (this environment's setuptools, no download) from a copy of the
checkout, so that no ``build/`` or ``*.egg-info`` folder is written into it. ``SARNMT_TEST_WHEEL=<path.whl>`` tests a
wheel built elsewhere instead (e.g. one built without the configs, which this test must refuse).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import sarnmt
from sarnmt.utils.compose import config_dir, specs_dir
from tests.cli_helpers import TINY
from tests.conftest import ROOT

TABLE1 = ("108,725,885", "108,976,885", "109,775,485", "110,287,485", "108.7M", "110.2M")  # tests/test_entrypoints.py
EPOCH = [*TINY, "trainer.max_epochs=1"]  # the fault tests' toy run of one epoch: 3 updates
# this interpreter's site-packages: the fresh environment's third-party dependencies
SHARED = list(dict.fromkeys([*site.getsitepackages(), *(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))]))
NOT_COPIED = [".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".whl", ".gl", "outputs"]
NOT_COPIED += ["multirun", "logs", "wandb", "lightning_logs", "tests", "docs", "sweeps", "benchmarks", "shared"]


def _run(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "HYDRA_FULL_ERROR")}
    env.update(WANDB_MODE="disabled", PYTHONNOUSERSITE="1", SARNMT_CACHE=str(cwd / "cache"))
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def build_wheel(folder: Path) -> Path:
    """The checkout's wheel, built from a copy of it, in ``folder``."""
    given = os.environ.get("SARNMT_TEST_WHEEL")
    if given:
        return Path(given).resolve()
    source = folder / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_COPIED))
    args = [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q"]
    out = _run([*args, "-w", str(folder / "dist")], cwd=folder)
    assert out.returncode == 0, out.stderr
    (wheel,) = (folder / "dist").glob("sarnmt-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, wheel) -> Path:
    """A fresh virtual environment with the wheel installed (and this one's dependencies, see the module docstring);
    its python."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    elsewhere = venv.parent
    out = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q"]
    out = _run([*install, str(wheel)], cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=elsewhere)
    Path(purelib.stdout.strip(), "_sarnmt_test_dependencies.pth").write_text("".join(f"{p}\n" for p in SHARED))
    return python


def test_the_wheel_holds_every_config(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    packaged = {f"sarnmt/conf/{p.relative_to(config_dir()).as_posix()}" for p in config_dir().rglob("*.yaml")}
    assert len(packaged) > 50 and not packaged - names, f"missing from the wheel: {sorted(packaged - names)[:5]}"


def test_nothing_of_the_checkout_is_on_the_fresh_path(fresh, tmp_path):
    probe = (
        "import json, sys, sarnmt, hydra_plugins.sarnmt_slurm_launcher as launcher\n"
        "from sarnmt.utils.compose import config_dir\n"
        "print(json.dumps({'sarnmt': sarnmt.__file__, 'launcher': launcher.__file__, 'conf': str(config_dir()), "
        "'path': sys.path, 'prefix': sys.prefix}))"
    )
    out = _run([str(fresh), "-c", probe], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    prefix = Path(seen["prefix"]).resolve()
    assert prefix == fresh.parent.parent.resolve()
    for key in ("sarnmt", "launcher", "conf"):
        assert Path(seen[key]).resolve().is_relative_to(prefix), (key, seen[key])
    assert (Path(seen["conf"]) / "train.yaml").is_file()
    shared = {Path(p).resolve() for p in SHARED}
    in_checkout = [p for p in seen["path"] if p and Path(p).resolve().is_relative_to(ROOT)]
    assert {Path(p).resolve() for p in in_checkout} <= shared, in_checkout  # the dependencies' folders only
    assert not any((Path(p) / "sarnmt").exists() for p in in_checkout)


def _command(fresh: Path, name: str) -> list[str]:
    """``sarnmt <name>`` where the wheel has that console script, else ``python -m sarnmt.<name>``."""
    script = fresh.parent / "sarnmt"
    return [str(script), name] if script.exists() else [str(fresh), "-m", "sarnmt", name]


def test_params_prints_table1_from_the_wheel(fresh, tmp_path):
    out = _run([*_command(fresh, "params"), "model=paper", "decoder=all"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for figure in TABLE1:
        assert figure in out.stdout


def test_train_runs_one_toy_epoch_from_the_wheel(fresh, tmp_path):
    run = tmp_path / "run"
    out = _run([*_command(fresh, "train"), *EPOCH, f"hydra.run.dir={run}"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "best checkpoint:" in out.stdout and list(run.rglob("*.ckpt")), out.stdout


def test_bench_runs_from_the_wheel_without_the_checkouts_peers(fresh, tmp_path):
    """The peers live in the checkout (benchmarks/, tests/oracle.py): the packaged bench times sarnmt alone."""
    tiny = ["model=tiny", "model.emb_dim=16", "model.hidden_dim=24", "vocab=50", "batch_size=4", "repeats=1"]
    tiny += ["lengths.multi30k.src=null", "decode.single=2", "threads=1", "decoders=[baseline]", "bench_preset=full"]
    tiny += ["workloads=[multi30k]", "systems=[]", "plot=false", "train_batches=1", f"out_dir={tmp_path / 'bench'}"]
    out = _run([*_command(fresh, "bench"), *tiny], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (record,) = [json.loads(path.read_text()) for path in (tmp_path / "bench").glob("bench-*.json")]
    (row,) = record["runs"][0]["variants"]
    assert record["config"]["peers"] == {} and row["train_tok_s"] > 0
    assert not any(key.startswith(("plain_", "reference_")) for key in row)


def test_the_wheel_holds_the_table_specs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    specs = {f"sarnmt/sweep/specs/{p.relative_to(specs_dir()).as_posix()}" for p in specs_dir().rglob("*.yaml")}
    assert {"sarnmt/sweep/specs/tables/table3.yaml", "sarnmt/sweep/specs/scales/smoke.yaml"} <= specs
    assert not specs - names, f"missing from the wheel: {sorted(specs - names)[:5]}"
    assert "sarnmt/py.typed" in names


def test_version_from_the_wheel(fresh, tmp_path):
    import torch

    out = _run([*_command(fresh, "--version")], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"sarnmt {sarnmt.__version__}") and f"torch {torch.__version__}" in out.stdout


def test_reproduce_plans_a_table_from_the_wheel(fresh, tmp_path):
    """The table and scale files ship in the package: a dry run from an empty folder plans Table 3's jobs, with
    records under that folder (results_dir's default, sweeps/results/<scale>, is relative to it)."""
    out = _run([*_command(fresh, "reproduce"), "table=3", "scale=smoke", "dry_run=true"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "6 new" in out.stdout and "dry run: nothing is run" in out.stdout, out.stdout
    assert f"results_dir={tmp_path / 'sweeps' / 'results' / 'smoke'}" in out.stdout


def test_reproduce_runs_a_smoke_table_from_the_wheel_and_counts_its_records(fresh, tmp_path):
    """From the wheel in an empty folder (no git checkout: the records say so, dirty null), ``reproduce table=3
    scale=smoke`` trains its six jobs and prints Table 3 with a number in every cell; once every record is broken,
    ``tables`` exits non-zero with one line instead of printing an empty table and success."""
    out = _run([*_command(fresh, "reproduce"), "table=3", "scale=smoke"], cwd=tmp_path, timeout=1500)
    assert out.returncode == 0, out.stderr[-3000:]
    records = sorted((tmp_path / "sweeps" / "results" / "smoke" / "records").glob("*.s[0-9].json"))
    assert len(records) == 6
    assert all(json.loads(p.read_text())["dirty"] is None for p in records)
    table = (tmp_path / "sweeps" / "results" / "smoke" / "tables" / "table3.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]  # the grid's rows, its head left out
    assert rows and all(re.search(r"\| \d+\.\d", row) for row in rows), table
    assert "broken" not in table and "no runs" not in table and "Not from a git checkout: 6 runs" in table
    for path in records:
        path.write_text("{")
    args = ["table=3", "scale=smoke", "plot=false"]
    out = _run([*_command(fresh, "tables"), *args], cwd=tmp_path)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stderr.strip().startswith("error: table 3 at scale smoke: no run counts in ")
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_tables_renders_records_it_is_given_from_the_wheel(fresh, tmp_path):
    """``sarnmt tables`` on a copy of the published mini8 records, in a folder outside the checkout."""
    results = tmp_path / "given"
    shutil.copytree(ROOT / "sweeps" / "results" / "mini8" / "records", results / "records")
    args = ["table=1", "scale=mini8", f"results_dir={results}", "significance.resamples=2000", "plot=false"]
    out = _run([*_command(fresh, "tables"), *args], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Table 1" in out.stdout and (results / "tables" / "table1.md").is_file()


def test_the_wheel_s_metadata_passes_twine_check(wheel):
    """What ``make dist`` checks, on the wheel these tests install: its metadata renders (README as the long
    description) and declares the license, the classifiers and typing."""
    out = _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)], cwd=wheel.parent)
    assert out.returncode == 0 and "PASSED" in out.stdout, out.stdout + out.stderr
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode()
    assert "License-Expression: MIT" in metadata and "Classifier: Typing :: Typed" in metadata
    assert "Description-Content-Type: text/markdown" in metadata
