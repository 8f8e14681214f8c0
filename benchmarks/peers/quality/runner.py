"""Running one job of the quality comparison: train (resuming the tool's own checkpoint), decode the three test sets
with the tool's own command, score, and write the record last.

A job's folder ``<work>/<system>.s<seed>/`` holds:

- ``job.json``: its identity (a hash of the system's full config, the exported text, the tool's version, the seed
  and the scale). A folder of another identity is moved aside (``.stale-<time>``) and the job starts again: two
  configurations never share a run;
- ``attempts.json``: every start of the training process (start time, last sign of life, end, exit status, peak RSS,
  the update it resumed from, the harness commit), rewritten atomically at each change and every 15 s;
- ``events.jsonl``: every validation (update, dev cost, dev BLEU) and other event with the wall-clock time it was
  seen, appended as the tool's log line arrives;
- ``attempt-<n>/train.log``: the tool's output; ``fit.json``: written once training has ended normally;
- ``test/<split>/``: each test set's decoding (``result.json`` once scored).

**Killed midway**: the next ``run`` resumes from the tool's own checkpoint (sarnmt's ``last.ckpt``, JoeyNMT's
``latest.ckpt``, fairseq's ``checkpoint_last.pt``); the dev series keeps, for every update, what the latest attempt
saw (validations the killed attempt made after that checkpoint are dropped), and the wall time counts every attempt's
time, the lost work included (the record says how many attempts there were). With no checkpoint to resume from, the
folder is moved aside (``.restarted-<time>``) and the job starts from scratch. A child is sent SIGTERM when the
driver dies (``PR_SET_PDEATHSIG``), so a killed driver leaves no training behind writing into the folder.

**Wall time**: from the start of the training process (start-up and data loading included, as a user waits for
them) to the line announcing a validation; time to the selected checkpoint is that of the validation the tool's own
rule selected. Total: every attempt's duration. Decoding is not included.

**CPU time** beside it (the training process's user + system seconds, from ``/proc`` at each log line and ``wait4``
at the end): every job runs on one thread, so on a quiet machine it is the wall time, and on a shared one it is what
the job would have taken alone. The comparison of systems uses it, because the jobs of one comparison run at different
moments under different load.

The **record** (``<results>/records/<system>.s<seed>.json``, beside ``.sentences.json.gz`` with the per-sentence BLEU
statistics and ``<results>/hypotheses/<job>/``) is written atomically, last, only when every test set is scored:
a record present is a complete run; a job killed before that has none.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import hashlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.peers.quality.data import TESTS, export_id
from benchmarks.peers.quality.machine import harness_code, machine
from benchmarks.peers.quality.scoring import Scorer
from benchmarks.peers.quality.systems import ROOT, Event, Job, attempt_dir
from sarnmt.sweep.records import gzip_bytes, write_json, write_lines_gz
from sarnmt.utils.atomic import write_bytes

RECORD_VERSION = 1
HEARTBEAT_S = 15.0
ACTIVE: set[subprocess.Popen] = set()  # running children, for the driver's signal handler
_ACTIVE_LOCK = threading.Lock()


class JobFailed(RuntimeError):
    """A job that cannot go on (its tool failed): the message names the job, the exit status and the log."""


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def identity(job: Job, manifest: dict[str, Any]) -> dict[str, Any]:
    config = job.system.config(job)
    version = {k: v for k, v in job.system.version().items() if k not in ("sarnmt", "source_hash")}
    blob = {"system": job.system.name, "seed": job.seed, "scale": job.scale.name, "config": config}
    blob |= {"data": export_id(manifest), "version": version}
    digest = hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return {"id": job.id, "hash": digest, **blob}


def record_path(results: Path, job_id: str) -> Path:
    return results / "records" / f"{job_id}.json"


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def complete_record(path: Path, digest: str | None = None) -> dict[str, Any] | None:
    """The record at ``path`` if it is complete (parses, ``complete`` true, and of ``digest`` when given)."""
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("complete") is not True:
        return None
    if digest is not None and record.get("identity") != digest:
        return None
    return record


def _set_pdeathsig() -> None:
    """In the child, before exec: SIGTERM when the thread that started it dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "WANDB_MODE": "disabled",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
    }


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system, the process's and its waited-for children's) of a running process, from
    ``/proc/<pid>/stat``; None where there is no such file (not Linux, or the process has gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": field 3 (state) is fields[0]
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def run_process(cmd: list[str], log: Path, on_line=None, on_start=None) -> tuple[int, float, float, float]:
    """Run ``cmd`` (cwd: the checkout) with its output in ``log``, calling ``on_start(pid)`` once it has started and
    ``on_line(line, t, cpu)`` for every line (``t``: the wall clock, ``cpu``: the child's CPU seconds so far, or None
    where unknown).

    :returns: ``(exit status, wall seconds, peak RSS in MiB, CPU seconds)`` (peak and CPU from ``wait4``: the
        child's own and its children's)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.time()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,
            preexec_fn=_set_pdeathsig,
        )
        with _ACTIVE_LOCK:
            ACTIVE.add(proc)
        if on_start is not None:
            on_start(proc.pid)
        try:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if on_line is not None:
                    on_line(line.rstrip("\n"), time.time(), cpu_seconds(proc.pid))
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            with _ACTIVE_LOCK:
                ACTIVE.discard(proc)
    return proc.returncode, time.time() - start, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def stop_children() -> None:
    """SIGTERM every running child's process group (the driver's SIGINT/SIGTERM handler)."""
    with _ACTIVE_LOCK:
        procs = list(ACTIVE)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------------ the job folder


class Folder:
    """A job's folder: ``attempts.json`` and ``events.jsonl`` (see the module docstring)."""

    def __init__(self, job: Job) -> None:
        self.job, self.path = job, job.work
        self._lock = threading.Lock()

    def claim(self, ident: dict[str, Any], echo) -> None:
        """Make the folder this identity's: a folder of another identity is moved aside."""
        marker = self.path / "job.json"
        if marker.is_file():
            try:
                old = read_json(marker).get("hash")
            except (OSError, ValueError):
                old = None
            if old == ident["hash"]:
                return
            self.set_aside("stale", echo, f"its identity {old} is not this config's {ident['hash']}")
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(marker, ident)

    def set_aside(self, why: str, echo, reason: str) -> None:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.{why}-{stamp}")
        echo(f"{self.job.id}: {reason}; moved {self.path} to {aside.name}")
        self.path.rename(aside)

    @property
    def attempts_file(self) -> Path:
        return self.path / "attempts.json"

    @property
    def events_file(self) -> Path:
        return self.path / "events.jsonl"

    def attempts(self) -> list[dict[str, Any]]:
        try:
            return read_json(self.attempts_file)
        except (OSError, ValueError):
            return []

    def save_attempts(self, attempts: list[dict[str, Any]]) -> None:
        with self._lock:
            write_json(self.attempts_file, attempts)

    def add_event(self, attempt: int, t: float, event: Event, cpu: float | None = None) -> None:
        line = {"attempt": attempt, "t": round(t, 3), **event.as_dict()}
        if cpu is not None:
            line["cpu"] = round(cpu, 2)
        with self._lock, open(self.events_file, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
            out.flush()

    def events(self) -> list[dict[str, Any]]:
        if not self.events_file.is_file():
            return []
        out = []
        for line in self.events_file.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut by a kill
                continue
        return out


def attempt_seconds(attempt: dict[str, Any], events: list[dict[str, Any]] = ()) -> float:
    """How long an attempt ran: to its end, or for a killed one to its last sign of life (the heartbeat, or a later
    log line)."""
    seen = [e["t"] for e in events if e.get("attempt") == attempt["n"]]
    end = attempt.get("end") or max([attempt.get("last_seen") or attempt["start"], *seen])
    return max(0.0, end - attempt["start"])


def attempt_cpu(attempt: dict[str, Any], events: list[dict[str, Any]] = ()) -> float | None:
    """The CPU seconds an attempt used: at its end (``wait4``), or for a killed one the last value seen (the
    heartbeat's, or a later log line's); None where none was measured."""
    if attempt.get("cpu_s") is not None:
        return attempt["cpu_s"]
    seen = [e["cpu"] for e in events if e.get("attempt") == attempt["n"] and e.get("cpu") is not None]
    values = [v for v in (attempt.get("cpu_last"), *seen) if v is not None]
    return max(values) if values else None


def series(attempts: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The dev series ``[{update, wall_s, cpu_s, dev_loss, dev_bleu, attempt}]`` in update order: each attempt's
    clocks (wall and CPU) start where the previous attempts' ended; for an update validated by two attempts, the
    later attempt's; validations of an attempt beyond the update the next one resumed from are dropped. ``cpu_s`` is
    None where an attempt's CPU time is unknown."""
    offsets, total, cpu_offsets, cpu_total = {}, 0.0, {}, 0.0
    for a in attempts:
        offsets[a["n"]] = (a["start"], total)
        total += attempt_seconds(a, events)
        cpu_offsets[a["n"]] = cpu_total
        used = attempt_cpu(a, events)
        cpu_total = None if cpu_total is None or used is None else cpu_total + used
    resumed = {a["n"]: a.get("resumed_from") for a in attempts}
    for e in events:  # fairseq says its resume update in its log
        if e["kind"] == "resumed" and e.get("step") is not None:
            resumed[e["attempt"]] = e["step"]
    by_step: dict[int, dict[str, Any]] = {}
    for e in events:
        if e["kind"] != "valid" or e["attempt"] not in offsets:
            continue
        later = [resumed.get(n) for n in offsets if n > e["attempt"] and resumed.get(n) is not None]
        if later and e["step"] > min(later):
            continue
        start, offset = offsets[e["attempt"]]
        by_step[e["step"]] = {
            "update": e["step"],
            "wall_s": round(offset + e["t"] - start, 1),
            "cpu_s": None
            if cpu_offsets[e["attempt"]] is None or e.get("cpu") is None
            else round(cpu_offsets[e["attempt"]] + e["cpu"], 1),
            "dev_loss": e.get("dev_loss"),
            "dev_bleu": e.get("dev_bleu"),
            "attempt": e["attempt"],
        }
    return [by_step[s] for s in sorted(by_step)]


# --------------------------------------------------------------------------------------------------------- train


def train(job: Job, folder: Folder, echo, scorer: Scorer | None = None) -> dict[str, Any]:
    """Train to the end (resuming), then write and return ``fit.json``."""
    fit_path = folder.path / "fit.json"
    if fit_path.is_file():
        return read_json(fit_path)
    system = job.system
    attempts = folder.attempts()
    resume = system.resume_point(job, len(attempts))
    if attempts and resume is None:
        ident = read_json(folder.path / "job.json")
        folder.set_aside("restarted", echo, "killed before its first checkpoint: nothing to resume")
        folder.path.mkdir(parents=True)
        write_json(folder.path / "job.json", ident)
        attempts = []
    system.prepare(job)
    n = len(attempts) + 1
    job.state = {}
    cmd = system.train_command(job, n, resume)
    attempt = {
        "n": n,
        "start": time.time(),
        "last_seen": time.time(),
        "end": None,
        "rc": None,
        "resumed_from": resume[0] if resume and resume[0] >= 0 else None,
        "command": cmd,
        "harness": harness_code(),
    }
    attempts.append(attempt)
    folder.save_attempts(attempts)
    where = "" if not resume else f", resuming from update {resume[0]}" if resume[0] >= 0 else f", resuming {resume[1]}"
    echo(f"{job.id}: training, attempt {n}{where}")
    done = threading.Event()
    child: list[int] = []  # the training process's pid, once started

    def heartbeat() -> None:
        # the CPU time too: a tool may print nothing between validations, and a driver killed with its child (the
        # end of a session) never reaches wait4, so the last heartbeat is all that is left of the attempt's CPU
        while not done.wait(HEARTBEAT_S):
            attempt["last_seen"] = time.time()
            cpu = cpu_seconds(child[0]) if child else None
            if cpu is not None:
                attempt["cpu_last"] = round(cpu, 2)
            folder.save_attempts(attempts)

    def on_line(line: str, t: float, cpu: float | None = None) -> None:
        if cpu is not None:
            attempt["cpu_last"] = round(cpu, 2)
        for event in system.parse(job, line):
            folder.add_event(n, t, event, cpu)
            system.on_event(job, event)
            if event.kind == "valid":
                bleu = "" if event.dev_bleu is None else f", dev BLEU {event.dev_bleu:.2f}"
                echo(
                    f"{job.id}: update {event.step}, dev cost {event.dev_loss:.3f}{bleu} ({t - attempt['start']:.0f} s)"
                )

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    log = attempt_dir(job, n) / "train.log"
    try:
        rc, _, rss, cpu = run_process(cmd, log, on_line, on_start=child.append)
    finally:
        done.set()
    attempt.update(end=time.time(), last_seen=time.time(), rc=rc, peak_rss_mib=round(rss, 1), cpu_s=round(cpu, 2))
    folder.save_attempts(attempts)
    if rc != 0:
        raise JobFailed(f"{job.id}: training exited with status {rc} (log {log}):\n{tail(log)}")
    events = folder.events()
    if not any(e["kind"] == "end" and e["attempt"] == n for e in events):
        raise JobFailed(f"{job.id}: training exited 0 without saying it ended (log {log}):\n{tail(log)}")
    fit = summarise(job, attempts, events, scorer)
    write_json(fit_path, fit)
    return fit


def summarise(
    job: Job, attempts: list[dict[str, Any]], events: list[dict[str, Any]], scorer: Scorer | None = None
) -> dict[str, Any]:
    points = series(attempts, events)
    if not points:
        raise JobFailed(f"{job.id}: training ended without a validation")
    for point in points:
        if point["dev_bleu"] is None and scorer is not None:
            point["dev_bleu"] = job.system.dev_bleu(job, point, scorer)
    valid = {p["update"]: p["dev_loss"] for p in points}
    step, checkpoint = job.system.selected(job, valid)
    at = next((p for p in points if p["update"] == step), None)
    if at is None:
        raise JobFailed(f"{job.id}: the selected update {step} has no validation in the series")
    ends = [e for e in events if e["kind"] in ("end", "stopped_early")]
    last_end = next((e for e in reversed(events) if e["kind"] == "end"), {})
    updates = max([p["update"] for p in points] + [last_end.get("step") or 0])
    early = any(e["kind"] == "stopped_early" for e in events) or bool(
        last_end.get("stopped_early") or "minimum lr" in str(last_end.get("value", ""))
    )
    if job.scale.max_updates is not None and updates >= job.scale.max_updates:
        early = False
    params = next((e["value"] for e in reversed(events) if e["kind"] == "params"), None)
    return {
        "updates": updates,
        "selected_update": step,
        "selected_checkpoint": str(checkpoint),
        "wall_to_selected_s": at["wall_s"],
        "wall_total_s": round(sum(attempt_seconds(a, events) for a in attempts), 1),
        "cpu_to_selected_s": at.get("cpu_s"),
        "cpu_total_s": cpu_total(attempts, events),
        "stopped": "early stopping on dev"
        if early
        else ("update limit of the scale" if job.scale.max_updates else "epoch limit"),
        "end_message": [e.get("value") for e in ends if e.get("value")],
        "peak_rss_mib": max((a.get("peak_rss_mib") or 0.0) for a in attempts),
        "attempts": len(attempts),
        "parameters": params,
        "series": points,
    }


def cpu_total(attempts: list[dict[str, Any]], events: list[dict[str, Any]]) -> float | None:
    """Every attempt's CPU seconds, summed (None where one is unknown)."""
    used = [attempt_cpu(a, events) for a in attempts]
    return None if any(u is None for u in used) else round(sum(used), 1)


# -------------------------------------------------------------------------------------------------------- decode


def decode(job: Job, checkpoint: Path, split: str, out: Path, scorer: Scorer) -> dict[str, Any]:
    """The tool's own command on one test set, scored. :returns: the result (also ``out/result.json``)."""
    log = out / "decode.log"
    cmd = job.system.test_command(job, checkpoint, split, out)
    rc, seconds, rss, _ = run_process(cmd, log)
    text = log.read_text(encoding="utf-8", errors="replace")
    if rc != 0:
        raise JobFailed(f"{job.id}: decoding {split} exited with status {rc} (log {log}):\n{tail(log)}")
    output, tool_seconds = job.system.test_output(out, split, text)
    if "bpe" in output:
        plain, tokenised = scorer.postprocess(output["bpe"])
    else:
        plain, tokenised = output["plain"], output["tokenised"]
    expected = len(scorer.references(split)[0])
    if len(plain) != expected:
        raise JobFailed(f"{job.id}: {split}: {len(plain)} translations for {expected} sources (log {log})")
    scores, stats = scorer.score(split, plain, tokenised)
    return {
        "split": split,
        "sentences": expected,
        "command": cmd,
        "decode_seconds": None if tool_seconds is None else round(tool_seconds, 2),
        "process_seconds": round(seconds, 2),
        "peak_rss_mib": round(rss, 1),
        "scores": scores,
        "plain": plain,
        "tokenised": tokenised,
        "stats": stats,
    }


def test_all(job: Job, fit: dict[str, Any], scorer: Scorer, echo) -> dict[str, dict[str, Any]]:
    results = {}
    for name, split in TESTS.items():
        out = job.work / "test" / split
        done = out / "result.json"
        if done.is_file():
            results[name] = read_json(done)
            continue
        echo(f"{job.id}: decoding {name} (beam 5)")
        result = decode(job, Path(fit["selected_checkpoint"]), split, out, scorer)
        write_json(done, result)
        results[name] = result
        scores = result["scores"]
        echo(f"{job.id}: {name} BLEU {scores['bleu']['score']:.2f} (tokenised {scores['bleu_tok']['score']:.2f})")
    return results


# -------------------------------------------------------------------------------------------------------- record


def write_record(
    job: Job, ident: dict[str, Any], fit: dict[str, Any], tests: dict[str, dict[str, Any]], results: Path
) -> dict[str, Any]:
    """Hypotheses, statistics, then the record (atomically, last)."""
    hyp_dir = results / "hypotheses" / job.id
    for name, result in tests.items():
        write_lines_gz(hyp_dir / f"{name}.txt.gz", result["plain"])
        write_lines_gz(hyp_dir / f"{name}.tok.txt.gz", result["tokenised"])
    path = record_path(results, job.id)
    stats = {name: result["stats"] for name, result in tests.items()}
    write_bytes(path.with_name(f"{job.id}.sentences.json.gz"), gzip_bytes(json.dumps(stats).encode()))
    record = {
        "version": RECORD_VERSION,
        "complete": True,
        "job": job.id,
        "system": job.system.name,
        "label": job.system.label,
        "seed": job.seed,
        "scale": job.scale.name,
        "scale_description": job.scale.description,
        "identity": ident["hash"],
        "tool": {"name": job.system.tool, **job.system.version()},
        "config": ident["config"],
        "data": ident["data"],
        "machine": machine(),
        "harness": harness_code(),
        "training": {k: v for k, v in fit.items() if k != "series"},
        "dev_bleu_variant": job.system.dev_bleu_variant,
        "series": fit["series"],
        "tests": {
            name: {
                "split": r["split"],
                "sentences": r["sentences"],
                "bleu": r["scores"]["bleu"],
                "bleu_tok": r["scores"]["bleu_tok"],
                "decode_seconds": r["decode_seconds"],
                "process_seconds": r["process_seconds"],
                "sentences_per_s": None if not r["decode_seconds"] else round(r["sentences"] / r["decode_seconds"], 2),
                "command": r["command"],
                "hypotheses": f"hypotheses/{job.id}/{name}.txt.gz",
                "hypotheses_tokenized": f"hypotheses/{job.id}/{name}.tok.txt.gz",
            }
            for name, r in tests.items()
        },
        "finished": now_iso(),
    }
    write_json(path, record)
    return record


def run_job(job: Job, manifest: dict[str, Any], results: Path, scorer: Scorer, echo=print) -> dict[str, Any]:
    """Run (or skip, or resume) one job. :returns: its record. :raises JobFailed: when its tool fails."""
    ident = identity(job, manifest)
    done = complete_record(record_path(results, job.id), ident["hash"])
    if done is not None:
        echo(f"{job.id}: complete record, skipped")
        return done
    folder = Folder(job)
    job.work.parent.mkdir(parents=True, exist_ok=True)
    lock_path = job.work.with_name(f".{job.work.name}.lock")
    import fcntl

    with open(lock_path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            raise JobFailed(f"{job.id}: another driver runs this job now ({lock_path} is locked)") from err
        folder.claim(ident, echo)
        fit = train(job, folder, echo, scorer)
        echo(
            f"{job.id}: trained {fit['updates']} updates in {fit['wall_total_s']:.0f} s; selected update "
            f"{fit['selected_update']} at {fit['wall_to_selected_s']:.0f} s ({fit['stopped']})"
        )
        tests = test_all(job, fit, scorer, echo)
        return write_record(job, ident, fit, tests, results)
