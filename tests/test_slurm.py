"""The SLURM path on a real cluster: a smoke sweep through submitit, and jobs interrupted the ways a cluster
interrupts them (``scontrol requeue``, the time-limit signal, preemption by a higher-priority partition), each resumed
from its checkpoint with a record equal to an uninterrupted run's; a two-task DDP job (gloo) under ``srun``; a job
cancelled before its result; a request larger than the node.

Needs a SLURM cluster answering here with two partitions: the one the jobs run in (its jobs requeued on preemption)
and one that preempts it. By default they are ``batch`` and ``urgent``, the partitions ``scripts/slurm-cluster.sh up``
makes on this machine (Debian, root), as ``.ci/run`` does; another cluster names its own in the environment
(docs/cluster.md, "Testing the SLURM path on your cluster"):

- ``SARNMT_SLURM_PARTITION`` (default ``batch``): where every job of the tests is submitted (``slurm.partition``);
- ``SARNMT_SLURM_PREEMPT_PARTITION`` (default ``urgent``): the partition whose job preempts one of it;
- ``SARNMT_SLURM_ACCOUNT``, ``SARNMT_SLURM_QOS`` (default none): passed to every job the tests submit.

Skipped where there is none, saying why; under CI (``CI=true``) that is a failure.

Jobs to interrupt wait at a known update (the fault injector's ``pause_at_step``, asleep, until a preemption signal
comes), so that every interruption lands in the middle of training, whenever the scheduler delivers it; the pause
changes nothing the job computes. The requeued, timed-out and cancelled jobs run side by side after the sweep, whose
uninterrupted records they are compared with; the preempted job runs last, alone in ``batch``, and is the two-task DDP
job, compared with an uninterrupted two-rank run.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from sarnmt.cli.reproduce import reproduce
from sarnmt.sweep.job import JobSettings
from sarnmt.sweep.launch import job_states, multirun_command
from sarnmt.sweep.plan import job_from_id
from sarnmt.sweep.spec import load_scale
from tests.conftest import ROOT
from tests.fault_injection import PREFIX as FAULTS
from tests.fault_injection import inject
from tests.test_sweep import DIRTY_OK, comparable, reproduce_cfg

pytestmark = pytest.mark.slurm
sweep_slurm = pytest.importorskip("sarnmt.sweep.slurm", reason="no hydra-submitit-launcher (pip install -e '.[slurm]')")

TABLE = "3"  # the smallest translation table at smoke scale: 6 jobs, En-De
PAUSE_AT = 20  # interrupted jobs wait before update 21 (of 60), after the validation and checkpoint at 20
PAUSE_S = 300
PARTITION = os.environ.get("SARNMT_SLURM_PARTITION") or "batch"
PREEMPT_PARTITION = os.environ.get("SARNMT_SLURM_PREEMPT_PARTITION") or "urgent"
ACCOUNT = os.environ.get("SARNMT_SLURM_ACCOUNT") or None
QOS = os.environ.get("SARNMT_SLURM_QOS") or None
# the site's request of every job, as reproduce's slurm.* settings (what is not set stays the profile's)
SITE = {"partition": PARTITION, **({"account": ACCOUNT} if ACCOUNT else {}), **({"qos": QOS} if QOS else {})}
SITE_OVERRIDES = [f"slurm.{key}={value}" for key, value in SITE.items()]
LIMIT_S = 900  # the bound of each scenario (a loaded machine; about a minute on two free cores)


# --- the cluster ---------------------------------------------------------------------------------------------------
def _slurm(*args: str, timeout: float = 30) -> str:
    """A SLURM client command's output (every call bounded: they block while slurmctld is down)."""
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _unavailable() -> str | None:
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "SLURM is not installed here (scripts/slurm-cluster.sh up installs and starts a one-node cluster)"
    try:
        partitions = [line.split()[0] for line in _slurm("sinfo", "-h", "-o", "%R %a", timeout=15).splitlines()]
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        return f"SLURM is installed but does not answer ({err}); scripts/slurm-cluster.sh up starts it"
    missing = [name for name in (PARTITION, PREEMPT_PARTITION) if name not in partitions]
    if missing:
        return (
            f"the cluster lacks partition(s) {', '.join(missing)} (has {partitions}): name yours in "
            "SARNMT_SLURM_PARTITION and SARNMT_SLURM_PREEMPT_PARTITION (docs/cluster.md); scripts/slurm-cluster.sh up "
            "makes batch and urgent"
        )
    return None


