"""``launcher=slurm`` without a cluster: the profiles and their plain overrides, the job script they make, the
trainer that follows the allocation, no ``sbatch`` at all, and the run-folder lock that lets two sweeps of one table
run at once. The real cluster's scenarios are ``tests/test_slurm.py``."""

from __future__ import annotations

import io
import json
import os
import socket
from contextlib import ExitStack
from pathlib import Path

import pytest
import torch

from sarnmt.cli.reproduce import reproduce
from sarnmt.sweep.folders import FolderInUse, clear_stale_run_lock, job_lock, lock_holder
from sarnmt.sweep.launch import SweepError
from sarnmt.utils import allocation
from sarnmt.utils.compose import compose
from tests.test_sweep import reproduce_cfg

sweep_slurm = pytest.importorskip("sarnmt.sweep.slurm", reason="no hydra-submitit-launcher (pip install -e '.[slurm]')")
CELLS = [f"en_de.{r}.s{s}" for s in (1, 2) for r in ("baseline", "mean_residual", "self_attentive_content")]


def _dry(tmp: Path, *overrides: str) -> dict:
    return reproduce(reproduce_cfg(tmp, "table=3", "launcher=slurm", "dry_run=true", *overrides), out=io.StringIO())


def srun_on_path(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in ``srun`` on PATH: submitit's executor refuses to exist without one, though writing a job script
    never runs it (a machine without SLURM renders the script as a cluster's login node would)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\necho 'not a cluster: the test only renders job scripts' >&2\nexit 1\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


def test_cpu_profile_takes_plain_overrides_and_writes_setup_lines_without_nested_quoting(tmp_path, monkeypatch):
    srun_on_path(tmp_path, monkeypatch)
    setup = tmp_path / "site setup.sh"
    setup.write_text("module load python\nexport DATA=${HOME}/corpora\n")
    result = _dry(
        tmp_path,
        "slurm.profile=cpu",
        "slurm.partition=debug",
        "slurm.account=nmt-2026",
        "slurm.qos=low",
        "slurm.time_min=90",
        "slurm.cpus_per_task=2",
        "slurm.mem_gb=3",
        f"slurm.setup_file={setup}",
        "slurm.setup=['export A=${HOME}/a, b']",
    )
    launcher = result["launcher"]
    assert launcher["_target_"] == "hydra_plugins.sarnmt_slurm_launcher.SweepSlurmLauncher"
    assert launcher["gpus_per_node"] is None and launcher["tasks_per_node"] == 1  # not derived from GPUs
    assert (launcher["partition"], launcher["account"], launcher["qos"]) == ("debug", "nmt-2026", "low")
    assert (launcher["timeout_min"], launcher["cpus_per_task"], launcher["mem_gb"]) == (90, 2, 3)
    assert launcher["setup"] == ["export A=${HOME}/a, b", f"source '{setup}'"]  # ${HOME} left to the shell
    executor = sweep_slurm.make_executor({**launcher, "submitit_folder": str(tmp_path / "submitit")})
    executor.update_parameters(name=sweep_slurm.cell_of(["scale=smoke", "job=en_de.baseline.s1"]))
    script = executor._executor._make_submission_file_text("python -u -m submitit.core._submit x", "u")
    for line in (
        "#SBATCH --job-name=en_de.baseline.s1",
        "#SBATCH --partition=debug",
        "#SBATCH --account=nmt-2026",
        "#SBATCH --qos=low",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --mem=3GB",
        "#SBATCH --time=90",
        "#SBATCH --signal=USR2@120",
    ):
        assert line in script.splitlines(), line
    assert "gpus" not in script
    assert script.index(sweep_slurm.THREADS) < script.index("export A=${HOME}/a, b") < script.index(f"source '{setup}'")
    assert script.index(f"source '{setup}'") < script.index("srun")


def test_gpu_profile_is_one_task_per_gpu_and_refuses_zero_gpus(tmp_path):
    launcher = _dry(tmp_path, "slurm.gpus_per_node=4", "slurm.partition=gpu", "slurm.max_requeues=5")["launcher"]
    assert (launcher["gpus_per_node"], launcher["tasks_per_node"], launcher["max_num_timeout"]) == (4, 4, 5)
    with pytest.raises(SweepError, match=r"slurm.gpus_per_node=0 with slurm.profile=gpu .* use slurm.profile=cpu"):
        _dry(tmp_path, "slurm.gpus_per_node=0")
    with pytest.raises(SweepError, match=r"unknown slurm.profile 'tpu'; valid profiles: \['gpu', 'cpu'\]"):
        _dry(tmp_path, "slurm.profile=tpu")


def test_launcher_slurm_without_sbatch_says_so_in_one_line_before_any_job(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    cfg = reproduce_cfg(tmp_path, "table=3", "launcher=slurm", "slurm.profile=cpu")
    with pytest.raises(sweep_slurm.SlurmUnavailable, match=r"^launcher=slurm: sbatch was not found on PATH") as err:
        reproduce(cfg, out=io.StringIO())
    assert "\n" not in str(err.value) and "scripts/slurm-cluster.sh up" in str(err.value)
    assert not (tmp_path / "runs").exists()


def test_trainer_slurm_follows_the_allocation(monkeypatch):
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    trainer = compose("train", ["trainer=slurm"]).trainer
    assert (trainer.accelerator, trainer.precision, trainer.strategy) == ("cpu", "32-true", "ddp")  # a CPU partition
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    trainer = compose("train", ["trainer=slurm"]).trainer
    assert (trainer.accelerator, trainer.precision) == ("gpu", "bf16-mixed")  # given GPUs: GPUs and bf16
    allocation.set_thread_count()
    assert os.environ["OMP_NUM_THREADS"] == "3"  # the task's CPUs, before torch starts (sarnmt/__init__.py)
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    allocation.set_thread_count()
    assert os.environ["OMP_NUM_THREADS"] == "5"  # set by the user: kept


def test_two_sweeps_at_once_one_runs_each_job_the_other_reports_the_cells_it_skipped(tmp_path):
    """While another process holds the jobs' locks (here this one, as a first sweep would), a second sweep of the
    same table runs none of them, reports each skipped cell with the holder, and writes no record."""
    runs = tmp_path / "runs"
    with ExitStack() as held:
        for cell in CELLS:
            held.enter_context(job_lock(runs, cell))
        assert f"PID {os.getpid()}" in lock_holder(runs, "en_de.baseline.s1")
        with pytest.raises(FolderInUse, match=rf"en_de.baseline.s1 is being run by PID {os.getpid()} on host"):
            with job_lock(runs, "en_de.baseline.s1", attempts=1):
                pass
        out = io.StringIO()
        result = reproduce(reproduce_cfg(tmp_path, "table=3", "render=false"), out=out)
    assert result["returncode"] == 0 and sorted(result["skipped"]) == sorted(CELLS)
    assert f"skipped en_de.baseline.s1: being run by PID {os.getpid()} on host" in out.getvalue()
    assert "jobs without a record" not in out.getvalue()
    assert not list((tmp_path / "results").rglob("*.json"))
    assert lock_holder(runs, "en_de.baseline.s1") is None  # released with the process's hold


def test_a_training_lock_left_on_a_lost_node_is_cleared_under_the_cells_lock(tmp_path):
    """A job whose node was lost leaves the run folder's training lock (sarnmt/training/run_lock.py), which cannot be
    checked from another host; the next sweep's job, holding the cell's lock, removes it and resumes."""
    folder = tmp_path / "runs" / "en_de.baseline.s1"
    folder.mkdir(parents=True)
    (folder / ".lock").write_text(json.dumps({"pid": 7, "host": "node-lost", "slurm_job": "41"}))
    with job_lock(tmp_path / "runs", "en_de.baseline.s1") as exclusive:
        assert exclusive
        clear_stale_run_lock(folder)
    assert not (folder / ".lock").exists()
    (folder / ".lock").write_text(json.dumps({"pid": 7, "host": socket.gethostname()}))
    clear_stale_run_lock(folder)
    assert (folder / ".lock").exists()  # this host's: sarnmt.training.run_lock checks it itself
