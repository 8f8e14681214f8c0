"""The benchmark's outputs: a Markdown table with the targets checked, the JSON record, and the plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sarnmt.bench.profile import markdown as profile_table


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "–" if value is None else format(value, spec)


def _workload(work: dict[str, Any]) -> str:
    lengths = ", ".join(f"{s}/{t}" for s, t in work["padded_lengths"])
    return (
        f"workload **{work['name']}**: {work['batches']} of the length-sorted batches of {work['pairs']:,} pairs "
        f"from {work['description']} (source/target lengths with EOS: {lengths}; {work['target_tokens']:,} "
        "target tokens)"
    )


def _mega(value: float | None) -> float | None:
    return None if value is None else value / 1e6


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a / b:.2f}×"


def _both(v: dict[str, Any], key: str, spec: str = ",.0f", scale=lambda x: x) -> str:
    """sarnmt's figure, then the plain and textbook peers' in brackets (– where not timed)."""
    ours = _fmt(scale(v[key]) if v.get(key) is not None else None, spec)
    peers = [_fmt(scale(v[p + key]) if v.get(p + key) is not None else None, spec) for p in ("plain_", "reference_")]
    return f"{ours} ({' / '.join(peers)})"


def header(record: dict[str, Any]) -> str:
    cfg, m = record["config"], record["machine"]
    return (
        f"device {m['device']}{' (' + m['gpu'] + ')' if 'gpu' in m else ''} ({m['cpu']}), {m['threads']} threads, "
        f"torch {m['torch']}; precision {cfg['precision']}; model e={cfg['model']['emb_dim']} "
        f"d={cfg['model']['hidden_dim']} V={cfg['vocab']:,}; batch {cfg['batch_size']} sentences; sarnmt steps "
        f"with {cfg['optim']['_target_']}, its peers with {cfg['reference_optim']['_target_']}"
    )


def table(record: dict[str, Any], run: dict[str, Any]) -> list[str]:
    """One workload's table: sarnmt beside the plain peer and the textbook reference, training and decoding."""
    beam = f"beam{record['config']['decode']['beam_size']}"
    lines = [
        _workload(run["workload"]),
        "",
        "| decoder | parameters | train tok/s (plain / textbook) | × plain | × textbook | slower than baseline "
        "| optimizer ms/step (plain / textbook) | MFLOP/token (plain / textbook) | GFLOP/s (plain / textbook) "
        f"| activations MiB (plain / textbook) | greedy sent/s (plain / textbook) | greedy × plain | {beam} sent/s "
        f"(plain) | {beam} × plain | greedy batched/single | {beam} batched/single |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for v in run["variants"]:
        overhead = v.get("train_overhead_vs_baseline")
        lines.append(
            f"| {v['decoder']} | {v['parameters']:,} | {_both(v, 'train_tok_s')} "
            f"| {_ratio(v['train_tok_s'], v.get('plain_train_tok_s'))} "
            f"| {_ratio(v['train_tok_s'], v.get('reference_train_tok_s'))} "
            f"| {_fmt(None if overhead is None else 100 * overhead, '+.1f')}% "
            f"| {_both(v, 'optimizer_ms', '.1f')} | {_both(v, 'train_flops_per_token', ',.1f', _mega)} "
            f"| {_both(v, 'train_gflop_s')}{_share(v)} | {_both(v, 'activation_mib', '.1f')} "
            f"| {_fmt(v['greedy_batched'], '.1f')} ({_fmt(v.get('plain_greedy_batched'), '.1f')} / "
            f"{_fmt(v.get('reference_greedy_batched'), '.1f')}) "
            f"| {_ratio(v['greedy_batched'], v.get('plain_greedy_batched'))} "
            f"| {_fmt(v[beam + '_batched'], '.1f')} ({_fmt(v.get('plain_' + beam + '_batched'), '.1f')}) "
            f"| {_ratio(v[beam + '_batched'], v.get('plain_' + beam + '_batched'))} "
            f"| {v['greedy_batched'] / v['greedy_single']:.1f}× | {v[beam + '_batched'] / v[beam + '_single']:.1f}× |"
        )
    return lines


PEER_NAMES = {"plain": "the plain peer", "reference": "the textbook reference"}  # else "the peer <name>"


def ratios(record: dict[str, Any], run: dict[str, Any]) -> list[str]:
    """One workload's ratios of sarnmt to each of its peers, measured in the same run on the same batches and weights:
    training tokens/s, the same without the optimizer step, and batched decoding sentences/s (above 1: sarnmt is
    faster). One table per peer that timed a system; none without peers."""
    beam = f"beam{record['config']['decode']['beam_size']}"
    lines: list[str] = []
    for peer in record["config"].get("peers") or {}:
        rows = [v for v in run["variants"] if v.get(f"{peer}_train_tok_s") is not None]
        if not rows:
            continue
        lines += [
            *([""] if lines else []),
            f"sarnmt ÷ {PEER_NAMES.get(peer, 'the peer ' + peer)} on {run['workload']['name']} (this run, same batches "
            "and weights; above 1× sarnmt is faster): training target tokens/s, the same without the optimizer step, "
            "batched decoding sentences/s",
            "",
            f"| decoder | training × {peer} | model only × {peer} | greedy × {peer} | {beam} × {peer} |",
            "|---|---:|---:|---:|---:|",
        ]
        for v in rows:
            lines.append(
                f"| {v['decoder']} | {_ratio(v['train_tok_s'], v[f'{peer}_train_tok_s'])} "
                f"| {_ratio(v['model_tok_s'], v.get(f'{peer}_model_tok_s'))} "
                f"| {_ratio(v['greedy_batched'], v.get(f'{peer}_greedy_batched'))} "
                f"| {_ratio(v[beam + '_batched'], v.get(f'{peer}_{beam}_batched'))} |"
            )
    return lines


def _share(v: dict[str, Any]) -> str:
    return f", {100 * v['share_of_peak']:.0f}% of peak" if "share_of_peak" in v else ""


def markdown(record: dict[str, Any]) -> str:
    lines = [header(record)]
    for run in record["runs"]:
        summary = ratios(record, run)
        lines += ["", *table(record, run), *(["", *summary] if summary else []), "", *checks(record, run)]
        if "profiles" in run:
            lines += [
                "",
                f"Where a training step's time goes ({run['workload']['name']}):",
                "",
                *profile_table(run["profiles"]),
            ]
    return "\n".join(lines)


def checks(record: dict[str, Any], run: dict[str, Any]) -> list[str]:
    """One line per target on one workload: the measured figure, the target, and whether it is met."""
    cfg, targets = record["config"], record["config"]["targets"]
    beam = f"beam{cfg['decode']['beam_size']}"
    out = []
    for v in run["variants"]:
        name = v["decoder"]
        for peer, label in (("plain", "the plain peer"), ("reference", "the textbook reference")):
            if f"train_speedup_vs_{peer}" not in v:
                continue
            target = targets[f"train_speedup_vs_{peer}"]
            ok = v[f"train_speedup_vs_{peer}"] >= target
            work = v[f"{peer}_train_flops_per_token"] / v["train_flops_per_token"]
            out.append(
                f"- {'met ' if ok else 'MISSED'} {name}: trains {v[f'train_speedup_vs_{peer}']:.2f}× as fast "
                f"as {label} (target ≥ {target}×); without the optimizer step "
                f"{v[f'model_speedup_vs_{peer}']:.2f}× ({v['optimizer_ms']:.1f} against "
                f"{v[f'{peer}_optimizer_ms']:.1f} ms per step); {label} does {work:.2f}× the matrix-product "
                f"work, at {v[f'{peer}_train_gflop_s']:,.0f} GFLOP/s against sarnmt's "
                f"{v['train_gflop_s']:,.0f}"
            )
        limit = targets["overhead_vs_baseline"].get(name)
        if limit is not None and "train_overhead_vs_baseline" in v:
            ok = v["train_overhead_vs_baseline"] <= limit
            out.append(
                f"- {'met ' if ok else 'MISSED'} {name}: {100 * v['train_overhead_vs_baseline']:+.1f}% training "
                f"time per token against the baseline (target ≤ {100 * limit:.0f}%)"
            )
        speedup = v[beam + "_batched"] / v[beam + "_single"]
        ok = speedup >= targets["beam_batched_speedup"]
        out.append(
            f"- {'met ' if ok else 'MISSED'} {name}: {beam} over {cfg['batch_size']} sentences at once is "
            f"{speedup:.1f}× as fast per sentence as one at a time "
            f"(target ≥ {targets['beam_batched_speedup']}×)"
        )
    return out


def write(record: dict[str, Any], stem: Path) -> list[Path]:
    """``stem``.json and ``stem``.md (and ``stem``.png when the record has plot series), written whole or not at all.

    :returns: the paths written."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, text in ((".json", json.dumps(record, indent=2)), (".md", markdown(record) + "\n")):
        path = stem.with_suffix(suffix)
        tmp = path.with_suffix(suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    if "series" in record:
        written.append(plot(record, stem.with_suffix(".png")))
    return written


def plot(record: dict[str, Any], path: Path) -> Path:
    """Training tokens/s against sentence length and against batch size, and beam-k sentences/s against batch size
    (where a record has them), one line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = record["config"]
    fig, (left, right, beam) = plt.subplots(1, 3, figsize=(16, 4.2))
    for name, series in record["series"].items():
        left.plot(cfg["plot_lengths"], series["length"], marker="o", label=name)
        right.plot(cfg["plot_batch_sizes"], series["batch"], marker="o", label=name)
        if series.get("beam_batch"):
            beam.plot(cfg["plot_batch_sizes"], series["beam_batch"], marker="o", label=name)
    left.set(
        xlabel="sentence length (tokens, both sides)",
        ylabel="training target tokens / s",
        title=f"batch {cfg['batch_size']}",
    )
    right.set(xlabel="batch size (sentences)", ylabel="training target tokens / s", title="length 25")
    beam.set(
        xlabel="batch size (sentences)",
        ylabel=f"beam-{cfg['decode']['beam_size']} sentences / s",
        title="decoding, length 25: where it stops rising",
    )
    for ax in (left, right, beam):
        ax.grid(alpha=0.3)
    left.legend(fontsize=8)
    m = record["machine"]
    fig.suptitle(
        f"sarnmt training throughput, e={cfg['model']['emb_dim']} d={cfg['model']['hidden_dim']} "
        f"V={cfg['vocab']:,}, {m['device']} ({m['threads']} threads), {cfg['precision']}"
    )
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path