@pytest.fixture(scope="module")
def cluster() -> dict:
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the SLURM tests: {reason}")
        pytest.skip(reason)
    return {"cpus": int(_slurm("sinfo", "-h", "-p", PARTITION, "-o", "%c").split()[0])}


# --- jobs ----------------------------------------------------------------------------------------------------------
def _settings(tmp: Path) -> JobSettings:
    return JobSettings(runs_dir=tmp / "runs", results_dir=tmp / "results", progress=False, allow_dirty=True)


def _start(tmp: Path, cell: str, slurm: dict | None = None, pause: bool = True) -> subprocess.Popen:
    """The multirun ``reproduce`` would start for one cell, on the CPU profile, in the background."""
    train = inject(pause_at_step=PAUSE_AT, pause_s=PAUSE_S) if pause else []
    command = multirun_command(
        [job_from_id(load_scale("smoke"), cell)],
        "smoke",
        _settings(tmp),
        "slurm",
        train_overrides=train,
        slurm={"profile": "cpu", **SITE, **(slurm or {})},
    )
    log = open(tmp / "multirun.log", "w")  # noqa: SIM115 - the process writes it until it ends
    return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _output(tmp: Path) -> str:
    return (tmp / "multirun.log").read_text(errors="replace")


def _wait(what: str, check, process: subprocess.Popen | None = None, limit: float = LIMIT_S):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the multirun ended ({process.returncode}) before {what}")
        time.sleep(0.3)
    raise AssertionError(f"no {what} after {limit:.0f} s")


def _step(checkpoint: Path) -> int | None:
    try:
        return torch.load(checkpoint, map_location="cpu", weights_only=True)["global_step"]
    except Exception:  # noqa: BLE001 - not there yet, or being replaced: look again
        return None


def _logs(tmp: Path) -> str:
    """Everything the job wrote (submitit's logs, Hydra's job log), over its requeues."""
    folder = tmp / "runs" / ".launch"
    return "".join(
        p.read_text(errors="replace") for p in sorted(folder.rglob("*")) if p.suffix in (".log", ".out", ".err")
    )


def _states(job_id: str) -> list[str]:
    """The job's state in each of its runs (sacct -D: one line per requeue)."""
    return _slurm("sacct", "-D", "-X", "-n", "-P", "-o", "State", "-j", job_id).split()


STARTED: list[Scenario] = []


class Scenario:
    """One cell's job, started in the background, held at update PAUSE_AT and interrupted there by ``act(self)``,
    in a thread of its own so that scenarios can run side by side."""

    def __init__(self, tmp: Path, cell: str, act, slurm: dict | None = None) -> None:
        self.tmp, self.cell, self.job = tmp, cell, None
        tmp.mkdir(parents=True, exist_ok=True)
        self.process = _start(tmp, cell, slurm)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(act,), daemon=True)
        self.thread.start()
        STARTED.append(self)

    def _run(self, act) -> None:
        try:
            found = _wait("SLURM job id", lambda: re.search(r"SLURM job (\d+)", _output(self.tmp)), self.process)
            self.job = found.group(1)
            last = self.tmp / "runs" / self.cell / "checkpoints" / "last.ckpt"
            _wait(f"checkpoint at update {PAUSE_AT}", lambda: _step(last) == PAUSE_AT, self.process)
            _wait("the pause", lambda: "faults: pausing before update" in _logs(self.tmp), self.process)
            act(self)
        except BaseException as err:  # noqa: BLE001 - raised by wait()
            self.error = err

    def wait(self) -> int:
        """The multirun's exit status, once the interruption was made and the multirun has ended."""
        self.thread.join(LIMIT_S)
        if self.error is not None:
            raise self.error
        try:
            return self.process.wait(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGTERM)
            raise

    def finish(self) -> None:
        assert self.wait() == 0, _output(self.tmp)[-3000:] + _logs(self.tmp)[-3000:]

    def resumed(self, received: str) -> None:
        logs = _logs(self.tmp)
        assert f"received {received}: stopping after update {PAUSE_AT + 1}" in logs, logs[-3000:]
        assert f"{self.cell}: resuming from" in logs, logs[-3000:]

    def same_record(self, reference: Path, differing: tuple[str, ...] = (FAULTS,)) -> None:
        """Record (but times, hardware, config paths, and the overrides starting with ``differing``: the pause, which
        changes nothing else), per-sentence statistics and hypotheses equal the reference's."""
        mine, theirs, cell = self.tmp / "results", reference / "results", self.cell
        record = comparable(json.loads((mine / "records" / f"{cell}.json").read_text()))
        expected = comparable(json.loads((theirs / "records" / f"{cell}.json").read_text()))
        for one in (record, expected):
            one["overrides"] = [o for o in one["overrides"] if not o.startswith(differing)]
        if expected["selected_checkpoint"]["score"] is None:  # ddp_spawn's parent never sees the score: the name has it
            record["selected_checkpoint"]["score"] = None
        assert record == expected
        sentences = f"{cell}.sentences.json.gz"
        assert (mine / "records" / sentences).read_bytes() == (theirs / "records" / sentences).read_bytes()
        hypotheses = sorted((theirs / "hypotheses" / cell).glob("*.gz"))
        assert hypotheses
        for path in hypotheses:
            assert gzip.decompress((mine / "hypotheses" / cell / path.name).read_bytes()) == gzip.decompress(
                path.read_bytes()
            ), path.name


