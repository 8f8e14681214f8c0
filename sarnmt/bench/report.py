"""The benchmark's outputs: a Markdown table with the targets checked, the JSON record, and the plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# figures measured elsewhere on this kind of machine for the issue's comparison shape (e = 256, d = 512, batch 64,
# length-sorted batches): a plain PyTorch loop of this model and fairseq's LSTM, target tokens per second
EXTERNAL = {"plain PyTorch loop": 1370, "fairseq LSTM": 1660}


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "–" if value is None else format(value, spec)


def _workload(work: dict[str, Any]) -> str:
    lengths = ", ".join(f"{s}/{t}" for s, t in work["padded_lengths"])
    return (f"{work['batches']} of the length-sorted batches of {work['pairs']:,} pairs from {work['description']} "
            f"(source/target lengths with EOS: {lengths}; {work['target_tokens']:,} target tokens)")


def _mega(value: float | None) -> float | None:
    return None if value is None else value / 1e6


def _gflops(v: dict[str, Any]) -> str:
    share = f", {100 * v['share_of_peak']:.0f}% of peak" if "share_of_peak" in v else ""
    return f"{v['train_gflop_s']:,.0f}{share}"


def markdown(record: dict[str, Any]) -> str:
    cfg, variants = record["config"], record["variants"]
    beam = f"beam{cfg['decode']['beam_size']}"
    m = record["machine"]
    lines = [
        f"device {m['device']}{' (' + m['gpu'] + ')' if 'gpu' in m else ''}, {m['threads']} threads, torch "
        f"{m['torch']}; precision {cfg['precision']}; model e={cfg['model']['emb_dim']} d={cfg['model']['hidden_dim']} "
        f"V={cfg['vocab']:,}; batch {cfg['batch_size']} sentences; {_workload(record['workload'])}",
        "",
        "| decoder | parameters | train tok/s | reference tok/s | × reference | slower than baseline "
        "| optimizer ms/step (reference) | MFLOP/token (reference) | GFLOP/s (reference) | activations MiB "
        f"| greedy sent/s (batched) | greedy batched/single | {beam} sent/s (batched) | {beam} batched/single "
        "| reference greedy sent/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for v in variants:
        lines.append(
            f"| {v['decoder']} | {v['parameters']:,} | {_fmt(v['train_tok_s'])} "
            f"| {_fmt(v.get('reference_train_tok_s'))} "
            f"| {_fmt(v.get('train_speedup_vs_reference'), '.2f')}× "
            f"| {_fmt(100 * v['train_overhead_vs_baseline'] if 'train_overhead_vs_baseline' in v else None, '+.1f')}% "
            f"| {_fmt(v['optimizer_ms'], '.1f')} ({_fmt(v.get('reference_optimizer_ms'), '.1f')}) "
            f"| {_fmt(_mega(v['train_flops_per_token']))} ({_fmt(_mega(v.get('reference_train_flops_per_token')))}) "
            f"| {_gflops(v)} ({_fmt(v.get('reference_train_gflop_s'))}) "
            f"| {_fmt(v['activation_mib'], '.1f')} | {_fmt(v['greedy_batched'], '.1f')} "
            f"| {v['greedy_batched'] / v['greedy_single']:.1f}× | {_fmt(v[beam + '_batched'], '.1f')} "
            f"| {v[beam + '_batched'] / v[beam + '_single']:.1f}× | {_fmt(v.get('reference_greedy_batched'), '.1f')} |"
        )
    lines += ["", *checks(record)]
    return "\n".join(lines)


def checks(record: dict[str, Any]) -> list[str]:
    """One line per target: the measured figure, the target, and whether it is met."""
    cfg, targets = record["config"], record["config"]["targets"]
    beam = f"beam{cfg['decode']['beam_size']}"
    out = []
    for v in record["variants"]:
        name = v["decoder"]
        if "train_speedup_vs_reference" in v:
            ok = v["train_speedup_vs_reference"] >= targets["train_speedup_vs_reference"]
            work = v["reference_train_flops_per_token"] / v["train_flops_per_token"]
            out.append(f"- {'met ' if ok else 'MISSED'} {name}: trains {v['train_speedup_vs_reference']:.2f}× as fast "
                       f"as the reference (target ≥ {targets['train_speedup_vs_reference']}×); without the optimizer "
                       f"step {v['model_speedup_vs_reference']:.2f}× ({v['optimizer_ms']:.1f} against "
                       f"{v['reference_optimizer_ms']:.1f} ms per step); the reference does {work:.2f}× the "
                       f"matrix-product work, at {v['reference_train_gflop_s']:,.0f} GFLOP/s against sarnmt's "
                       f"{v['train_gflop_s']:,.0f}")  # fmt: skip
        limit = targets["overhead_vs_baseline"].get(name)
        if limit is not None and "train_overhead_vs_baseline" in v:
            ok = v["train_overhead_vs_baseline"] <= limit
            out.append(f"- {'met ' if ok else 'MISSED'} {name}: {100 * v['train_overhead_vs_baseline']:+.1f}% training "
                       f"time per token against the baseline (target ≤ {100 * limit:.0f}%)")  # fmt: skip
        speedup = v[beam + "_batched"] / v[beam + "_single"]
        ok = speedup >= targets["beam_batched_speedup"]
        out.append(f"- {'met ' if ok else 'MISSED'} {name}: {beam} over {cfg['batch_size']} sentences at once is "
                   f"{speedup:.1f}× as fast per sentence as one at a time "
                   f"(target ≥ {targets['beam_batched_speedup']}×)")
    shape = (cfg["model"]["emb_dim"], cfg["model"]["hidden_dim"], cfg["batch_size"])
    if shape == (256, 512, 64) and record["machine"]["device"] == "cpu":
        best = max(v["train_tok_s"] for v in record["variants"])
        out.append("- for scale, the issue's comparison shape (e=256, d=512, batch 64) on this kind of CPU: "
                   + ", ".join(f"{k} {n:,} tok/s" for k, n in EXTERNAL.items())
                   + f"; fastest sarnmt variant here {best:,.0f} tok/s")  # fmt: skip
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
    """Training tokens/s against sentence length and against batch size, one line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = record["config"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, series in record["series"].items():
        left.plot(cfg["plot_lengths"], series["length"], marker="o", label=name)
        right.plot(cfg["plot_batch_sizes"], series["batch"], marker="o", label=name)
    left.set(xlabel="sentence length (tokens, both sides)", ylabel="training target tokens / s",
             title=f"batch {cfg['batch_size']}")  # fmt: skip
    right.set(xlabel="batch size (sentences)", ylabel="training target tokens / s", title="length 25")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    left.legend(fontsize=8)
    m = record["machine"]
    fig.suptitle(f"sarnmt training throughput, e={cfg['model']['emb_dim']} d={cfg['model']['hidden_dim']} "
                 f"V={cfg['vocab']:,}, {m['device']} ({m['threads']} threads), {cfg['precision']}")  # fmt: skip
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path
