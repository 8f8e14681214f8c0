"""``make gpu-check`` (benchmarks/gpu_check.py) on the CPU: every step runs at tiny sizes and writes its record, so
that the check does not break on first contact with a GPU; a failing step is recorded and the next one runs."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
PROBE = "sarnmt_gpu_check_probe"

spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def probe_wheel(folder: Path) -> Path:
    """A pure-Python wheel of a package no environment has, to be installed by the check's first step."""
    files = {
        f"{PROBE}/__init__.py": "VALUE = 1\n",
        f"{PROBE}-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: sarnmt-gpu-check-probe\nVersion: 1.0\n",
        f"{PROBE}-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{PROBE}-1.0.dist-info/RECORD"] = "\n".join([*record, f"{PROBE}-1.0.dist-info/RECORD,,"]) + "\n"
    folder.mkdir(parents=True)
    wheel = folder / f"{PROBE}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def run_check(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path, Path]:
    results, out = tmp_path / "results", tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--results", str(results), "--out", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    (run_dir,) = results.iterdir()
    return done, run_dir, out / run_dir.name


def test_dry_run_writes_every_record(tmp_path):
    """The whole check on the CPU, a wheel to install first: every step ok, its record written and copied."""
    wheel = probe_wheel(tmp_path / "wheels")
    done, run_dir, copied = run_check(tmp_path, "--wheels", str(wheel.parent), "--train-seconds", "10")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    names = ["env", "measure", "tests", "bench-b4", "bench-b8", "train", "summary"]
    assert sorted(p.name for p in run_dir.iterdir()) == sorted([*(f"{n}.json" for n in names), "check.log"])
    assert sorted(p.name for p in copied.iterdir()) == sorted(p.name for p in run_dir.iterdir())
    records = {name: json.loads((run_dir / f"{name}.json").read_text()) for name in names}
    for name in names[:-1]:
        record = records[name]
        assert record["step"] == name and record["ok"] and record["returncode"] == 0 and not record["timed_out"]
        assert record["seconds"] > 0 and record["result"]
    env = records["env"]["result"]
    assert env["install"]["installed"] == [wheel.name] and env["install"]["verified"]
    assert env["install"]["versions"] == {"sarnmt-gpu-check-probe": "1.0"}
    assert set(env["imports"].values()) == {"ok"} and env["torch"] and env["nvidia_smi"]
    measure = records["measure"]["result"]  # the measure step's (benchmarks/gpu_measure.py; tests/test_gpu_measure.py)
    assert set(measure["figures"]) == {
        "beam5/now",
        "greedy/now",
        "train/now",
        "train_captured/now",
        "beam5_eager/now",
        "greedy_eager/now",
    }
    assert measure["settings"]["repeats"] == 2 and len(measure["code"]["source_hash"]) == 16
    tests = records["tests"]["result"]
    # under ATEN_CPU_CAPABILITY=default the compiled test skips (inductor ignores the override: tests/test_gpu.py)
    compiled_skips = int(os.environ.get("ATEN_CPU_CAPABILITY", "").lower() == "default")
    assert tests["passed"] == 5 - compiled_skips and tests["skipped"] == compiled_skips
    assert tests["failed"] == tests["errors"] == 0
    for size in (4, 8):
        figures = records[f"bench-b{size}"]["result"]["figures"]
        assert figures["batch_size"] == size and figures["precision"] == "fp32"
        baseline = figures["baseline"]
        assert baseline["train_tok_s"] > 0 and baseline["train_gflop_s"] > 0 and baseline["beam5_sent_s"] > 0
        assert records[f"bench-b{size}"]["result"]["bench"]["config"]["batch_size"] == size
    train = records["train"]["result"]
    assert train["steps"] > 0 and train["steady_target_tok_s"] > 0 and train["validations"]
    assert train["result"]["test_bleu"] is not None and train["overrides"][0] == "trainer.max_time=00:00:00:10"
    summary = records["summary"]
    assert summary["ok"] and summary["finished"] and summary["dry_run"] and set(summary["steps"]) == set(names[:-1])
    assert set(summary["figures"]) == {"measure", "tests", "bench-b4", "bench-b8", "train"}
    assert summary["figures"]["measure"]["source_hash"] == measure["code"]["source_hash"]
    log = (run_dir / "check.log").read_text()
    assert "gpu-check: every step ok" in log and "install: verified" in log