@pytest.fixture(scope="module", autouse=True)
def _no_job_left():
    """Whatever fails, no test job stays queued."""
    yield
    for scenario in STARTED:
        if scenario.process.poll() is None:
            os.killpg(scenario.process.pid, signal.SIGTERM)
        if scenario.job is not None and shutil.which("scancel"):
            subprocess.run(["scancel", scenario.job], capture_output=True, timeout=30)


# --- the uninterrupted sweep ---------------------------------------------------------------------------------------
class Sweep:
    """``reproduce table=3 scale=smoke launcher=slurm slurm.profile=cpu``, as a user runs it, in the background."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.log = tmp, tmp / "reproduce.log"
        command = [
            sys.executable,
            "-m",
            "sarnmt",
            "reproduce",
            f"table={TABLE}",
            "scale=smoke",
            "launcher=slurm",
            "slurm.profile=cpu",
            *SITE_OVERRIDES,
            f"runs_dir={tmp / 'runs'}",
            f"results_dir={tmp / 'results'}",
            "progress=false",
            DIRTY_OK,
        ]
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def result(self) -> tuple[Path, str]:
        """``(its folder, its output)`` once it has ended well."""
        returncode = self.process.wait(timeout=LIMIT_S)
        output = self.log.read_text(errors="replace")
        assert returncode == 0, output[-5000:]
        return self.tmp, output


@pytest.fixture(scope="module")
def swept(cluster, tmp_path_factory) -> Sweep:
    return Sweep(tmp_path_factory.mktemp("slurm-sweep"))


def test_smoke_sweep_through_submitit_writes_records_and_prints_the_table(swept):
    tmp, output = swept.result()
    cells = [f"en_de.{r}.s{s}" for s in (1, 2) for r in ("baseline", "mean_residual", "self_attentive_content")]
    assert sorted(p.name for p in (tmp / "results" / "records").glob("*.json")) == sorted(f"{c}.json" for c in cells)
    assert "SLURM takes the request" in output and "| NMT baseline |" in output  # the table printed
    ids = re.findall(r"#\d+ : (\S+) : SLURM job (\d+)", output)
    assert sorted(cell for cell, _ in ids) == sorted(cells)  # one SLURM job per cell
    listed = _slurm("sacct", "-X", "-n", "-P", "-o", "JobID,JobName,State", *(f"-j{i}" for _, i in ids))
    assert sorted(line.split("|")[1:] for line in listed.split()) == sorted([c, "COMPLETED"] for c in cells)
    for cell in cells:  # torch's threads: the job's CPUs (1), not the node's
        record = json.loads((tmp / "results" / "records" / f"{cell}.json").read_text())
        assert record["hardware"]["threads"] == 1 and record["config"]["trainer"]["accelerator"] == "cpu"


# --- interrupted in the middle of training -------------------------------------------------------------------------
def _requeue(scenario: Scenario) -> None:
    _slurm("scontrol", "requeue", scenario.job)  # SIGTERM to the job's processes, then the job is queued again


def _time_limit(scenario: Scenario) -> None:
    """Bring the job's time limit to 60-120 s from now: slurmctld, which looks every 30 s, sends the job's SIGUSR2
    (90 s before its end) at its next look, well before the limit; once the job is requeued, give it time again."""
    job = scenario.job
    elapsed = _slurm("squeue", "-h", "-j", job, "-o", "%M").strip()
    seconds = sum(int(x) * f for x, f in zip(reversed(re.split("[-:]", elapsed)), (1, 60, 3600, 86400), strict=False))
    _slurm("scontrol", "update", f"JobId={job}", f"TimeLimit={seconds // 60 + 2}")
    _wait(
        "the requeue after the time-limit signal",
        lambda: _slurm("squeue", "-h", "-j", job, "-o", "%T").strip() == "PENDING",
        scenario.process,
    )
    _slurm("scontrol", "update", f"JobId={job}", "TimeLimit=30")  # the resumed run finishes in time


def _cancel(scenario: Scenario) -> None:
    _slurm("scancel", scenario.job)


@pytest.fixture(scope="module")
def two_ranks(cluster, swept, tmp_path_factory) -> tuple[Path, subprocess.Popen] | None:
    """The DDP job's reference, en_de.baseline.s2 as two ranks on this machine, uninterrupted (ddp_spawn); started
    once the sweep has ended, to run while the side-by-side jobs wait on SLURM."""
    with contextlib.suppress(Exception):  # the sweep's test reports how it ended
        swept.result()
    if cluster["cpus"] < 2:
        return None
    reference = tmp_path_factory.mktemp("two-ranks")
    command = [
        sys.executable,
        "-m",
        "sarnmt",
        "sweep-job",
        "scale=smoke",
        "job=en_de.baseline.s2",
        f"runs_dir={reference / 'runs'}",
        f"results_dir={reference / 'results'}",
        "progress=false",
        DIRTY_OK,
        "overrides=['trainer=ddp_sim','trainer.enable_progress_bar=false','callbacks.progress_bar=null']",
    ]
    log = open(reference / "run.log", "w")  # noqa: SIM115 - the process writes it until it ends
    return reference, subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def side_by_side(swept, two_ranks, tmp_path_factory) -> dict[str, Scenario]:
    """The requeue, time-limit and cancel scenarios, started together once the sweep has ended (one CPU each: they
    mostly wait, for slurmctld, for a requeued job to be eligible again)."""
    return {
        "requeue": Scenario(tmp_path_factory.mktemp("requeue"), "en_de.baseline.s1", _requeue),
        "time_limit": Scenario(
            tmp_path_factory.mktemp("time-limit"),
            "en_de.self_attentive_content.s1",
            _time_limit,
            slurm={"time_min": 30, "signal_delay_s": 90},
        ),
        "cancel": Scenario(tmp_path_factory.mktemp("cancel"), "en_de.mean_residual.s2", _cancel),
    }


def test_scontrol_requeue_mid_training_resumes_from_the_checkpoint(swept, side_by_side):
    scenario = side_by_side["requeue"]
    scenario.finish()
    scenario.resumed("SIGTERM")
    assert "REQUEUED" in _states(scenario.job)
    scenario.same_record(swept.result()[0])


def test_the_time_limit_signal_checkpoints_requeues_and_resumes(swept, side_by_side):
    scenario = side_by_side["time_limit"]
    scenario.finish()
    scenario.resumed("SIGUSR2")
    assert "Requeued job" in _logs(scenario.tmp)  # by submitit's handler, called after the checkpoint
    assert "REQUEUED" in _states(scenario.job)
    scenario.same_record(swept.result()[0])


def test_a_job_cancelled_before_its_result_is_reported_by_cell_and_id_and_resumes_next_time(side_by_side):
    scenario = side_by_side["cancel"]
    assert scenario.wait() == 3
    output, cell = _output(scenario.tmp), scenario.cell
    report = rf"1 of 1 SLURM jobs ended without a result:\s+{re.escape(cell)}: SLURM job {scenario.job}, CANCELLED"
    assert re.search(report, output), output[-3000:]
    assert not (scenario.tmp / "results" / "records" / f"{cell}.json").exists()  # no record for an unfinished job
    (state,) = job_states([job_from_id(load_scale("smoke"), cell)], _settings(scenario.tmp))
    assert state.state == "resume"  # the next run of the same command resumes it from its checkpoint


@pytest.fixture(scope="module")
def preempted(cluster, swept, two_ranks, side_by_side, tmp_path_factory) -> tuple[Scenario, str, Path]:
    """A job preempted by the preempting partition (``urgent``) in the middle of training, once nothing else runs in
    the jobs' partition (``batch``; the urgent job, asking for every CPU of the node, preempts this one only): the
    two-task DDP job, or where the node has one CPU a one-task job. :returns: the scenario, the urgent job's id and
    the reference run's folder."""
    with contextlib.suppress(Exception):  # the sweep's and the other scenarios' tests report how they ended
        swept.result()
    for other in side_by_side.values():
        with contextlib.suppress(Exception):
            other.wait()
    urgent = []

    def preempt(scenario: Scenario) -> None:
        command = ["sbatch", "--parsable", "-p", PREEMPT_PARTITION, "-J", "urgent", "-c", str(cluster["cpus"])]
        command += [f"--account={ACCOUNT}"] * bool(ACCOUNT) + [f"--qos={QOS}"] * bool(QOS)
        urgent.append(_slurm(*command, "--mem=100M", "-o", "/dev/null", "--wrap", "sleep 2").strip())

    tmp = tmp_path_factory.mktemp("preempted")
    if two_ranks is None:
        scenario = Scenario(tmp, "en_de.mean_residual.s1", preempt)
        reference = swept.tmp
    else:
        scenario = Scenario(tmp, "en_de.baseline.s2", preempt, slurm={"tasks_per_node": 2, "cpus_per_task": 1})
        reference, local = two_ranks
        assert local.wait(timeout=LIMIT_S) == 0, (reference / "run.log").read_text()[-3000:]
    scenario.finish()
    return scenario, urgent[0], reference


