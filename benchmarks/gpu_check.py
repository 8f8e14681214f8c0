"""``make gpu-check``: what sarnmt does on one GPU, in about nine minutes, written as JSON records.

    python3 benchmarks/gpu_check.py [--wheels .whl] [--out DIR] [--budget 540] [--train-seconds 90] [--dry-run]
                                    [--before HASH] [--before-cache DIR] [--steps env,measure,tests,bench,train]
    python3 benchmarks/gpu_check.py wheels [--dir .whl] [--python-version 3.12] [--platform TAG ...] [NAME ...]

The check runs these steps, each in its own process with its own time limit, inside one budget for the whole check
(``--budget``, 540 s: a step that would start with less than 15 s left is skipped). Each step writes its record as
soon as it ends; a step that fails is recorded (exit status, the tail of its output) and the next one runs; the
check exits with status 1 at the end if any step failed.

- ``env``: ``nvidia-smi``, the device, Python, torch, CUDA, cuDNN, Triton and the packages' versions, which of
  sarnmt's imports work, the rate of a large bf16 matrix product, and which wheels were installed first (below);
- ``measure`` (at most 240 s): ``benchmarks/gpu_measure.py``: at paper size, bf16, batch 256,
  beam-5 and greedy sentences/s and training target tokens/s (eager, and with the captured step), each the median of
  20 CUDA-event repeats after warm-up with its quartiles, the GPU-busy fraction from the profiler, the same parts at
  ``--before`` (a full commit hash whose package ``make gpu-prepare BEFORE=<ref>`` copied into ``--before-cache``,
  carried to the GPU machine) in the same process and now ÷ before, and the hash of the imported code;
- ``tests``: the tests marked ``gpu`` (``tests/test_gpu.py``: fused kernels = plain ones on the GPU, the GPU = the
  CPU, bf16 autocast trains and decodes, the fused Adadelta's Triton kernel = PyTorch's Adadelta);
- ``bench-b64`` and ``bench-b256``: ``python -m sarnmt bench model=paper vocab=50000 device=cuda precision=bf16``
  for the baseline decoder at WMT lengths (synthetic, 5-50 tokens, mean 21), batches of 64 and of 256 sentences:
  training target tokens/s, matrix-product GFLOP/s and their share of the GPU's dense bf16 peak (MFU; the peak by
  the GPU's name, or ``--peak-gflop-s``), greedy and beam-5 sentences/s batched and one sentence at a time, peak
  memory;
- ``train``: ``sarnmt.train``'s main job (the toy corpus) with ``trainer=gpu`` (bf16-mixed), at most
  ``--train-seconds`` (90) of training or until early stopping: target tokens/s, steps, dev BLEU after each epoch,
  test BLEU, peak memory.

Records: ``sweeps/results/gpu/<date>-<time>-<gpu>/`` (``env.json``, ``measure.json``, ``tests.json``,
``bench-b64.json``, ``bench-b256.json``, ``train.json``, ``summary.json``: the headline figures and the targets,
``check.log``: what was printed), each copied to ``--out`` (default ``$OUT`` when set) as soon as it is written, so
that a check cut short still leaves what it measured.

GPU machines are often air-gapped and lack sarnmt's dependencies: the ``wheels`` command, run on a networked machine
(``make gpu-wheels``), puts into ``.whl/`` the wheels of what a GPU node's PyTorch environment may lack
(``hydra-core``, ``omegaconf``, ``antlr4-python3-runtime``, ``sacremoses`` and their dependencies; the versions
installed here; pure-Python wheels built where PyPI has only a source archive) for a given Python version and
platform, and checks that the folder and the working tree together stay under a size limit (64 MiB). The check
installs those whose distributions the running Python lacks with ``pip install --no-index --no-deps --target`` into
a fresh folder put on ``PYTHONPATH``; nothing else is installed, and sarnmt runs from the checkout.

``--dry-run`` runs every step on the CPU at tiny sizes (``tests/test_gpu_check.py`` does, in the test suite), records
in ``outputs/gpu-check/``: the gpu tests' bodies on the CPU (``SARNMT_GPU_TEST_DEVICE=cpu``, one case of each), the
bench with a shrunk ``model=tiny``, batches of 4 and 8, fp32, and a few seconds of training on a slice of the toy
corpus. This file uses only the standard library (it runs before anything is installed);
``benchmarks/gpu_steps.py`` holds the steps that need torch.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STEPS_SCRIPT = ROOT / "benchmarks" / "gpu_steps.py"
MEASURE_SCRIPT = ROOT / "benchmarks" / "gpu_measure.py"
# what the check imports that a GPU node's PyTorch environment may lack: Hydra, OmegaConf and its parser, sacremoses
# (imported by sarnmt.training.run), and their dependencies, which such environments usually have (installed only where
# missing). sarnmt's other dependencies are imported only by commands the check does not run (jieba for Chinese,
# wandb for its logger, the Hydra launchers for sweeps).
WHEELS = ["hydra-core", "omegaconf", "antlr4-python3-runtime", "sacremoses"]
WHEELS += ["packaging", "PyYAML", "joblib", "cloudpickle", "regex", "tqdm", "click"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
LIMIT_MIB = 64  # what travels to the GPU machine: the working tree and the wheel folder together
# the bench steps' targets on one H100, model=paper, bf16
TARGETS = {"train_tok_s": 50_000, "beam5_sent_s_b256": 1_000}
# the targets of the measure step (one H100, paper size, bf16, batch 256; the busy fraction in each part)
MEASURE_TARGETS = {"beam5": 2_000, "greedy": 5_000, "train": 150_000, "busy": 0.7}
# dense bf16 peak GFLOP/s by the device's name (the first match); MFU = the bench's matrix-product rate / this
PEAKS = [("H100 PCIe", 756_000), ("H100 NVL", 835_000), ("H100", 989_000), ("H200", 989_000), ("GH200", 989_000)]
PEAKS += [("A100", 312_000), ("L40S", 362_000), ("A10", 125_000), ("L4", 121_000)]
TAIL = 4000  # characters of a failed step's output kept in its record


def log(message: str, sink: list[str]) -> None:
    line = f"[{time.strftime('%H:%M:%S')}] {message}"
    print(line, flush=True)
    sink.append(line)


def tail(text: str, chars: int = TAIL) -> str:
    return text[-chars:]


# ---------------------------------------------------------------------------------------------------- the wheels


def dist_name(wheel: Path) -> str:
    """The normalised distribution name of a wheel file (PEP 427 / 503): ``hydra_core-1.3.8-...`` → ``hydra-core``."""
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def installed(name: str) -> str | None:
    """The version of distribution ``name`` the running Python sees, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def install_wheels(wheel_dir: Path, site: Path, lines: list[str]) -> dict[str, Any]:
    """Install from ``wheel_dir`` the wheels whose distributions the running Python lacks, into ``site``.

    With pip (``--no-index --no-deps --target``); without pip, a pure-Python wheel is a zip of what goes into
    site-packages, so it is unpacked there. Each installed distribution is then looked up in a fresh interpreter
    with ``site`` on its path.
    :returns: the record: what was present, installed, verified, and any error."""
    record: dict[str, Any] = {"wheel_dir": str(wheel_dir), "site": str(site), "present": {}, "installed": []}
    wheels = sorted(wheel_dir.glob("*.whl")) if wheel_dir.is_dir() else []
    if not wheels:
        record["note"] = f"no wheels in {wheel_dir}"
        log(f"install: no wheels in {wheel_dir}; nothing installed", lines)
        return record
    missing = []
    for wheel in wheels:
        version = installed(dist_name(wheel))
        if version is None:
            missing.append(wheel)
        else:
            record["present"][dist_name(wheel)] = version
    if not missing:
        log(f"install: every wheel's package is already importable ({', '.join(record['present'])})", lines)
        return record
    site.mkdir(parents=True, exist_ok=True)
    names = [w.name for w in missing]
    log(f"install: {', '.join(names)} -> {site}", lines)
    done = pip_install(missing, site)
    record["pip"] = done
    if done["returncode"] != 0:  # one at a time, so that one wheel that does not fit leaves the others installed
        log("install: pip failed on the whole set; one wheel at a time", lines)
        record["pip_each"] = {wheel.name: pip_install([wheel], site) for wheel in missing}
        failed = [name for name, each in record["pip_each"].items() if each["returncode"] != 0]
        if failed and any("No module named pip" in each["output"] for each in record["pip_each"].values()):
            # no pip: a pure-Python wheel is a zip of what goes into site-packages
            for wheel in missing:
                if pure_wheel(wheel):
                    with zipfile.ZipFile(wheel) as archive:
                        archive.extractall(site)
            failed = [w.name for w in missing if not pure_wheel(w)]
            record["unpacked"] = [w.name for w in missing if pure_wheel(w)]
        record["failed"] = failed
        missing = [w for w in missing if w.name not in failed]
        names = [w.name for w in missing]
        log(f"install: {'failed: ' + ', '.join(failed) if failed else 'every wheel installed'}", lines)
    record["installed"] = names
    probe = "import importlib.metadata as m, sys; print(*(m.version(n) for n in sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", probe, *map(dist_name, missing)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": python_path(site)},
    )
    record["verified"] = done.returncode == 0
    record["versions"] = dict(zip(map(dist_name, missing), done.stdout.split(), strict=False))
    if done.returncode:
        record["error"] = tail(done.stderr)
    log(f"install: {'verified' if record['verified'] else 'NOT found after installing'} {record['versions']}", lines)
    return record


