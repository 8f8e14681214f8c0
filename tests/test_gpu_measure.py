"""benchmarks/gpu_measure.py, the GPU measurement at paper size, dry-run on the CPU: every part timed for sarnmt now and
at an earlier commit, in one process, its record carrying repeats, spreads, now ÷ before and the imported code's
hash; the earlier commit's copy is used on a machine without its history (a GPU machine's working tree)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.peers.commit import materialize

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_measure.py"


def head(ref: str = "HEAD") -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref], capture_output=True, text=True).stdout.strip()


def test_the_dry_run_records_now_before_and_the_code(tmp_path):
    before = head("HEAD~1")
    command = [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--dry-run", "--repeats", "3", "--warmup", "1"]
    command += ["--batch", "6", "--before", before, "--cache", str(tmp_path / "cache")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((tmp_path / "measure.json").read_text())
    labels = ["beam5/now", "beam5/before", "greedy/now", "greedy/before", "train/now", "train/before"]
    assert list(record["figures"]) == [*labels, "train_captured/now", "beam5_eager/now", "greedy_eager/now"]
    for figure in record["figures"].values():
        seconds = figure["seconds"]
        assert seconds["n"] == 3 and seconds["q1"] <= seconds["median"] <= seconds["q3"] and figure["rate"] > 0
        assert figure["busy"] is None and figure["busy_how"].startswith("no GPU-busy fraction on cpu")
    assert set(record["now_over_before"]) == {"beam5", "greedy", "train"}
    assert (
        record["now_over_before"]["beam5"]
        == record["figures"]["beam5/now"]["rate"] / record["figures"]["beam5/before"]["rate"]
    )
    assert re.fullmatch(r"[0-9a-f]{16}", record["code"]["source_hash"]) and record["code"]["files"] > 50
    assert record["settings"]["before"] == before and not record["errors"] and not record["skipped"]
    assert not record["capture"]["captured"] and "a search on cpu" in record["capture"]["why"]  # the CPU's schedule
    assert [p["batch"] for p in record["beam5_by_batch"]] == [2, 4, 8]  # sentences/s against batch size
    assert all(p["asked"] == p["batch"] and p["sent_s"] > 0 for p in record["beam5_by_batch"])
    assert "now/before" in done.stdout and record["code"]["source_hash"] in done.stdout


def test_a_copied_commit_is_used_without_git(tmp_path):
    commit = head()
    name = materialize(commit, tmp_path)
    assert name == f"sarnmt_{commit[:12]}"
    assert materialize(commit, tmp_path, repo=tmp_path / "no-history") == name  # no git asked


def test_too_few_repeats_are_refused_in_the_one_form(capsys):
    """``--repeats`` below two (a spread needs two) or ``--batch`` below one: argparse's usage error (status 2), its
    line in the form of every range check (:func:`~sarnmt.errors.check_range`)."""
    from benchmarks.gpu_measure import parse

    for args, says in (
        (["--repeats", "1"], "--repeats=1: must be 2 or more"),
        (["--batch", "0"], "--batch=0: must be 1 or more"),
    ):
        with pytest.raises(SystemExit) as exit_:
            parse(["--out", "x", *args])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.strip().endswith(f"error: {says}")
