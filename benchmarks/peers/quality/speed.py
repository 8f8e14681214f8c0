"""Beam-5 translation of test2016 with each tool's own command, one system at a time, in one sitting (``speed.json``).

The test decodings of the jobs (:func:`benchmarks.peers.quality.runner.test_all`) may run beside another job's
training; this pass times each system alone: the selected checkpoint of its lowest seed with a complete record,
``rounds`` rounds, the systems alternating within each round (so that a slow moment of a shared machine does not
fall on one system only). Sentences/s is over the decoding time each tool reports itself (sarnmt ``evaluate``'s
``seconds``, JoeyNMT's "Generation took", fairseq-generate's "Translated ... in"), which leaves out loading the
model and the data; the process's whole wall time is kept beside it. The median over the rounds is the figure.
"""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path
from typing import Any

from benchmarks.peers.quality import runner
from benchmarks.peers.quality.machine import harness_code, machine
from benchmarks.peers.quality.scoring import Scorer
from benchmarks.peers.quality.systems import Job
from sarnmt.sweep.records import write_json

SPLIT = "test"  # test2016


def measure(jobs: list[Job], results: Path, scorer: Scorer, rounds: int = 2, echo=print) -> dict[str, Any] | None:
    """Time every system that has a complete record; write ``<results>/speed.json``. None when none has one."""
    chosen: dict[str, tuple[Job, dict[str, Any]]] = {}
    for job in sorted(jobs, key=lambda j: j.seed):
        record = runner.complete_record(runner.record_path(results, job.id))
        if record is not None and job.system.name not in chosen:
            chosen[job.system.name] = (job, record)
    if not chosen:
        return None
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in chosen}
    for k in range(rounds):
        for name, (job, record) in chosen.items():
            out = job.work / "speed" / f"round-{k + 1}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            checkpoint = Path(record["training"]["selected_checkpoint"])
            try:
                result = runner.decode(job, checkpoint, SPLIT, out, scorer)
            except runner.JobFailed as err:
                echo(f"speed: {err}")
                continue
            runs[name].append(
                {k: result[k] for k in ("decode_seconds", "process_seconds", "sentences", "peak_rss_mib")}
            )
            echo(f"speed: {name} round {k + 1}: {result['sentences']} sentences in {result['decode_seconds']} s")
    systems = {}
    for name, items in runs.items():
        timed = [r for r in items if r["decode_seconds"]]
        if not timed:
            continue
        seconds = statistics.median(r["decode_seconds"] for r in timed)
        systems[name] = {
            "job": chosen[name][0].id,
            "sentences": timed[0]["sentences"],
            "decode_seconds_median": round(seconds, 2),
            "sentences_per_s": round(timed[0]["sentences"] / seconds, 2),
            "process_seconds_median": round(statistics.median(r["process_seconds"] for r in timed), 2),
            "runs": items,
        }
    report = {"test": "test2016", "beam": 5, "rounds": rounds, "machine": machine(), "harness": harness_code()}
    report["systems"] = systems
    write_json(results / "speed.json", report)
    return report