def pip_install(wheels: list[Path], site: Path) -> dict[str, Any]:
    """``pip install --no-index --no-deps --target site wheels``: its exit status and output."""
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir"]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_ROOT_USER_ACTION": "ignore"}
    try:
        done = subprocess.run(
            [*pip, "--upgrade", "--target", str(site), *map(str, wheels)],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        return {"returncode": done.returncode, "output": tail(done.stdout + done.stderr)}
    except (OSError, subprocess.TimeoutExpired) as err:
        return {"returncode": -1, "output": f"{type(err).__name__}: {err}"}


def python_path(site: Path | None) -> str:
    parts = [str(site)] if site else []
    parts.append(str(ROOT))
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


def tree_bytes() -> int:
    """Bytes of what travels with the working tree: tracked files and untracked ones git does not ignore."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    paths = {ROOT / p for p in done.stdout.decode().split("\0") if p}
    return sum(p.stat().st_size for p in paths if p.is_file())


def pure_wheel(wheel: Path) -> bool:
    return wheel.name.endswith("-none-any.whl")


def make_wheels(args: argparse.Namespace) -> int:
    """The ``wheels`` command (module docstring). :returns: the exit status."""
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    platforms = [flag for tag in args.platform for flag in ("--platform", tag)]
    for name in args.names:
        version = installed(name)
        if version is None:
            print(f"wheels: {name} is not installed here: install sarnmt first (make install)", file=sys.stderr)
            return 1
        spec = f"{name}=={version}"
        pip = [sys.executable, "-m", "pip"]
        download = [*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "--implementation", "cp"]
        download += ["--python-version", args.python_version, *platforms, "-d", str(out), spec]
        print(f"wheels: {spec}", flush=True)
        if subprocess.run(download).returncode != 0:
            print(f"wheels: no wheel of {spec} on the index for Python {args.python_version}: building one", flush=True)
            before = set(out.glob("*.whl"))
            if subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(out), spec]).returncode != 0:
                print(f"wheels: building {spec} failed", file=sys.stderr)
                return 1
            built = [w for w in set(out.glob("*.whl")) - before if dist_name(w) == re.sub(r"[-_.]+", "-", name)]
            impure = [w.name for w in built if not pure_wheel(w)]
            if impure:
                print(f"wheels: {impure} is not pure Python: it will not install elsewhere", file=sys.stderr)
                return 1
    wheels = sorted(out.glob("*.whl"))
    wheel_bytes = sum(w.stat().st_size for w in wheels)
    tree = tree_bytes()
    total = (wheel_bytes + tree) / 2**20
    for wheel in wheels:
        print(f"  {wheel.stat().st_size / 2**20:7.2f} MiB  {wheel.name}")
    print(
        f"wheels: {out}/ {wheel_bytes / 2**20:.2f} MiB + working tree {tree / 2**20:.2f} MiB = {total:.2f} MiB "
        f"(limit {args.limit_mib} MiB)"
    )
    if total > args.limit_mib:
        print(f"wheels: over the limit of {args.limit_mib} MiB", file=sys.stderr)
        return 1
    return 0


# ----------------------------------------------------------------------------------------------------- the steps


class Check:
    """The steps of one check, their records and the log; every record is copied to ``out`` when it is written."""

    def __init__(self, args: argparse.Namespace, run_dir: Path, out: Path | None) -> None:
        self.args = args
        self.run_dir = run_dir
        self.out = out
        self.lines: list[str] = []
        self.records: dict[str, dict[str, Any]] = {}
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": python_path(args.site_dir),
            "WANDB_MODE": "disabled",
            "TQDM_DISABLE": "1",
            "HYDRA_FULL_ERROR": "1",
        }
        if args.dry_run:  # tiny models: one thread is faster, and kinder to a shared machine
            self.env["OMP_NUM_THREADS"] = "1"
        self.scratch = Path(tempfile.mkdtemp(prefix="sarnmt-gpu-check-"))
        self.deadline = time.time() + args.budget

    def say(self, message: str) -> None:
        log(message, self.lines)

    def save(self, name: str, record: dict[str, Any]) -> None:
        self.records[name] = record
        self.write(f"{name}.json", json.dumps(record, indent=1, default=str) + "\n")

    def write(self, filename: str, text: str) -> None:
        (self.run_dir / filename).write_text(text)
        if self.out is not None:
            target = self.out / self.run_dir.name
            target.mkdir(parents=True, exist_ok=True)
            (target / filename).write_text(text)

    def flush_log(self) -> None:
        self.write("check.log", "\n".join(self.lines) + "\n")

    def remaining(self) -> float:
        """Seconds left of the check's budget (``--budget``)."""
        return self.deadline - time.time()

    def run(self, name: str, command: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
        """Run one step's command in its own session, its output echoed and kept, killed after ``timeout`` s or when
        the check's budget runs out, whichever comes first; not started with less than 15 s of the budget left."""
        if self.remaining() < 15:
            self.say(f"{name}: SKIPPED: {self.remaining():.0f} s left of the check's budget")
            return {"step": name, "ok": False, "skipped": "the check's budget (--budget) was spent", "seconds": 0}
        # the dry run's steps share its budget alone: a shared CPU can be many times slower than usual
        timeout = self.remaining() if self.args.dry_run else min(timeout, self.remaining())
        self.say(f"{name}: start (limit {timeout:.0f} s): {' '.join(command)}")
        start = time.time()
        output: list[str] = []
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env or self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )

        def pump() -> None:
            for line in proc.stdout:
                line = line.rstrip("\n").split("\r")[-1]
                output.append(line)
                print(f"  {name} | {line}", flush=True)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        timed_out = False
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.say(f"{name}: over its limit of {timeout:.0f} s: stopping it")
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                returncode = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                returncode = proc.wait()
        except BaseException:  # the check itself stopped (Ctrl-C, SIGTERM): its step goes with it
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        reader.join(timeout=10)
        seconds = time.time() - start
        text = "\n".join(output)
        self.lines.extend(f"  {name} | {line}" for line in output[-200:])
        record = {
            "step": name,
            "ok": returncode == 0 and not timed_out,
            "returncode": returncode,
            "timed_out": timed_out,
            "seconds": round(seconds, 1),
            "limit_s": timeout,
            "command": command,
            "output_tail": tail(text, TAIL if returncode or timed_out else 1500),
        }
        self.say(f"{name}: {'ok' if record['ok'] else 'FAILED'} in {seconds:.1f} s (exit status {returncode})")
        return record

    def step(self, name: str, command: list[str], timeout: float, read, env: dict[str, str] | None = None) -> None:
        """One step: run it, read its results with ``read(record)`` (an exception there fails the step), save its
        record and the log at once."""
        record = self.run(name, command, timeout, env)
        if record.get("skipped"):
            self.save(name, record)
            self.save("summary", self.summary())
            self.flush_log()
            return
        try:
            record["result"] = read(record)
        except Exception as err:  # noqa: BLE001 - any failure to read a step's output fails that step, not the check
            record["ok"] = False
            record["read_error"] = f"{type(err).__name__}: {err}"
            self.say(f"{name}: FAILED reading its output: {record['read_error']}")
        self.save(name, record)
        self.save("summary", self.summary())
        self.flush_log()

    # the steps

    def env_step(self, install: dict[str, Any]) -> None:
        path = self.scratch / "env.json"

        def read(record: dict[str, Any]) -> dict[str, Any]:
            result = json.loads(path.read_text())
            result["install"] = install
            result["git"] = git_state()
            broken = [m for m, state in result.get("imports", {}).items() if state != "ok"]
            if broken:
                raise RuntimeError(f"imports failing: {broken}")
            if not self.args.dry_run and not result.get("cuda_available"):
                raise RuntimeError("no CUDA device")
            return result

        self.step("env", [sys.executable, str(STEPS_SCRIPT), "env", str(path)], 120, read)

    def tests_step(self) -> None:
        junit = self.scratch / "tests.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "--durations=10"]
        command += [f"--junitxml={junit}", "tests/test_gpu.py"]
        env = self.env
        if self.args.dry_run:  # the same tests on the CPU, one case of each
            env = {**env, "SARNMT_GPU_TEST_DEVICE": "cpu"}
            one_each = "cgru and baseline or cpu_does and baseline or fp32 and baseline or lower_the_loss or compiled"
            command += ["-k", one_each]

        def read(record: dict[str, Any]) -> dict[str, Any]:
            return junit_summary(junit)

        self.step("tests", command, 300, read, env)

    def bench_step(self, batch_size: int, peak: float | None) -> None:
        out_dir = self.scratch / f"bench-b{batch_size}"
        if self.args.dry_run:
            size = ["model=tiny", "model.emb_dim=16", "model.hidden_dim=32", "vocab=100", "device=cpu", "threads=1"]
            size += ["precision=fp32", "optim.compiled=false", "train_batches=2", "repeats=1", "warmup=1"]
            size += ["decode.single=2"]
        else:
            size = ["model=paper", "vocab=50000", "device=cuda", "precision=bf16"]
            size += ["train_batches=3", "repeats=3", "warmup=2", "decode.single=4"]
        command = [sys.executable, "-m", "sarnmt.bench", *size, f"batch_size={batch_size}"]
        command += [f"decoders=[{','.join(self.args.decoders)}]", "systems=[]", "workloads=[wmt]", "plot=false"]
        command += ["lengths.wmt.src=null", "lengths.wmt.tgt=null"]  # sarnmt alone: the packaged bench has no peer
        command += [f"out_dir={out_dir}"] + ([f"peak_gflop_s={peak}"] if peak else [])

        def read(record: dict[str, Any]) -> dict[str, Any]:
            (json_path,) = sorted(out_dir.glob("bench-*.json"))
            bench = json.loads(json_path.read_text())
            md = json_path.with_suffix(".md")
            return {
                "figures": bench_figures(bench),
                "markdown": md.read_text() if md.is_file() else None,
                "bench": bench,
            }

        self.step(f"bench-b{batch_size}", command, 300, read)

    def measure_step(self) -> None:
        """The measure step's figures (benchmarks/gpu_measure.py): CUDA-event medians of >= 20 repeats, their
        spread, the GPU-busy fraction, now ÷ ``--before`` in the same process, the imported code's hash; at most
        240 s."""
        out_dir = self.scratch / "measure"
        seconds = int(max(30, min(240, self.remaining() - 30)))
        command = [sys.executable, str(MEASURE_SCRIPT), "--out", str(out_dir), "--budget", str(seconds - 60)]
        if self.args.dry_run:
            command += ["--dry-run", "--repeats", "2", "--warmup", "1", "--batch", "6"]
        if self.args.before:
            command += ["--before", self.args.before, "--cache", self.args.before_cache]

        def read(record: dict[str, Any]) -> dict[str, Any]:
            return json.loads((out_dir / "measure.json").read_text())

        self.step("measure", command, seconds, read)

    def train_step(self) -> None:
        path, workdir = self.scratch / "train.json", self.scratch / "train"
        common = ["logger=csv", "trainer.enable_progress_bar=false", "callbacks.progress_bar=null"]
        if self.args.dry_run:
            size = ["trainer=cpu", "model.emb_dim=16", "model.hidden_dim=32", "optim.compiled=false"]
            size += ["data.n_train=100", "data.n_dev=10", "data.n_test=10", "data.max_tokens=256"]
            size += ["trainer.max_epochs=1"]
        else:
            size = ["trainer=gpu"]
        # at most --train-seconds, and what the budget leaves once start-up, the test split and the other steps' time
        # are set aside (about a minute)
        seconds = int(max(10, min(self.args.train_seconds, self.remaining() - 75)))
        command = [sys.executable, str(STEPS_SCRIPT), "train", str(path), str(workdir), str(seconds), *size, *common]

        def read(record: dict[str, Any]) -> dict[str, Any]:
            return json.loads(path.read_text())

        self.step("train", command, seconds + 180, read)

    def summary(self) -> dict[str, Any]:
        """The headline figures of the steps so far, against the targets."""
        steps = {
            name: {"ok": r["ok"], "seconds": r["seconds"]} for name, r in self.records.items() if name != "summary"
        }
        env = self.records.get("env", {}).get("result", {})
        out: dict[str, Any] = {
            "ok": all(s["ok"] for s in steps.values()),
            "dry_run": self.args.dry_run,
            "device": (env.get("devices") or [{}])[0].get("name") or env.get("cpu"),
            "torch": env.get("torch"),
            "cuda": env.get("cuda"),
            "steps": steps,
            "figures": {},
        }
        figures = out["figures"]
        measured = self.records.get("measure", {}).get("result")
        if measured:
            figures["measure"] = {
                "rates": {label: f["rate"] for label, f in measured["figures"].items()},
                "busy": {label: f["busy"] for label, f in measured["figures"].items()},
                "now_over_before": measured.get("now_over_before"),
                "beam5_by_batch": {p["batch"]: p["sent_s"] for p in measured.get("beam5_by_batch") or []},
                "source_hash": (measured.get("code") or {}).get("source_hash"),
            }
        tests = self.records.get("tests", {}).get("result")
        if tests:
            figures["tests"] = {k: tests[k] for k in ("passed", "failed", "skipped", "errors")}
        for name, record in self.records.items():
            if name.startswith("bench-") and record.get("result"):
                figures[name] = record["result"]["figures"]
        train = self.records.get("train", {}).get("result")
        if train:
            figures["train"] = {
                key: train.get(key) for key in ("steady_target_tok_s", "steps", "epochs", "precision", "peak_mib")
            }
            figures["train"]["test_bleu"] = train["result"].get("test_bleu")
            figures["train"]["dev_bleu"] = [v.get("val/bleu") for v in train.get("validations", [])]
        if not self.args.dry_run:
            out["targets"] = targets_met(self.records, self.args.batch_sizes)
        return out


def git_state() -> dict[str, Any]:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=20)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, timeout=20)
        return {"commit": head.stdout.strip() or None, "changed_files": len(dirty.stdout.splitlines())}
    except (OSError, subprocess.TimeoutExpired) as err:
        return {"commit": None, "error": f"{type(err).__name__}: {err}"}


