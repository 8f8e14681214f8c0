"""The quality comparison's table, tests and figure, from the records (``README.md`` and ``dev_bleu_vs_time.png`` in
the results folder).

- **BLEU**: mean ± sample sd over the seeds of each system, per test set (sacrebleu 13a on detokenised output v. the
  raw references; the tokenised form below it), from complete records only (:func:`benchmarks.peers.quality.runner.
  complete_record`: a killed run has no record, and a half-written file is not one).
- **Time**: wall and CPU time to the selected checkpoint, wall time in all (mean over seeds), and each system's time
  to its selected checkpoint ÷ sarnmt's (above 1: sarnmt is faster), by CPU time where every run measured it (one
  thread per job: robust to the machine's other load), else by wall time; fp32 and, where it ran, bf16.
- **Where the time goes** (:mod:`benchmarks.peers.quality.breakdown`): each system's updates to its selected
  checkpoint, CPU seconds per update within an attempt, their product (the uninterrupted CPU time), the measured CPU
  time and the share re-done after resumes; per peer, sarnmt's time ÷ the peer's as the updates ratio × the
  CPU-per-update ratio. The time goal is checked by the uninterrupted CPU time where every run has it, else by the
  measured time of the table; its line names the clock.
- **One update, profiled** (``profile/profile.json``, :mod:`benchmarks.peers.quality.profile`, where it exists):
  each system's CPU time per update on the same batch, its matrix products' time and FLOPs per target token, and
  whether a 2× faster update than the fastest peer's is within reach of sarnmt's matrix products.
- **Translation**: beam-5 sentences/s on test2016 from ``speed.json`` (one system at a time), and sarnmt's ÷ each
  system's (above 1: sarnmt is faster).
- **The seed-aware test** (:func:`sarnmt.sweep.seed_tests.compare_cells`, the tables' test: Welch's test on the seed
  means with the test set's resampling variance), one-sided, H1 "the peer's BLEU is higher than sarnmt fp32's".
- A system without records is a row that says so: "not run" with the reason (not installed, CPU lacks bf16).
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.peers.quality import breakdown
from benchmarks.peers.quality.data import TESTS
from benchmarks.peers.quality.runner import complete_record
from sarnmt.sweep.seed_tests import compare_cells
from sarnmt.utils.atomic import write_text

ORDER = ("sarnmt_fp32", "sarnmt_bf16", "joeynmt", "fairseq")
BASE = "sarnmt_fp32"
LABELS = {
    "sarnmt_fp32": "sarnmt baseline (fp32)",
    "sarnmt_bf16": "sarnmt baseline (bf16)",
    "joeynmt": "JoeyNMT 2.3.0 (GRU)",
    "fairseq": "fairseq 0.12.2 (LSTM)",
}
FIGURE = "dev_bleu_vs_time.png"
SPEED_GOAL = 2.0  # sarnmt at least 2x faster to its selected checkpoint than the fastest peer


def load(results: Path) -> dict[str, list[dict[str, Any]]]:
    """Complete records by system, seed order; each with its per-sentence statistics under ``_stats``."""
    by_system: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((results / "records").glob("*.json")):
        record = complete_record(path)
        if record is None:
            continue
        stats_path = path.with_name(f"{record['job']}.sentences.json.gz")
        try:
            with gzip.open(stats_path, "rt") as handle:
                record["_stats"] = json.load(handle)
        except (OSError, ValueError):
            continue  # a record without its statistics is not complete either
        by_system.setdefault(record["system"], []).append(record)
    for records in by_system.values():
        records.sort(key=lambda r: r["seed"])
    return by_system


def mean_sd(values: list[float], digits: int = 2) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def wall(records: list[dict[str, Any]], key: str) -> float | None:
    values = [r["training"][key] for r in records if r["training"].get(key) is not None]
    return statistics.fmean(values) if values else None


def clock(by_system: dict[str, list[dict[str, Any]]]) -> str:
    """The clock the systems are compared by: ``"cpu"`` (one thread each: robust to the machine's other load) where
    every run of every system measured its CPU time, else ``"wall"``."""
    runs = [r for rs in by_system.values() for r in rs]
    return "cpu" if runs and all(r["training"].get("cpu_to_selected_s") is not None for r in runs) else "wall"


def runs(records: list[dict[str, Any]], test: str, metric: str) -> list[np.ndarray]:
    return [np.asarray(r["_stats"][test][metric], dtype=np.float64) for r in records]


def seed_tests(by_system: dict[str, list[dict[str, Any]]], metric: str = "bleu") -> dict[tuple[str, str], Any]:
    """``{(peer, test): Comparison}``: each peer against sarnmt fp32, H1 "the peer is better"."""
    base = by_system.get(BASE, [])
    out = {}
    for name, records in by_system.items():
        if name == BASE or not base:
            continue
        for test in TESTS:
            out[name, test] = compare_cells(runs(records, test, metric), runs(base, test, metric), metric)
    return out


def status_of(systems: dict[str, Any], name: str, by_system: dict[str, list]) -> str:
    """What a system's row says: ``run`` (it has records), the reason it cannot run here, that its runs have not
    finished (a system ``run`` planned, without a record yet), or that it was never planned."""
    if by_system.get(name):
        return "run"
    given = systems.get(name, {}).get("status")
    if given and given != "run":
        return given
    if given == "run":
        return "no record yet: its runs have not finished"
    return "not run: no records"


def table(by_system: dict[str, list[dict[str, Any]]], systems: dict[str, Any], speed: dict[str, Any]) -> str:
    """The markdown of the BLEU and time table."""
    names = [*ORDER, *(n for n in [*systems, *by_system] if n not in ORDER)]
    names = list(dict.fromkeys(names))
    header = (
        "| system | seeds | test2016 | test2017 | test2018 | test2016 (tok) | updates: selected / all | "
        "time to selected (wall; CPU) | time in all (wall) | peak RSS | this ÷ sarnmt fp32 time | "
        "this ÷ sarnmt bf16 time | test2016 sent/s | sarnmt sent/s ÷ this |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    key = f"{clock(by_system)}_to_selected_s"
    base_time = {p: wall(by_system.get(f"sarnmt_{p}", []), key) for p in ("fp32", "bf16")}
    base_speed = speed.get(BASE, {}).get("sentences_per_s")
    for name in names:
        records = by_system.get(name, [])
        label = LABELS.get(name, name)
        if not records:
            lines.append(f"| {label} | – | {status_of(systems, name, by_system)} |" + " |" * 11)
            continue
        bleu = {t: [r["tests"][t]["bleu"]["score"] for r in records] for t in TESTS}
        tok = [r["tests"]["test2016"]["bleu_tok"]["score"] for r in records]
        selected = [r["training"]["selected_update"] for r in records]
        updates = [r["training"]["updates"] for r in records]
        to_selected = wall(records, "wall_to_selected_s")
        cpu_to_selected = wall(records, "cpu_to_selected_s")
        mine = wall(records, key)
        ratios = []
        for p in ("fp32", "bf16"):
            ok = base_time[p] and mine is not None
            ratios.append(f"{mine / base_time[p]:.2f}" if ok else "–")
        sps = speed.get(name, {}).get("sentences_per_s")
        rss = max(r["training"]["peak_rss_mib"] for r in records)
        lines.append(
            f"| {label} | {len(records)} | {mean_sd(bleu['test2016'])} | {mean_sd(bleu['test2017'])} | "
            f"{mean_sd(bleu['test2018'])} | {mean_sd(tok)} | {mean_sd(selected, 0)} / {mean_sd(updates, 0)} | "
            f"{duration(to_selected)}; {duration(cpu_to_selected)} | {duration(wall(records, 'wall_total_s'))} | "
            f"{rss:,.0f} MiB | "
            f"{ratios[0]} | {ratios[1]} | {'–' if sps is None else f'{sps:.1f}'} | "
            f"{f'{base_speed / sps:.2f}' if base_speed and sps else '–'} |"
        )
    return "\n".join(lines)


def tests_table(by_system: dict[str, list[dict[str, Any]]]) -> str:
    comparisons = seed_tests(by_system)
    if not comparisons:
        return "No seed-aware test yet: it needs records of sarnmt fp32 and of a peer."
    lines = [
        "| peer | test set | Δ BLEU (peer − sarnmt fp32) | 95% interval | one-sided p (peer better) | runs | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for (name, test), c in comparisons.items():
        if c.p_seed is None:
            lines.append(
                f"| {LABELS.get(name, name)} | {test} | {c.difference:+.2f} | – | {c.seed_test_note} | "
                f"{c.runs[0]} v {c.runs[1]} | – |"
            )
            continue
        verdict = "peer better" if c.p_seed < 0.05 else "peer not better"
        lines.append(
            f"| {LABELS.get(name, name)} | {test} | {c.difference:+.2f} | [{c.low:+.2f}, {c.high:+.2f}] | "
            f"{c.p_seed:.3f} | {c.runs[0]} v {c.runs[1]} | {verdict} |"
        )
    return "\n".join(lines)


def goals(by_system: dict[str, list[dict[str, Any]]]) -> str:
    """The two goals, checked (or why not yet)."""
    peers = [n for n in by_system if not n.startswith("sarnmt_")]
    if BASE not in by_system or not peers:
        return "- Not checked yet: the goals need records of sarnmt and of at least one peer."
    out = []
    comparisons = seed_tests(by_system)
    tested = [c for c in comparisons.values() if c.p_seed is not None]
    better = [
        f"{LABELS.get(n, n)} on {t}" for (n, t), c in comparisons.items() if c.p_seed is not None and c.p_seed < 0.05
    ]
    if not tested:
        out.append("- BLEU: not testable yet (the seed-aware test needs two runs a side).")
    elif better:
        out.append(f"- BLEU: **not met**: better than sarnmt's baseline by the seed-aware test: {', '.join(better)}.")
    else:
        out.append("- BLEU: **met**: no peer is better than sarnmt's baseline by the seed-aware test (p < 0.05).")
    out.append(time_goal(by_system, peers))
    return "\n".join(out)


def goal_precision(by_system: dict[str, list[dict[str, Any]]]) -> str:
    """The sarnmt the time goal is about: bf16 where it ran, else fp32."""
    return "bf16" if by_system.get("sarnmt_bf16") else "fp32"


def time_goal(by_system: dict[str, list[dict[str, Any]]], peers: list[str]) -> str:
    """The time goal's line: by the uninterrupted CPU time (:mod:`benchmarks.peers.quality.breakdown`) where every run
    has it, else by the measured time of :func:`clock`; the line names its clock, and where the goal is missed, by
    how much and the two factors of the uninterrupted time ratio."""
    precision = goal_precision(by_system)
    mine_name = f"sarnmt_{precision}"
    split = {n: breakdown.system_time(rs) for n, rs in by_system.items() if rs}
    uninterrupted = all(s.uninterrupted is not None for s in split.values())
    if uninterrupted:
        times = {n: s.uninterrupted for n, s in split.items()}
        how = (
            "uninterrupted CPU time, which every run has: updates × CPU per update within an attempt, the work "
            "re-done after resumes left out"
        )
    else:
        measured = clock(by_system)
        times = {n: wall(rs, f"{measured}_to_selected_s") for n, rs in by_system.items()}
        lacking = [job for s in split.values() for job in s.without_rate]
        how = (
            f"measured {'CPU' if measured == 'cpu' else 'wall'} time, summed over the attempts, re-done work "
            f"included: no uninterrupted time for {', '.join(lacking)} (no two validations in one attempt)"
        )
    mine = times[mine_name]
    fastest = min(peers, key=lambda n: times[n])
    factor = times[fastest] / mine
    line = (
        f"- Time to the selected checkpoint ({how}): sarnmt {precision} {duration(mine)}, the fastest peer "
        f"({LABELS.get(fastest, fastest)}) {duration(times[fastest])}: sarnmt is {factor:.2f}× as fast; the goal "
        f"(≥ {SPEED_GOAL:.0f}×) is "
    )
    if factor >= SPEED_GOAL:
        return line + "met."
    line += f"**not met**, by a factor of {SPEED_GOAL / factor:.2f}"
    split_factors = breakdown.factors(split[mine_name], split[fastest]) if uninterrupted else None
    if split_factors is None:
        return line + "."
    return (
        line + f": sarnmt takes {split_factors.time:.2f}× {LABELS.get(fastest, fastest)}'s time = "
        f"{split_factors.updates:.2f}× its updates × {split_factors.per_update:.2f}× its CPU per update."
    )


def where_time_goes(by_system: dict[str, list[dict[str, Any]]]) -> str:
    """The section "Where the time goes": each system's updates to its selected checkpoint, CPU per update, the
    uninterrupted and the measured CPU time to it and the re-done share (:mod:`benchmarks.peers.quality.breakdown`),
    then one sentence per peer: sarnmt's uninterrupted time ÷ the peer's as the updates ratio × the CPU-per-update
    ratio."""
    names = [n for n in [*ORDER, *by_system] if by_system.get(n)]
    names = list(dict.fromkeys(names))
    split = {n: breakdown.system_time(by_system[n]) for n in names}
    lines = [
        "CPU per update: the median, over the intervals between consecutive validations of one attempt (validation "
        "included), of the CPU seconds ÷ the updates; uninterrupted CPU to selected: updates to selected × CPU per "
        "update (no kill, start-up left out); measured: summed over the attempts; re-done share: measured ÷ "
        "uninterrupted − 1 (the work re-done after resumes and the start-ups). Means over the seeds; a system's CPU "
        "per update is its uninterrupted time ÷ its updates.",
        "",
        "| system | updates to selected | CPU s per update | uninterrupted CPU to selected | measured CPU to selected "
        "| re-done share |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        s = split[name]
        rate = "–" if s.per_update is None else f"{s.per_update:.3f}"
        redone = "–" if s.redone is None else f"{s.redone:+.0%}"
        lines.append(
            f"| {LABELS.get(name, name)} | {s.updates:,.0f} | {rate} | {duration(s.uninterrupted)} | "
            f"{duration(s.measured)} | {redone} |"
        )
    lacking = [job for s in split.values() for job in s.without_rate]
    if lacking:
        lines += ["", f"No two validations in one attempt (so no CPU per update): {', '.join(lacking)}."]
    mine_name = f"sarnmt_{goal_precision(by_system)}"
    peers = [n for n in names if not n.startswith("sarnmt_")]
    if mine_name in split and peers:
        lines.append("")
        mine_label = LABELS.get(mine_name, mine_name)
        for peer in peers:
            f = breakdown.factors(split[mine_name], split[peer])
            label = LABELS.get(peer, peer)
            if f is None:
                lines.append(f"- {label}: not split: a run of it or of {mine_label} has no CPU per update.")
                continue
            m, p = split[mine_name], split[peer]
            lines.append(
                f"- {label}: {mine_label}'s uninterrupted CPU time to its selected checkpoint is {f.time:.2f}× "
                f"{label}'s = {f.updates:.2f}× the updates ({m.updates:,.0f} v {p.updates:,.0f}) × "
                f"{f.per_update:.2f}× the CPU per update ({m.per_update:.3f} s v {p.per_update:.3f} s)."
            )
    return "\n".join(lines)


def figure(by_system: dict[str, list[dict[str, Any]]], path: Path, note: str = "") -> tuple[str, ...]:
    """Dev BLEU against time, one line per run, one colour per system, the selected checkpoint marked. The left panel
    is on the table's clock (:func:`clock`: the training process's CPU time where every run measured it, which
    resumes and a busy machine do not stretch); where that is CPU time, a right panel gives the wall time as it was
    measured (since the start of training, summed over the attempts: the machine's other load and the restarts
    included). :returns: the panels' time keys, left to right (``("cpu_s", "wall_s")`` or ``("wall_s",)``); empty
    when there is nothing to draw."""
    if not by_system:
        return ()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ("cpu_s", "wall_s") if clock(by_system) == "cpu" else ("wall_s",)
    fig, axes = plt.subplots(1, len(keys), figsize=(14, 5.5) if len(keys) == 2 else (9, 5.5))
    axes = list(np.atleast_1d(axes))
    for ax, key in zip(axes, keys, strict=True):
        _figure_panel(ax, by_system, key)
    axes[0].legend(loc="best", fontsize=9, title="one line per seed", title_fontsize=8)
    title = "Multi30K En→De dev BLEU against time (circle: the selected checkpoint)"
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=10)
    fig.text(
        0.01,
        0.01,
        "sarnmt: sacrebleu 13a on detokenised output v. raw references; JoeyNMT, fairseq: tokenised BLEU v. "
        "tokenised references",
        fontsize=7,
        color="0.35",
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return keys


def _figure_panel(ax: Any, by_system: dict[str, list[dict[str, Any]]], key: str) -> None:
    """One panel of :func:`figure`: every run's dev BLEU against the time ``key`` (``cpu_s`` or ``wall_s``)."""
    colours = {"sarnmt_fp32": "tab:blue", "sarnmt_bf16": "tab:cyan", "joeynmt": "tab:orange", "fairseq": "tab:green"}
    longest = max((p.get(key) or 0.0) for rs in by_system.values() for r in rs for p in r["series"]) or 1.0
    scale, unit = (3600.0, "h") if longest >= 3 * 3600 else (60.0, "min")
    for name in [n for n in ORDER if n in by_system] + [n for n in by_system if n not in ORDER]:
        for k, record in enumerate(by_system[name]):
            points = [p for p in record["series"] if p.get("dev_bleu") is not None and p.get(key) is not None]
            if not points:
                continue
            x = [p[key] / scale for p in points]
            y = [p["dev_bleu"] for p in points]
            label = f"{LABELS.get(name, name)}" if k == 0 else None
            ax.plot(x, y, color=colours.get(name), alpha=0.85, lw=1.4, label=label)
            chosen = [p for p in points if p["update"] == record["training"]["selected_update"]]
            if chosen:
                ax.plot(
                    chosen[0][key] / scale,
                    chosen[0]["dev_bleu"],
                    "o",
                    color=colours.get(name),
                    ms=7,
                    markeredgecolor="black",
                )
    if key == "cpu_s":
        ax.set_title("CPU time (the table's clock)", fontsize=9)
        ax.set_xlabel(f"CPU time of the training process, summed over its attempts ({unit}), one thread")
    else:
        ax.set_title("wall time, as measured on the shared machine", fontsize=9)
        ax.set_xlabel(f"wall time since the start of training, summed over its attempts ({unit})")
    ax.set_ylabel("dev BLEU (greedy; each tool's, see the note below)")
    ax.grid(alpha=0.3)