def test_a_failing_step_is_recorded_and_the_next_one_runs(tmp_path):
    done, run_dir, copied = run_check(
        tmp_path, "--wheels", "", "--steps", "bench,env", "--decoders", "nosuch", "--batch-sizes", "4"
    )
    assert done.returncode == 1
    failed = json.loads((run_dir / "bench-b4.json").read_text())
    assert not failed["ok"] and failed["returncode"] == 2 and "unknown decoders ['nosuch']" in failed["output_tail"]
    assert "result" not in failed and "read_error" in failed
    assert json.loads((run_dir / "env.json").read_text())["ok"]  # it ran after the failure
    summary = json.loads((copied / "summary.json").read_text())
    assert not summary["ok"] and not summary["steps"]["bench-b4"]["ok"] and summary["steps"]["env"]["ok"]
    assert "FAILED: bench-b4 in" in (run_dir / "check.log").read_text()


def test_steps_past_the_budget_are_skipped(tmp_path):
    done, run_dir, _ = run_check(tmp_path, "--wheels", "", "--budget", "5")
    assert done.returncode == 1
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["steps"]) == {"env", "measure", "tests", "bench-b4", "bench-b8", "train"}
    assert not any(step["ok"] for step in summary["steps"].values())
    assert json.loads((run_dir / "train.json").read_text())["skipped"]


def test_a_step_over_its_limit_is_stopped(tmp_path):
    args = gpu_check.parse(["--dry-run"])
    args.dry_run, args.site_dir = False, None  # the per-step limit holds outside the dry run
    check = gpu_check.Check(args, tmp_path, None)
    record = check.run("slow", [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], 3)
    assert record["timed_out"] and not record["ok"] and record["returncode"] == -15 and record["seconds"] < 30
    assert "started" in record["output_tail"] and "slow: over its limit of 3 s" in "\n".join(check.lines)
    shutil.rmtree(check.scratch)


def test_targets_and_helpers():
    assert gpu_check.dist_name(Path("hydra_core-1.3.8-py3-none-any.whl")) == "hydra-core"
    assert gpu_check.dist_name(Path("PyYAML-6.0.4-cp312-cp312-manylinux_2_17_x86_64.whl")) == "pyyaml"
    assert gpu_check.peak_for("NVIDIA H100 80GB HBM3") == 989_000
    assert gpu_check.peak_for("NVIDIA H100 PCIe") == 756_000 and gpu_check.peak_for("a CPU") is None
    bench = {"result": {"figures": {"baseline": {"train_tok_s": 40_000.0, "beam5_sent_s": 1_200.0}}}}
    slow = {"result": {"figures": {"baseline": {"train_tok_s": 30_000.0, "beam5_sent_s": 500.0}}}}
    met = gpu_check.targets_met({"bench-b64": slow, "bench-b256": bench}, [64, 256])
    assert met["train_tok_s"] == {"value": 40_000.0, "target": 50_000, "met": False}
    assert met["beam5_sent_s_b256"] == {"value": 1_200.0, "target": 1_000, "met": True}
    assert gpu_check.tree_bytes() > 0


def test_junit_summary_keeps_each_failure(tmp_path):
    xml = tmp_path / "t.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest" tests="3">'
        '<testcase name="test_a" time="1.5"/>'
        '<testcase name="test_b" time="0.2"><failure message="assert 1 == 2">long traceback</failure></testcase>'
        '<testcase name="test_c" time="0"><skipped message="needs a CUDA device"/></testcase>'
        "</testsuite></testsuites>"
    )
    summary = gpu_check.junit_summary(xml)
    assert (summary["passed"], summary["failed"], summary["skipped"], summary["errors"]) == (1, 1, 1, 0)
    assert summary["tests"][1] == {
        "name": "test_b",
        "outcome": "failed",
        "seconds": 0.2,
        "message": "assert 1 == 2",
        "detail": "long traceback",
    }
    assert summary["tests"][2]["message"] == "needs a CUDA device" and "detail" not in summary["tests"][2]


def test_issue_40_targets_read_the_measure_step():
    figure = {"rate": 2500.0, "busy": 0.8}
    measured = {"figures": {"beam5/now": figure, "greedy/now": {"rate": 6000.0, "busy": 0.5}}}
    measured["figures"] |= {
        "train/now": {"rate": 90_000.0, "busy": 0.9},
        "train_captured/now": {"rate": 2e5, "busy": 0.75},
    }
    met = gpu_check.measure_targets(measured)
    assert met["issue40_beam5"] == {"value": 2500.0, "target": 2000, "busy": 0.8, "met": True}
    assert not met["issue40_greedy"]["met"]  # fast enough, but the GPU was busy half the time
    assert met["issue40_train"]["value"] == 2e5 and met["issue40_train"]["met"]  # the captured step, the faster
    assert gpu_check.measure_targets(None) == {}