def junit_summary(path: Path) -> dict[str, Any]:
    """Counts and each test's outcome and seconds from pytest's JUnit XML."""
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    tests = []
    for case in suite.iter("testcase"):
        test = {"name": case.get("name"), "outcome": "passed", "seconds": float(case.get("time", 0))}
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                test["outcome"] = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                test["message"] = (child.get("message") or "")[:300]
                if child.tag != "skipped":
                    test["detail"] = tail(child.text or "", 1200)
        tests.append(test)
    counts = {key: sum(t["outcome"] == key for t in tests) for key in ("passed", "failed", "skipped")}
    return {**counts, "errors": sum(t["outcome"] == "error" for t in tests), "tests": tests}


def bench_figures(bench: dict[str, Any]) -> dict[str, Any]:
    """The headline figures of a bench record, per decoder: training tok/s, GFLOP/s, MFU, decoding sentences/s."""
    cfg = bench["config"]
    beam = f"beam{cfg['decode']['beam_size']}"
    out: dict[str, Any] = {"batch_size": cfg["batch_size"], "precision": cfg["precision"], "vocab": cfg["vocab"]}
    for variant in bench["runs"][0]["variants"]:
        out[variant["decoder"]] = {
            "train_tok_s": variant["train_tok_s"],
            "train_gflop_s": variant.get("train_gflop_s"),
            "mfu": variant.get("share_of_peak"),
            "greedy_sent_s": variant.get("greedy_batched"),
            f"{beam}_sent_s": variant.get(f"{beam}_batched"),
            f"{beam}_single_sent_s": variant.get(f"{beam}_single"),
            "peak_mib": variant.get("peak_mib"),
        }
    return out


