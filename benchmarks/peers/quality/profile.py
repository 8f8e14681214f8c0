"""Where one training update's time goes, in sarnmt's baseline and in each peer (``python -m benchmarks.peers.quality
profile``): the same batch of training pairs, each system built exactly as the quality runs configure it
(:mod:`benchmarks.peers.quality.systems`), one thread each.

The batch (:func:`choose_batch`) is a training batch as sarnmt's sampler and fairseq's ``--max-tokens`` cut them: the
exported training text sorted by the longer side of each pair (EOS counted; ties in corpus order), cut greedily into
batches of at most ``budget`` padded tokens (sentences × (1 + the longest side)), and the batch that holds the median
pair taken. Every tool reads those lines through its own vocabulary and collation: sarnmt's ids from its pipeline
(``pipeline.json``), JoeyNMT's vocabularies from the training text (``load_data``), fairseq-preprocess's
dictionaries.

Per system, one update (forward and the loss, backward, clipping, optimizer step: Adam at 1e-3, norm clipped at 1)
is measured by :func:`benchmarks.peers.quality.profile_update.measure`, sarnmt's in this process, each peer's by that
script run by the peer's own python (``<peers-dir>/<tool>/bin/python``, ``OMP_NUM_THREADS=1``). What is reported:

- CPU milliseconds per update by phase (the thread's CPU time, medians over the repeats, no profiler running; the
  wall time beside it: on a shared machine it also counts the waits for a core);
- shares by kind of work (:func:`sarnmt.bench.profile.kind_of`: matrix products, copies and fills, reductions and
  softmax, elementwise) of the profiled updates' wall time, from ``torch.profiler``'s self time of every ATen
  operator, and **framework overhead**, the wall time that no ATen operator accounts for (Python, autograd,
  dispatch); in milliseconds, those shares of the profiled pass's CPU time (a wait for a core falls on any operator
  alike, so the shares hold on a shared machine where the wall milliseconds do not);
- the FLOPs of the update's matrix products (``FlopCounterMode``) per target token, and the rate the matrix products
  run at (those FLOPs over their CPU milliseconds, in GFLOP/s);
- the costliest operators and the parameters.

Results: ``profile.json`` and ``profile.md`` in ``--out`` (``sweeps/results/peers-quality/profile/``).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.peers.quality import profile_update
from benchmarks.peers.quality.machine import FLAGS, harness_code, machine
from benchmarks.peers.quality.systems import PEERS, Fairseq, Job, JoeyNMT, mini_overrides
from sarnmt.bench.profile import KINDS, kind_of
from sarnmt.sweep.records import write_json
from sarnmt.utils.atomic import write_text

SCRIPT = Path(profile_update.__file__).resolve()
BUDGET = 4096
TOP = 8
COLUMNS = ("sarnmt_fp32", "joeynmt", "fairseq")
LABELS = {"sarnmt_fp32": "sarnmt baseline", "joeynmt": "JoeyNMT 2.3.0 (GRU)", "fairseq": "fairseq 0.12.2 (LSTM)"}


@dataclass(frozen=True)
class Batch:
    """The profiled pairs: ``indices`` (0-based lines of the training text) and their pieces (``src``, ``tgt``:
    lists of BPE pieces, EOS not included)."""

    indices: list[int]
    src: list[list[str]]
    tgt: list[list[str]]

    def describe(self) -> dict[str, Any]:
        """Sentences; source and target tokens (EOS counted, padding not); the padded sizes."""
        return {
            "sentences": len(self.indices),
            "src_tokens": sum(len(s) + 1 for s in self.src),
            "tgt_tokens": sum(len(t) + 1 for t in self.tgt),
            "src_width": 1 + max(len(s) for s in self.src),
            "tgt_width": 1 + max(len(t) for t in self.tgt),
            "first_line": self.indices[0] + 1,
        }


def choose_batch(src_lines: list[str], tgt_lines: list[str], budget: int = BUDGET) -> Batch:
    """The training batch holding the median pair (module docstring).  :param src_lines: the training text's source
    side, BPE pieces; one pair per line.  :param budget: padded tokens per batch, EOS counted."""
    src = [line.split() for line in src_lines]
    tgt = [line.split() for line in tgt_lines]
    order = sorted(range(len(src)), key=lambda i: (max(len(src[i]), len(tgt[i])), i))
    batches, current, longest = [], [], 0
    for i in order:
        width = 1 + max(len(src[i]), len(tgt[i]))
        if current and (len(current) + 1) * max(longest, width) > budget:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, width)
    batches.append(current)
    median = order[len(order) // 2]
    chosen = sorted(next(b for b in batches if median in b))
    return Batch(chosen, [src[i] for i in chosen], [tgt[i] for i in chosen])


def training_batch(data: Path, budget: int = BUDGET) -> Batch:
    def read(name: str) -> list[str]:
        return (data / name).read_text(encoding="utf-8").split("\n")[:-1]

    return choose_batch(read("train.bpe.en"), read("train.bpe.de"), budget)


# --------------------------------------------------------------------------------------------------------- sarnmt


def sarnmt_ids(data: Path, batch: Batch) -> tuple[list[list[int]], list[list[int]], int, int]:
    """sarnmt's ids of the batch's pieces (each line merged to its tokenised text and encoded by the side's BPE of
    the exported ``pipeline.json``, as its data module encodes it) and the vocabulary sizes.
    :raises RuntimeError: where a line does not encode to as many ids as it has pieces."""
    from sarnmt.data.text.pipeline import Pipeline
    from sarnmt.data.text.subword import merge_bpe

    pipeline = Pipeline.load(data / "pipeline.json")
    sides = []
    for side, lines in (("src", batch.src), ("tgt", batch.tgt)):
        codec = pipeline.codec(side)
        ids = codec.encode_tokenized([merge_bpe(" ".join(p)) for p in lines])
        for k, (pieces, row) in enumerate(zip(lines, ids, strict=True)):
            if len(pieces) != len(row):
                raise RuntimeError(f"{side} line {batch.indices[k] + 1}: {len(pieces)} pieces but {len(row)} ids")
        sides.append((ids, codec.vocab_size))
    return sides[0][0], sides[1][0], sides[0][1], sides[1][1]


def sarnmt_update(
    src: list[list[int]], tgt: list[list[int]], src_vocab: int, tgt_vocab: int, seed: int = 1
) -> tuple[dict[str, profile_update.Phase], dict[str, Any]]:
    """sarnmt's baseline update as its quality job trains it: the mini scale's overrides composed through sarnmt's
    config (``model=tiny decoder=baseline``, Adam 1e-3, ``loss``, ``trainer.gradient_clip_val``, ``kernels``), the
    model and optimizer built as ``sarnmt train`` builds them, the loss of ``TranslationModule.training_step``.

    :param src: source ids without EOS, one list per sentence (EOS is appended and pads, as ``collate`` does)."""
    import torch
    from hydra.utils import instantiate

    from sarnmt.data.loading.batching import pad_sequences
    from sarnmt.models.factory import build_model
    from sarnmt.training.loss import translation_loss
    from sarnmt.utils.compose import compose

    cfg = compose("train", [*mini_overrides(seed), "threads=1"])
    torch.manual_seed(seed)
    model = build_model(cfg.model, cfg.decoder, src_vocab, tgt_vocab, cfg.kernels)
    optimizer = instantiate(cfg.optim)(params=model.parameters())
    clip = cfg.trainer.gradient_clip_val
    (src_ids, src_mask), (tgt_ids, tgt_mask) = pad_sequences(src), pad_sequences(tgt)
    model.train()

    def forward(state: dict[str, Any]) -> None:
        model.zero_grad(set_to_none=True)
        nll = model.nll(src_ids, src_mask, tgt_ids, tgt_mask)
        state["loss"] = translation_loss(nll, tgt_mask, cfg.loss)

    def clipping(state: dict[str, Any]) -> None:
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)

    info = {
        "parameters": profile_update.parameters(model),
        "vocab": {"src": src_vocab, "tgt": tgt_vocab},
        "src_tokens": int(src_mask.sum()),
        "tgt_tokens": int(tgt_mask.sum()),
        "sentences": len(src),
    }
    return {
        "forward": forward,
        "backward": lambda state: state["loss"].backward(),
        "clipping": clipping,
        "optimizer": lambda state: optimizer.step(),
    }, info


def run_sarnmt(src, tgt, src_vocab: int, tgt_vocab: int, repeats: int, seed: int = 1) -> dict[str, Any]:
    """The raw measurement of sarnmt's update on one thread (:func:`profile_update.measure`)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        update, info = sarnmt_update(src, tgt, src_vocab, tgt_vocab, seed)
        return {
            **info,
            **profile_update.measure(update, repeats),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------------------------- peers


def peer_systems(peers_dir: Path) -> dict[str, JoeyNMT | Fairseq]:
    return {"joeynmt": JoeyNMT(peers_dir / "joeynmt"), "fairseq": Fairseq(peers_dir / "fairseq")}


def run_peer(
    system: JoeyNMT | Fairseq, data: Path, batch: Batch, repeats: int, seed: int, timeout: float
) -> dict[str, Any]:
    """The raw measurement of a peer's update (``profile_update.py`` run by its venv's python), or
    ``{"not_run": why}`` where the venv is missing or the script failed (the reason in one line)."""
    why = system.unavailable()
    if why:
        return {"not_run": why.removeprefix("not run: ")}
    from benchmarks.peers.quality.systems import SCALES

    with tempfile.TemporaryDirectory(prefix=f"profile-{system.name}-") as tmp:
        work = Path(tmp)
        job = Job(system, seed, SCALES["full"], data.resolve(), work / "job")
        spec = {
            "tool": system.name,
            "config": system.profile_config(job),
            "data": str(data.resolve()),
            "indices": batch.indices,
            "repeats": repeats,
            "seed": seed,
            "work": str(work),
        }
        (work / "spec.json").write_text(json.dumps(spec))
        # no byte code written into the peer's venv (it may be read-only, or shared with running trainings)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTHONPATH", None)  # the peer's own packages, not this checkout's; -P: nor the script's folder
        try:
            done = subprocess.run(
                [str(system.python), "-P", str(SCRIPT), str(work / "spec.json"), str(work / "out.json")],
                capture_output=True,
                text=True,
                env=env,
                cwd=work,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"not_run": f"the profile script ran past {timeout:.0f} s"}
        if done.returncode != 0 or not (work / "out.json").is_file():
            tail = [line for line in done.stderr.strip().splitlines() if line.strip()] or ["no output"]
            return {"not_run": f"the profile script failed (exit {done.returncode}): {tail[-1].strip()}"}
        return json.loads((work / "out.json").read_text())


# -------------------------------------------------------------------------------------------------------- summary


def summarise(raw: dict[str, Any]) -> dict[str, Any]:
    """One column of the report from a raw measurement: phases (CPU and wall ms), kinds of work (shares of the
    profiled update, and those shares of its CPU time in ms), FLOPs per target token, the matrix products' GFLOP/s
    (over their CPU ms), the costliest operators (their shares of the CPU time too, ms per update)."""
    if "not_run" in raw:
        return {"not_run": raw["not_run"]}
    wall = dict.fromkeys(KINDS, 0.0)
    for op, (ms, _) in raw["ops"].items():
        wall[kind_of(op)] += ms
    profiled, cpu = raw["profiled_ms"], raw["profiled_cpu_ms"]
    wall["framework overhead"] = max(0.0, profiled - sum(wall.values()))
    share = {k: v / profiled for k, v in wall.items()}
    kinds_ms = {k: share[k] * cpu for k in KINDS}
    top = sorted(raw["ops"].items(), key=lambda item: -item[1][0])[:TOP]
    matmul_ms = kinds_ms["matrix products"]
    return {
        "parameters": raw["parameters"],
        "vocab": raw["vocab"],
        "batch": {k: raw[k] for k in ("sentences", "src_tokens", "tgt_tokens")},
        "update_ms": round(raw["update_ms"], 1),
        "update_wall_ms": round(raw["update_wall_ms"], 1),
        "phases_ms": {k: round(v, 1) for k, v in raw["phases_ms"].items()},
        "phases_wall_ms": {k: round(v, 1) for k, v in raw["phases_wall_ms"].items()},
        "profiled_ms": round(profiled, 1),
        "profiled_cpu_ms": round(cpu, 1),
        "kinds_share": {k: round(v, 3) for k, v in share.items()},
        "kinds_ms": {k: round(v, 1) for k, v in kinds_ms.items()},
        "mflop_per_target_token": round(raw["flops"] / raw["tgt_tokens"] / 1e6, 2),
        "gflop": round(raw["flops"] / 1e9, 2),
        "matmul_gflop_s": round(raw["flops"] / 1e9 / (matmul_ms / 1e3), 1) if matmul_ms > 0 else None,
        "top_ops": [{"op": op, "ms": round(ms * cpu / profiled, 1), "calls": round(calls)} for op, (ms, calls) in top],
        "torch": raw.get("torch"),
        "threads": raw.get("threads"),
        "repeats": raw["repeats"],
        **({"optimizer": raw["optimizer"]} if "optimizer" in raw else {}),
    }


def loadavg() -> str | None:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return None


def markdown(report: dict[str, Any]) -> str:
    """``profile.md``: the machine, the batch, one table with the systems as columns, the costliest operators."""
    columns = report["systems"]
    names = list(columns)
    ran = {n: c for n, c in columns.items() if "not_run" not in c}
    m = report["machine"]
    isa = ", ".join(flag for flag in FLAGS if m["flags"].get(flag)) or "none of " + ", ".join(FLAGS)
    b = report["batch"]
    versions = {c["torch"] for c in ran.values()} or {report["torch"]}
    torch = next(iter(versions)) if len(versions) == 1 else ", ".join(f"{n} {c['torch']}" for n, c in ran.items())
    lines = [
        "# One training update, profiled",
        "",
        "<!-- generated by python -m benchmarks.peers.quality profile; do not edit -->",
        "",
        f"Machine: {m['cpu']} ({isa}); torch {torch}; 1 thread per system; load average "
        f"{report['load']['before']} before, {report['load']['after']} after.",
        "",
        f"Batch: {b['sentences']} sentence pairs of the training text (the batch of at most {report['budget']:,} "
        f"padded tokens that holds the median pair), {b['src_tokens']:,} source and {b['tgt_tokens']:,} target tokens "
        f"(EOS counted), padded widths {b['src_width']} and {b['tgt_width']}; {report['repeats']} timed updates per "
        "system after one warm-up, then as many under the profiler.",
        "",
        "| | " + " | ".join(LABELS.get(n, n) for n in names) + " |",
        "|---|" + "---:|" * len(names),
    ]

    def row(label: str, cell) -> None:
        cells = [cell(columns[n]) if n in ran else "–" for n in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    if len(ran) < len(names):
        lines.append(
            "| | " + " | ".join(f"not run: {columns[n]['not_run']}" if n not in ran else "" for n in names) + " |"
        )
    row("parameters", lambda c: f"{c['parameters']:,}")
    row("**CPU ms per update**", lambda c: f"**{c['update_ms']:.0f}**")
    for phase in profile_update.PHASES:
        row(f"{phase}, CPU ms", lambda c, p=phase: f"{c['phases_ms'][p]:.1f}")
    row("*wall ms per update*", lambda c: f"*{c['update_wall_ms']:.0f}*")
    row("*profiled update: CPU ms (wall ms)*", lambda c: f"*{c['profiled_cpu_ms']:.0f} ({c['profiled_ms']:.0f})*")
    for kind in KINDS:
        row(f"{kind}, CPU ms (%)", lambda c, k=kind: f"{c['kinds_ms'][k]:.0f} ({100 * c['kinds_share'][k]:.0f}%)")
    row("matrix products, GFLOP/s", lambda c: f"{c['matmul_gflop_s']:.0f}" if c["matmul_gflop_s"] else "–")
    row("MFLOP per target token", lambda c: f"{c['mflop_per_target_token']:.1f}")
    row("CPU ms per 1,000 target tokens", lambda c: f"{1e3 * c['update_ms'] / c['batch']['tgt_tokens']:.0f}")
    if "sarnmt_fp32" in ran and len(ran) > 1:
        peers = {n: c["update_ms"] for n, c in ran.items() if n != "sarnmt_fp32"}
        fastest = min(peers, key=peers.get)
        ratio = peers[fastest] / ran["sarnmt_fp32"]["update_ms"]
        lines += [
            "",
            f"sarnmt's update takes {ran['sarnmt_fp32']['update_ms']:.0f} CPU ms, the fastest peer's "
            f"({LABELS[fastest]}) {peers[fastest]:.0f} CPU ms: sarnmt is {ratio:.2f}x as fast per update.",
        ]
    lines += [
        "",
        "CPU ms are the thread's CPU time (the median over the timed updates; with one thread every operator runs on "
        "it); the kinds of work are the shares of the profiled updates' time that each kind's ATen operators took "
        "(framework overhead: the rest), applied to the profiled pass's CPU time; GFLOP/s: the matrix products' "
        "counted FLOPs over their CPU ms.",
        "",
        "Costliest operators (self time as CPU ms per update, as the kinds; calls per update):",
        "",
    ]
    for name, c in ran.items():
        lines.append(
            f"- {LABELS.get(name, name)}: " + ", ".join(f"{o['op']} {o['ms']:.0f} ({o['calls']})" for o in c["top_ops"])
        )
    return "\n".join(lines) + "\n"


def profile(
    data: Path,
    out: Path,
    peers_dir: Path = PEERS,
    systems: list[str] | None = None,
    repeats: int = 5,
    seed: int = 1,
    budget: int = BUDGET,
    timeout: float = 900.0,
    echo=print,
) -> dict[str, Any]:
    """Measure every system of :data:`COLUMNS` (or ``systems``) on the batch of :func:`training_batch`; write
    ``profile.json`` and ``profile.md`` into ``out``.  :returns: the report."""
    import torch

    batch = training_batch(data, budget)
    wanted = list(systems or COLUMNS)
    before = loadavg()
    raw: dict[str, dict[str, Any]] = {}
    runners = {
        "sarnmt_fp32": lambda: run_sarnmt(*sarnmt_ids(data, batch), repeats, seed),
        **{
            name: functools.partial(run_peer, system, data, batch, repeats, seed, timeout)
            for name, system in peer_systems(peers_dir).items()
        },
    }
    for name in wanted:
        start = time.perf_counter()
        raw[name] = runners[name]()
        state = raw[name].get("not_run")
        echo(
            f"profile: {name}: "
            + (f"not run: {state}" if state else f"{raw[name]['update_ms']:.0f} ms per update")
            + f" ({time.perf_counter() - start:.0f} s)"
        )
    report = {
        "command": "python -m benchmarks.peers.quality profile",
        "machine": machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "harness": harness_code(),
        "load": {"before": before, "after": loadavg()},
        "data": str(data),
        "budget": budget,
        "repeats": repeats,
        "seed": seed,
        "batch": {**batch.describe(), "indices": batch.indices},
        "systems": {name: summarise(raw[name]) for name in wanted},
    }
    for name, column in report["systems"].items():
        if "not_run" not in column and column["batch"]["tgt_tokens"] != report["batch"]["tgt_tokens"]:
            raise RuntimeError(
                f"{name} read {column['batch']['tgt_tokens']} target tokens, the batch has "
                f"{report['batch']['tgt_tokens']}: another batch than the others'"
            )
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "profile.json", report)
    write_text(out / "profile.md", markdown(report))
    return report


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run it as: python -m benchmarks.peers.quality profile")