def read_optional(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def update_profile(results: Path) -> str:
    """The section "One update, profiled", from ``profile/profile.json``
    (:mod:`benchmarks.peers.quality.profile`; empty where there is none): each system's CPU milliseconds per update on
    the same batch, its matrix products' time (in the profiled update: large operators, which the profiler hardly
    slows) and share, its FLOPs per target token; sarnmt's update ÷ the fastest peer's, and what a 2× faster update
    would have to take beside what sarnmt's matrix products alone take."""
    info = read_optional(results / "profile" / "profile.json")
    columns = {n: c for n, c in info.get("systems", {}).items() if c and c.get("update_ms")}
    if BASE not in columns:
        return ""
    batch, machine = info.get("batch", {}), info.get("machine", {})
    flags = [f for f, on in machine.get("flags", {}).items() if on]
    lines = [
        f"One training update of each system on the same batch of {batch.get('sentences', '?')} pairs "
        f"({batch.get('tgt_tokens', 0):,} target tokens), one thread, {machine.get('cpu', '?')} "
        f"({', '.join(flags) or 'no flags'}), load average {info.get('load', {}).get('before', '?')} before "
        "([profile/profile.md](profile/profile.md), `python -m benchmarks.peers.quality profile`):",
        "",
    ]
    for name in dict.fromkeys(n for n in [*ORDER, *columns] if n in columns):
        c = columns[name]
        mm, share = c["kinds_ms"]["matrix products"], c["kinds_share"]["matrix products"]
        lines.append(
            f"- {LABELS.get(name, name)}: {c['update_ms']:,.0f} CPU ms per update; matrix products {mm:,.0f} ms "
            f"({share:.0%} of the profiled update) at {c['matmul_gflop_s']:.0f} GFLOP/s; "
            f"{c['mflop_per_target_token']:.1f} MFLOP per target token"
        )
    peers = {n: c for n, c in columns.items() if not n.startswith("sarnmt_")}
    if peers:
        fastest = min(peers, key=lambda n: peers[n]["update_ms"])
        mine, theirs = columns[BASE], peers[fastest]
        mm = mine["kinds_ms"]["matrix products"]
        lines += [
            "",
            f"Per update sarnmt is {theirs['update_ms'] / mine['update_ms']:.2f}× as fast as the fastest peer "
            f"({LABELS.get(fastest, fastest)}). An update {SPEED_GOAL:.0f}× as fast as that peer's would take "
            f"{theirs['update_ms'] / SPEED_GOAL:,.0f} ms; sarnmt's matrix products alone take {mm:,.0f} ms "
            f"({mine['mflop_per_target_token']:.1f} against {theirs['mflop_per_target_token']:.1f} MFLOP per target "
            "token, at the same rate), so "
            + (
                "the goal cannot come from the update's speed alone: it needs fewer updates to the selected "
                "checkpoint, or a model with fewer FLOPs per token."
                if mm > theirs["update_ms"] / SPEED_GOAL
                else "the goal is within reach of the update's speed."
            ),
        ]
    return "\n".join(lines)


def render(results: Path, figure_note: str = "", echo=print) -> str:
    """Write ``README.md`` (and the figure) into ``results``. :returns: the markdown."""
    by_system = load(results)
    info = read_optional(results / "systems.json")
    systems = info.get("systems", {})
    speed = read_optional(results / "speed.json").get("systems", {})
    panels = figure(by_system, results / FIGURE, figure_note)
    machine = info.get("machine") or next((r["machine"] for rs in by_system.values() for r in rs), {})
    flags = machine.get("flags", {})
    parts = [
        "# sarnmt beside JoeyNMT and fairseq: BLEU and time to BLEU (Multi30K En→De)",
        "",
        "Written by `python -m benchmarks.peers.quality render` from `records/` (docs/peers-quality.md says how the "
        "runs are made). BLEU: sacrebleu 13a on detokenised output against the raw references, mean ± sd over the "
        "seeds; `(tok)`: tokenised BLEU against the tokenised, truecased references (the form of sarnmt's tables).",
        "",
    ]
    if info.get("scale"):
        parts += [f"Scale: `{info['scale']}`. {figure_note}", ""]
    if not by_system:
        parts += ["**The runs are pending**: no complete record yet.", ""]
    parts += [table(by_system, systems, speed), "", "## The seed-aware test", "", tests_table(by_system), ""]
    parts += ["## The goals", "", goals(by_system), ""]
    if by_system:
        parts += ["## Where the time goes", "", where_time_goes(by_system), ""]
    profiled = update_profile(results)
    if profiled:
        parts += ["## One update, profiled", "", profiled, ""]
    if panels:
        caption = (
            "Left: against the CPU time of the training process, the table's clock. Right: against the wall time "
            "as it was measured, which the machine's other load, pauses and restarts stretch."
            if "cpu_s" in panels
            else "Against the wall time as it was measured (a run lacks its CPU time: the table's clock is wall time)."
        )
        parts += ["## Dev BLEU against time", "", f"![dev BLEU against time]({FIGURE})", "", caption, ""]
    if machine:
        parts += [
            "## Machine",
            "",
            f"{machine.get('cpu')}, {machine.get('cores')} logical cores, {machine.get('memory_gib')} GiB; "
            + ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in flags.items())
            + "; one thread per job, two jobs at a time.",
            "",
        ]
    text = "\n".join(parts)
    write_text(results / "README.md", text)
    echo(f"wrote {results / 'README.md'}" + (f" and {results / FIGURE}" if panels else ""))
    return text