def targets_met(records: dict[str, dict[str, Any]], batch_sizes: list[int]) -> dict[str, Any]:
    """The bench steps' targets (:data:`TARGETS`) for the baseline: training tok/s at the best batch size timed,
    beam-5 sentences/s at 256 sentences."""
    out: dict[str, Any] = {}
    rates = []
    for size in batch_sizes:
        figures = (records.get(f"bench-b{size}", {}).get("result") or {}).get("figures", {})
        if "baseline" in figures:
            rates.append(figures["baseline"]["train_tok_s"])
            if size == 256:
                beam = figures["baseline"].get("beam5_sent_s")
                out["beam5_sent_s_b256"] = {"value": beam, "target": TARGETS["beam5_sent_s_b256"]}
                out["beam5_sent_s_b256"]["met"] = beam is not None and beam >= TARGETS["beam5_sent_s_b256"]
    if rates:
        out["train_tok_s"] = {"value": max(rates), "target": TARGETS["train_tok_s"]}
        out["train_tok_s"]["met"] = max(rates) >= TARGETS["train_tok_s"]
    out.update(measure_targets((records.get("measure") or {}).get("result")))
    return out


def measure_targets(measured: dict[str, Any] | None) -> dict[str, Any]:
    """The measure step's targets (:data:`MEASURE_TARGETS`) against its figures for sarnmt now: beam 5, greedy,
    training (the faster of the eager and the captured step), each with its GPU-busy fraction."""
    if not measured:
        return {}
    figures = measured.get("figures", {})
    out: dict[str, Any] = {}
    for part, labels in (
        ("beam5", ["beam5/now"]),
        ("greedy", ["greedy/now"]),
        ("train", ["train/now", "train_captured/now"]),
    ):
        timed = [figures[label] for label in labels if label in figures]
        if not timed:
            continue
        best = max(timed, key=lambda f: f["rate"])
        out[f"issue40_{part}"] = {"value": best["rate"], "target": MEASURE_TARGETS[part], "busy": best["busy"]}
        out[f"issue40_{part}"]["met"] = (
            best["rate"] >= MEASURE_TARGETS[part] and (best["busy"] or 0) >= MEASURE_TARGETS["busy"]
        )
    return out


