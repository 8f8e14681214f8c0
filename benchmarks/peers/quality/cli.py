"""``python -m benchmarks.peers.quality`` (``make peers-quality``): sarnmt's baseline beside JoeyNMT and fairseq on
Multi30K En->De, to the same quality: BLEU and time to BLEU.

- ``run``: export the text (:mod:`~benchmarks.peers.quality.data`), train every available system x seed to its
  own early stopping (two jobs at a time, one thread each; resumable: run it again after a kill), decode and score
  the test sets, time beam-5 translation of test2016 one system at a time (``speed.json``), render the table.
- ``render``: the table, the seed-aware tests and the figure from the records (:mod:`~benchmarks.peers.quality.
  render`).
- ``status``: where every job is (complete, training: last validation, failed, not started).
- ``speed``: the one-at-a-time translation timing of ``run`` alone (:mod:`~benchmarks.peers.quality.speed`), over
  the systems that have a complete record so far: to time again, on a machine made quiet for it, without training.
- ``profile``: where one training update's time goes in each system, on the same batch, one thread each
  (:mod:`~benchmarks.peers.quality.profile`; ``sweeps/results/peers-quality/profile/``).

``--scale smoke`` runs a few dozen updates per system into ``outputs/peers-quality/smoke/`` (its records under
``outputs/peers-quality/smoke/results``), to see the harness work end to end in minutes; ``--scale full``
(default) writes ``sweeps/results/peers-quality/``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from benchmarks.peers.quality import profile, render, runner, speed
from benchmarks.peers.quality.data import export
from benchmarks.peers.quality.machine import machine
from benchmarks.peers.quality.scoring import Scorer
from benchmarks.peers.quality.systems import PEERS, ROOT, SCALES, Job, all_systems
from sarnmt.sweep.records import write_json

OUTPUTS = ROOT / "outputs" / "peers-quality"
RESULTS = ROOT / "sweeps" / "results" / "peers-quality"
_PRINT = threading.Lock()


def echo(message: str) -> None:
    with _PRINT:
        print(message, flush=True)


def folders(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """``(exported text, job folders, results)`` of the scale."""
    work = (args.work or OUTPUTS / args.scale).resolve()
    results = args.results or (RESULTS if args.scale == "full" else work / "results")
    return OUTPUTS / "data", work / "runs", results.resolve()


def plan(args: argparse.Namespace, data: Path, runs: Path) -> tuple[list[Job], dict[str, dict]]:
    """The jobs of the available systems, seed by seed (so that two jobs at once are of different systems), and
    every system's status."""
    scale = SCALES[args.scale]
    systems, status = [], {}
    for system in all_systems():
        if args.systems and system.name not in args.systems:
            continue
        why = system.unavailable()
        status[system.name] = {"label": system.label, "tool": system.tool, "status": why or "run"}
        if why:
            echo(f"{system.name}: {why}")
        else:
            systems.append(system)
    jobs = [Job(s, seed, scale, data, runs / f"{s.name}.s{seed}") for seed in args.seeds for s in systems]
    return jobs, status


def cmd_run(args: argparse.Namespace) -> int:
    data, runs, results = folders(args)
    manifest = export(data)
    echo(f"text: {data} ({manifest['lines']['train']:,} training pairs, vocabularies {manifest['vocab']})")
    jobs, status = plan(args, data, runs)
    results.mkdir(parents=True, exist_ok=True)
    known = render.read_optional(results / "systems.json").get("systems", {})  # systems of earlier runs stay
    write_json(results / "systems.json", {"scale": args.scale, "machine": machine(), "systems": known | status})
    scorer = Scorer(data)
    failed = []

    def stop(signum, frame):  # noqa: ARG001
        echo(f"signal {signum}: stopping the trainings (each resumes on the next run)")
        runner.stop_children()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(runner.run_job, job, manifest, results, scorer, echo): job for job in jobs}
            for future in as_completed(futures):
                try:
                    future.result()
                except runner.JobFailed as err:
                    failed.append(str(err))
                    echo(f"FAILED {err}")
                except Exception as err:  # a bug of the harness: the other jobs go on; it is reported at the end
                    job = futures[future]
                    failed.append(f"{job.id}: {type(err).__name__}: {err}")
                    echo(f"FAILED {job.id}:\n{''.join(traceback.format_exception(err))}")
    except KeyboardInterrupt:
        runner.stop_children()
        echo("stopped; run the same command again to resume")
        return 130
    if not args.no_speed:
        speed.measure(jobs, results, scorer, rounds=args.speed_rounds, echo=echo)
    render.render(results, figure_note=SCALES[args.scale].description, echo=echo)
    for message in failed:
        echo(f"FAILED {message.splitlines()[0]}")
    return 1 if failed else 0


