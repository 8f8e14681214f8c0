"""Records pin the code that made them (sarnmt/sweep/code.py): the commit, whether the checkout was clean, a hash of
the package's source; a sweep job refuses a dirty checkout unless allow_dirty=true, and a run folder started by other
code is not resumed."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from sarnmt.errors import UserError
from sarnmt.sweep import code as code_module
from sarnmt.sweep.code import CodeError, check_clean, check_resume, git_state, source_hash
from sarnmt.sweep.folders import claim_folder, folder_code, take_folder
from sarnmt.sweep.job import JobSettings, run_job
from sarnmt.sweep.plan import job_from_id
from sarnmt.sweep.spec import load_scale
from sarnmt.utils.compose import config_dir


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True
    )


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "sarnmt").mkdir(parents=True)
    (root / "sarnmt" / "model.py").write_text("x = 1\n")
    (root / "sweeps" / "results").mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_git_state_sees_code_changes_but_not_results(repo):
    clean = git_state(repo)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False
    (repo / "sweeps" / "results" / "en_de.baseline.s1.json").write_text("{}")  # a job's own output
    assert git_state(repo)["dirty"] is False
    (repo / "sarnmt" / "new_variant.py").write_text("y = 2\n")  # untracked code counts
    assert git_state(repo)["dirty"] is True
    (repo / "sarnmt" / "new_variant.py").unlink()
    (repo / "sarnmt" / "model.py").write_text("x = 2\n")
    assert git_state(repo) == {"commit": clean["commit"], "dirty": True}


def test_git_state_outside_a_checkout_is_unknown(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "dirty": None}


def test_source_hash_follows_the_source_and_ignores_caches(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "a.py").write_text("a = 1\n")
    first = source_hash((pkg,))
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0\1")
    (pkg / "notes.txt").write_text("not source")
    assert source_hash((pkg,)) == first
    (pkg / "a.py").write_text("a = 2\n")
    assert source_hash((pkg,)) != first
    assert len(first) == 16 and source_hash() == source_hash()  # the package's own: deterministic


def test_a_dirty_checkout_is_refused_unless_allowed():
    dirty = {"commit": "c" * 40, "dirty": True, "source_hash": "s"}
    with pytest.raises(CodeError, match=r"job en_de.baseline.s1: .*uncommitted changes.*allow_dirty=true") as err:
        check_clean(dirty, allow_dirty=False, job_id="en_de.baseline.s1")
    assert isinstance(err.value, UserError)
    check_clean(dirty, allow_dirty=True, job_id="en_de.baseline.s1")
    check_clean({**dirty, "dirty": False}, allow_dirty=False, job_id="x")
    check_clean({**dirty, "dirty": None}, allow_dirty=False, job_id="x")  # not a checkout: the source hash pins it


def test_run_job_refuses_a_dirty_checkout_before_touching_the_run_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "sarnmt.sweep.job.code_identity", lambda: {"commit": "c" * 40, "dirty": True, "source_hash": "s"}
    )
    job = job_from_id(load_scale("smoke"), "en_de.baseline.s1")
    settings = JobSettings(tmp_path / "runs", tmp_path / "results", progress=False)
    with pytest.raises(CodeError, match="uncommitted changes"):
        run_job(job, settings)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


def test_a_run_folder_remembers_its_code_and_refuses_other_code(tmp_path):
    folder = tmp_path / "en_de.baseline.s1"
    first = {"commit": "a" * 40, "dirty": False, "source_hash": "1111", "allow_dirty": False}
    claim_folder(folder, "en_de.baseline.s1", "hash", first)
    assert folder_code(folder) == first
    claim_folder(folder, "en_de.baseline.s1", "hash", dict(first))  # same code: resumes
    other = {**first, "commit": "b" * 40, "source_hash": "2222"}
    with pytest.raises(CodeError, match=r"started by commit aaaaaaaaaa, source 1111; this checkout is commit bbbb"):
        claim_folder(folder, "en_de.baseline.s1", "hash", other)
    assert json.loads((folder / "job.json").read_text())["code"] == first  # untouched


def test_every_ddp_rank_refuses_a_folder_started_by_other_code(tmp_path, monkeypatch):
    """A requeued DDP job on changed code: rank 0 refuses; rank 1 must refuse too, not wait in the rendezvous for a
    rank 0 that has exited (seen under SLURM: the job hung until its time limit)."""
    folder = tmp_path / "en_de.baseline.s1"
    first = {"commit": "a" * 40, "dirty": False, "source_hash": "1111", "allow_dirty": False}
    claim_folder(folder, "en_de.baseline.s1", "hash", first)
    monkeypatch.setenv("SLURM_PROCID", "1")
    take_folder(folder, "en_de.baseline.s1", "hash", dict(first), timeout=1.0)  # same code: goes on
    with pytest.raises(CodeError, match="started by commit aaaaaaaaaa"):
        take_folder(folder, "en_de.baseline.s1", "hash", {**first, "source_hash": "2222"}, timeout=1.0)


def test_a_folder_from_before_pinning_is_resumed():
    check_resume(None, {"source_hash": "x"}, Path("/runs/job"))


def test_code_paths_cover_the_package_and_configs():
    assert {"sarnmt", "pyproject.toml"} <= set(code_module.CODE_PATHS)
    assert "conf" not in code_module.CODE_PATHS  # the configs ship inside the package: sarnmt/conf
    assert config_dir().is_relative_to(code_module.PACKAGE_DIR)  # so the package's source hash covers them too


def test_a_job_run_again_for_other_code_moves_the_folder_other_code_started_aside(tmp_path):
    """The record came from other code, so the job runs again: the run folder that code started is set aside (never
    resumed, never deleted); one this code started is resumed; one from before pinning cannot be shown to be this
    code and is set aside too."""
    folder = tmp_path / "en_de.baseline.s1"
    first = {"commit": "a" * 40, "dirty": False, "source_hash": "1111", "allow_dirty": False}
    now = {**first, "commit": "b" * 40, "source_hash": "2222"}
    claim_folder(folder, "en_de.baseline.s1", "hash", first)
    (folder / "fit.json").write_text("{}")
    claim_folder(folder, "en_de.baseline.s1", "hash", now, replace_other_code=True)
    aside = tmp_path / "en_de.baseline.s1.other-code-1111"
    assert folder_code(aside) == first and (aside / "fit.json").is_file()
    assert folder_code(folder) == now and not (folder / "fit.json").exists()
    (folder / "fit.json").write_text("{}")
    claim_folder(folder, "en_de.baseline.s1", "hash", dict(now), replace_other_code=True)  # this code's: kept
    assert (folder / "fit.json").is_file()
    legacy = tmp_path / "en_de.baseline.s2"
    legacy.mkdir()
    (legacy / "job.json").write_text(json.dumps({"job": "en_de.baseline.s2", "config_hash": "hash"}))
    take_folder(legacy, "en_de.baseline.s2", "hash", now, replace_other_code=True)
    assert (tmp_path / "en_de.baseline.s2.other-code-unpinned" / "job.json").is_file()
    assert folder_code(legacy) == now


def test_other_ranks_wait_for_the_folder_of_this_code_when_rank_0_replaces_one(tmp_path, monkeypatch):
    """Rank 0 moves the other code's folder aside and claims a new one; a rank that saw the old folder first (same
    config hash) must wait for the new one, not refuse the old one and leave rank 0 alone in the rendezvous."""
    folder = tmp_path / "en_de.baseline.s1"
    first = {"commit": "a" * 40, "dirty": False, "source_hash": "1111", "allow_dirty": False}
    now = {**first, "commit": "b" * 40, "source_hash": "2222"}
    claim_folder(folder, "en_de.baseline.s1", "hash", first)
    monkeypatch.setenv("SLURM_PROCID", "1")
    with pytest.raises(TimeoutError, match="rank 0 did not claim"):  # waits; never takes the old folder for its own
        take_folder(folder, "en_de.baseline.s1", "hash", now, timeout=0.5, replace_other_code=True)
    errors: list[Exception] = []

    def rank1_takes() -> None:
        try:
            take_folder(folder, "en_de.baseline.s1", "hash", now, timeout=30.0, replace_other_code=True)
        except Exception as err:  # noqa: BLE001 - reported by the assertion below
            errors.append(err)

    rank1 = threading.Thread(target=rank1_takes, daemon=True)
    rank1.start()
    time.sleep(0.5)
    claim_folder(folder, "en_de.baseline.s1", "hash", now, replace_other_code=True)  # what rank 0 does
    rank1.join(timeout=30)
    assert not rank1.is_alive() and errors == [] and folder_code(folder) == now