def peak_for(name: str | None) -> float | None:
    for key, peak in PEAKS:
        if name and key in name:
            return peak
    return None


def gpu_name() -> str | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
        return done.stdout.splitlines()[0].strip() if done.returncode == 0 and done.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def check(args: argparse.Namespace) -> int:
    """The check (module docstring). :returns: 0 when every step succeeded, else 1."""
    name = "cpu-dry-run" if args.dry_run else (gpu_name() or "no-gpu")
    run_dir = Path(args.results) / f"{time.strftime('%Y-%m-%d-%H%M%S')}-{slug(name)}"
    run_dir.mkdir(parents=True, exist_ok=True)
    out = Path(args.out) if args.out else None
    lines: list[str] = []
    site, made = None, None
    install = {}
    if args.wheels:
        site = Path(args.site) if args.site else Path(tempfile.mkdtemp(prefix="sarnmt-gpu-site-"))
        made = None if args.site else site
        install = install_wheels(Path(args.wheels), site, lines)
        if not install.get("installed"):
            site = None
    args.site_dir = site
    run = Check(args, run_dir, out)
    run.lines[:0] = lines
    run.say(f"gpu-check: {name}; records in {run_dir}" + (f", copied to {out / run_dir.name}" if out else ""))
    peak = args.peak_gflop_s if args.peak_gflop_s is not None else peak_for(name)
    start = time.time()
    steps = {
        "env": lambda: run.env_step(install),
        "measure": run.measure_step,
        "tests": run.tests_step,
        "bench": lambda: [run.bench_step(size, peak) for size in args.batch_sizes],
        "train": run.train_step,
    }
    # SIGTERM (a scheduler's time limit) stops the check as Ctrl-C does: the running step is killed, and the records
    # written so far, the summary and the log stay
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    finished = False
    try:
        for step in args.steps:
            steps[step]()
        finished = True
    finally:
        summary = run.summary()
        summary["finished"] = finished  # False: the check was stopped before its last step
        summary["ok"] = summary["ok"] and finished
        run.save("summary", summary)
        run.flush_log()
    failed = [s for s, r in summary["steps"].items() if not r["ok"]]
    verdict = f"FAILED: {', '.join(failed)}" if failed else "every step ok"
    run.say(f"gpu-check: {verdict} in {time.time() - start:.0f} s")
    run.say(json.dumps(summary["figures"], default=str))
    run.flush_log()
    for folder in (run.scratch, made):
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