def cmd_speed(args: argparse.Namespace) -> int:
    data, runs, results = folders(args)
    export(data)
    jobs, _ = plan(args, data, runs)
    if speed.measure(jobs, results, Scorer(data), rounds=args.speed_rounds, echo=echo) is None:
        echo(f"speed: no system has a complete record in {results / 'records'}: nothing to time")
        return 1
    echo(f"speed: written {results / 'speed.json'}")
    render.render(results, figure_note=SCALES[args.scale].description, echo=echo)
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    _, _, results = folders(args)
    render.render(results, figure_note=SCALES[args.scale].description, echo=echo)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    data, runs, results = folders(args)
    jobs = [
        Job(s, seed, SCALES[args.scale], data, runs / f"{s.name}.s{seed}") for seed in args.seeds for s in all_systems()
    ]
    unavailable = {s.name: s.unavailable() for s in all_systems()}
    for job in jobs:
        if runner.complete_record(runner.record_path(results, job.id)) is not None:
            echo(f"{job.id}: complete")
            continue
        folder = runner.Folder(job)
        attempts, events = folder.attempts(), folder.events()
        valid = [e for e in events if e["kind"] == "valid"]
        if not attempts:
            echo(f"{job.id}: {unavailable[job.system.name] or 'not started'}")
            continue
        last = f", last validation: update {valid[-1]['step']}, dev cost {valid[-1]['dev_loss']:.3f}" if valid else ""
        state = "trained, decoding" if (job.work / "fit.json").is_file() else "training or stopped"
        echo(f"{job.id}: {state}, {len(attempts)} attempt(s){last}")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    data = args.data or OUTPUTS / "data"
    if args.data is None:
        export(data)
    missing = [name for name in ("train.bpe.en", "train.bpe.de", "pipeline.json") if not (data / name).is_file()]
    if missing:
        print(f"error: --data {data}: no {', '.join(missing)} (the exported text: data.py)", file=sys.stderr)
        return 2
    if args.repeats < 1:
        print(f"error: --repeats {args.repeats}: must be at least 1", file=sys.stderr)
        return 2
    report = profile.profile(
        data, args.out, peers_dir=args.peers_dir, systems=args.systems, repeats=args.repeats, echo=echo
    )
    echo(f"profile: {args.out / 'profile.md'}")
    failed = [c["not_run"] for c in report["systems"].values() if "failed" in c.get("not_run", "")]
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.peers.quality",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n"
        "  python -m benchmarks.peers.quality run                  # the real runs, hours; resumable\n"
        "  python -m benchmarks.peers.quality run --scale smoke --seeds 1\n"
        "  python -m benchmarks.peers.quality status\n"
        "  python -m benchmarks.peers.quality speed               # time translation again, no training\n"
        "  python -m benchmarks.peers.quality render\n"
        "  python -m benchmarks.peers.quality profile --data outputs/peers-quality/data",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name, helptext in (
        ("run", "train, decode, score, time, render"),
        ("render", "table and figure"),
        ("status", "jobs"),
        ("speed", "beam-5 translation of test2016, one system at a time, from the complete records"),
    ):
        q = sub.add_parser(name, help=helptext)
        q.add_argument("--scale", choices=sorted(SCALES), default="full")
        q.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
        q.add_argument("--work", type=Path, default=None, help="job folders (default outputs/peers-quality/SCALE)")
        q.add_argument("--results", type=Path, default=None, help="records, table, figure")
        if name in ("run", "speed"):
            q.add_argument("--systems", nargs="+", default=None, help="sarnmt_fp32 sarnmt_bf16 joeynmt fairseq")
            q.add_argument("--speed-rounds", type=int, default=2, help="rounds of the translation timing")
        if name == "run":
            q.add_argument("--jobs", type=int, default=2, help="jobs at a time (each one thread)")
            q.add_argument("--no-speed", action="store_true", help="skip the one-at-a-time translation timing")
    q = sub.add_parser("profile", help="one training update of each system, profiled on the same batch")
    q.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the exported text (default outputs/peers-quality/data, exported there if missing)",
    )
    q.add_argument("--peers-dir", type=Path, default=PEERS, help="the peers' venvs: <dir>/joeynmt, <dir>/fairseq")
    q.add_argument("--out", type=Path, default=RESULTS / "profile", help="profile.json and profile.md")
    q.add_argument("--systems", nargs="+", choices=profile.COLUMNS, default=None)
    q.add_argument("--repeats", type=int, default=5, help="timed updates per system (and as many profiled)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    commands = {"run": cmd_run, "render": cmd_render, "status": cmd_status, "speed": cmd_speed, "profile": cmd_profile}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