def test_preemption_by_the_urgent_partition_resumes_from_the_checkpoint(preempted):
    scenario, urgent, reference = preempted
    scenario.resumed("SIGUSR2")  # the job's --signal, sent on preemption
    assert "this job is preempted" in _logs(scenario.tmp)  # submitit's handler, after the checkpoint, requeued it
    assert "REQUEUED" in _states(scenario.job) and _states(urgent) == ["COMPLETED"]
    scenario.same_record(reference, differing=(FAULTS, "trainer"))  # trainer=slurm, and ddp_sim for two ranks


def test_two_task_ddp_job_under_srun_equals_an_uninterrupted_two_rank_run(cluster, two_ranks, preempted):
    if two_ranks is None:
        pytest.skip(f"the node has {cluster['cpus']} CPU; a two-task job needs 2")
    scenario, _, reference = preempted
    logs = _logs(scenario.tmp)
    assert "MEMBER: 2/2" in logs and "distributed_backend=gloo" in logs  # two SLURM tasks, one DDP rank each
    stopped = {  # submitit's log of each task: <job>_<task>_log.out
        path.name.split("_")[1]
        for path in (scenario.tmp / "runs").rglob("*_log.out")
        if f"stopping after update {PAUSE_AT + 1}" in path.read_text(errors="replace")
    }
    assert stopped == {"0", "1"}  # both ranks stopped after the same update
    record = json.loads((scenario.tmp / "results" / "records" / f"{scenario.cell}.json").read_text())
    assert record["config"]["trainer"]["devices"] == 2 and record["config"]["trainer"]["strategy"] == "ddp"
    scenario.same_record(reference, differing=(FAULTS, "trainer"))