def parse(argv: list[str]) -> argparse.Namespace:
    if argv[:1] == ["wheels"]:
        parser = argparse.ArgumentParser(prog="gpu_check.py wheels", description="wheels for an air-gapped GPU node")
        parser.add_argument("names", nargs="*", default=WHEELS, help=f"distributions (default: {' '.join(WHEELS)})")
        parser.add_argument("--dir", default=str(ROOT / ".whl"))
        parser.add_argument("--python-version", default="3.12")
        parser.add_argument("--platform", action="append", default=None, help=f"default: {' '.join(PLATFORMS)}")
        parser.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
        args = parser.parse_args(argv[1:])
        args.platform = args.platform or PLATFORMS
        args.command = "wheels"
        return args
    parser = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", default=str(ROOT / ".whl"), help="install what is missing from here ('' : no)")
    parser.add_argument("--site", default=None, help="install into this folder (default: a fresh temporary one)")
    parser.add_argument("--results", default=None, help="default: sweeps/results/gpu (dry run: outputs/gpu-check)")
    parser.add_argument("--out", default=os.environ.get("OUT") or None, help="also copy the records here ($OUT)")
    parser.add_argument("--dry-run", action="store_true", help="every step on the CPU at tiny sizes")
    parser.add_argument("--train-seconds", type=int, default=None, help="training time limit (90; dry run 10)")
    parser.add_argument("--batch-sizes", default=None, help="the bench's batch sizes (64,256; dry run 4,8)")
    parser.add_argument("--decoders", default="baseline", help="the bench's decoders, comma-separated")
    parser.add_argument("--peak-gflop-s", type=float, default=None, help="the GPU's bf16 peak (default: by name)")
    parser.add_argument("--budget", type=float, default=None, help="seconds for the whole check (540; dry run 1800)")
    parser.add_argument("--steps", default="env,measure,tests,bench,train", help="which steps, comma-separated")
    parser.add_argument("--before", default=None, help="measure: full hash to time beside")
    parser.add_argument("--before-cache", default=str(ROOT / ".cache" / "bench-commits"), help="its copy's folder")
    args = parser.parse_args(argv)
    args.command = "check"
    args.train_seconds = args.train_seconds or (10 if args.dry_run else 90)
    args.budget = args.budget or (1800 if args.dry_run else 540)
    args.results = args.results or str(ROOT / ("outputs/gpu-check" if args.dry_run else "sweeps/results/gpu"))
    args.batch_sizes = [int(b) for b in (args.batch_sizes or ("4,8" if args.dry_run else "64,256")).split(",")]
    args.decoders = args.decoders.split(",")
    args.steps = args.steps.split(",")
    unknown = sorted(set(args.steps) - {"env", "measure", "tests", "bench", "train"})
    if unknown:
        parser.error(f"unknown steps {unknown}; the steps are env, measure, tests, bench, train")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    return make_wheels(args) if args.command == "wheels" else check(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