# --- bad input -----------------------------------------------------------------------------------------------------
def test_a_request_larger_than_the_node_fails_at_submission_with_slurms_message(cluster, tmp_path):
    too_many = f"slurm.cpus_per_task={cluster['cpus'] + 1}"
    for setting, message in (
        (too_many, "More processors requested than permitted"),
        ("slurm.mem_gb=100000", "Requested node configuration is not available"),  # sbatch --test-only's words
    ):
        cfg = reproduce_cfg(tmp_path, f"table={TABLE}", "launcher=slurm", "slurm.profile=cpu", *SITE_OVERRIDES, setting)
        with pytest.raises(
            sweep_slurm.SlurmUnavailable, match=rf"^SLURM refuses the jobs' request \(.*\): .*{message}"
        ):
            reproduce(cfg, out=open(os.devnull, "w"))
    assert not (tmp_path / "runs").exists()  # before any job
    # the launcher itself, without reproduce's check: the first sbatch fails, nothing is submitted
    process = _start(tmp_path, "en_de.baseline.s1", slurm={"mem_gb": 100000}, pause=False)
    assert process.wait(timeout=LIMIT_S) == 2
    refused = r"error: SLURM refused job en_de\.baseline\.s1: sbatch: error: Memory specification can not be satisfied"
    assert re.search(refused, _output(tmp_path)), _output(tmp_path)[-2000:]
