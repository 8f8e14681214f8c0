"""Where a training step's time goes (``python -m sarnmt bench profile=[baseline]``): phases and kinds of work.

For each profiled system and implementation (sarnmt and the plain peer), on the workload's timed batches:

- **phases**, wall-clock: forward (through the loss), backward, gradient clipping, optimizer step;
- **kinds of work**, from ``torch.profiler``'s self time of every ATen operator: matrix products (``mm``, ``bmm``,
  ``addmm``, ``baddbmm``, ``addmv``: with the step's counted FLOPs, the rate they run at), copies and fills (``cat``,
  ``copy_``, ``fill_``, index and scatter operations: memory traffic that computes nothing), reductions and softmax,
  and the elementwise rest (gates, tanh, masks, the optimizer's arithmetic); **framework overhead** is the step's
  wall time that no ATen operator accounts for (Python, autograd's bookkeeping, dispatch).

The profiler's own cost inflates the operator count slightly; the shares are what to read, and the phases are timed
without it. The figures say which of these is largest, which is where a speed-up has to come from.

**The floor** of a step with source attention (what bounds the speed-up any eager-PyTorch implementation of the
same model could reach): its matrix products as profiled, plus the least elementwise work that the attention
energies tanh(k_j + q_t) ask of every decoder step (:func:`energies_floor`: four passes over the (B, S, 2d)
energies, timed on their own at the batches' shapes), plus the optimizer step and the clipping, with everything
else (the gates, the softmaxes, dropout, framework overhead) counted as zero. The plain peer's step divided by it is
the most that sarnmt's step could gain over the plain peer's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from sarnmt.bench.measure import NllFn, matmul_flops, step_loss, synchronize
from sarnmt.bench.workload import TrainBatch
from sarnmt.utils.precision import precision_context

MATMUL = {
    "aten::mm",
    "aten::bmm",
    "aten::addmm",
    "aten::baddbmm",
    "aten::addmv",
    "aten::addmv_",
    "aten::addbmm",
    "aten::_addmm_activation",
}
MEMORY = {
    "aten::copy_",
    "aten::cat",
    "aten::stack",
    "aten::fill_",
    "aten::zero_",
    "aten::index_select",
    "aten::index_add_",
    "aten::index_put_",
    "aten::scatter_add_",
    "aten::scatter_",
    "aten::gather",
    "aten::embedding_dense_backward",
    "aten::_embedding_bag",
    "aten::clone",
    "aten::flip",
    "aten::empty",
    "aten::empty_strided",
    "aten::resize_",
}
REDUCE = {
    "aten::sum",
    "aten::mean",
    "aten::amax",
    "aten::max",
    "aten::logsumexp",
    "aten::_softmax",
    "aten::_log_softmax",
    "aten::_softmax_backward_data",
    "aten::_log_softmax_backward_data",
    "aten::linalg_vector_norm",
    "aten::norm",
    "aten::cumsum",
    "aten::topk",
    "aten::argmax",
    "aten::nll_loss_forward",
    "aten::nll_loss_backward",
}
KINDS = ("matrix products", "copies and fills", "reductions and softmax", "elementwise", "framework overhead")


def kind_of(op: str) -> str:
    """The kind of work of an ATen operator (``aten::…``)."""
    if op in MATMUL:
        return "matrix products"
    if op in MEMORY:
        return "copies and fills"
    if op in REDUCE:
        return "reductions and softmax"
    return "elementwise"


def phases(
    model: nn.Module, nll_fn: NllFn, optimizer: torch.optim.Optimizer, batch: TrainBatch, clip: float | None
) -> dict[str, float]:
    """Seconds of one training step's forward, backward, clipping and optimizer step."""
    device = batch.src.device
    marks = [time.perf_counter()]

    def mark() -> None:
        synchronize(device)
        marks.append(time.perf_counter())

    model.zero_grad(set_to_none=True)
    loss = step_loss(model, nll_fn, batch)
    mark()
    loss.backward()
    mark()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    mark()
    optimizer.step()
    mark()
    spans = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    return dict(zip(("forward", "backward", "clipping", "optimizer"), spans, strict=True))


def energies_floor(batches: list[TrainBatch], width: int, repeats: int) -> float:
    """Seconds per step (the mean over ``batches``) of the least elementwise work of the source attention's
    energies: at every decoder step, over a (B, S, ``width``) tensor, four passes that no eager implementation avoids
    (the keys plus the broadcast query; the squashing, timed as ``sigmoid``, PyTorch's cheapest transcendental on a
    CPU, tanh's scale folded into the keys and the query; in the backward, its derivative times v_a; the keys'
    gradient accumulated). Medians over ``repeats``.

    :param batches: B, S (padded source length) and T (target steps) from each batch's ``src`` and ``tgt``.
    :param width: 2d, the energies' width."""
    totals = []
    for _ in range(repeats):
        total = 0.0
        for batch in batches:
            (rows, length), steps, device = batch.src.shape, batch.tgt.size(1), batch.src.device
            keys = torch.randn(rows, length, width, device=device)
            query, v = torch.randn(rows, 1, width, device=device), torch.randn(width, device=device)
            scores_grad = torch.randn(rows, length, 1, device=device)
            buffer, keys_grad = torch.empty_like(keys), torch.zeros_like(keys)
            synchronize(device)
            start = time.perf_counter()
            for _ in range(steps):
                torch.add(keys, query, out=buffer).sigmoid_()
                torch.ops.aten.sigmoid_backward.grad_input(v, buffer, grad_input=buffer)
                keys_grad.addcmul_(buffer, scores_grad)
            synchronize(device)
            total += time.perf_counter() - start
        totals.append(total / len(batches))
    return statistics.median(totals)


def profile_steps(
    model: nn.Module,
    nll_fn: NllFn,
    optimizer: torch.optim.Optimizer,
    batches: list[TrainBatch],
    clip: float | None,
    precision: str,
    repeats: int,
    step: Callable[..., Any],
    energies_width: int | None = None,
) -> dict[str, Any]:
    """Phases (medians over ``repeats`` passes over ``batches``, milliseconds per step) and kinds of work (one
    profiled pass; milliseconds per step and shares) of ``step`` (a training step: ``train_step``'s signature).

    :param energies_width: 2d for a model with source attention energies: the step's floor is computed.
    :returns: {"phases_ms": {phase: ms}, "kinds_ms": {kind: ms}, "step_ms": profiled wall ms per step,
        "matmul_gflop_s": the matrix products' rate, "top_ops": the 8 costliest operators [(name, ms, calls)]} and,
        with ``energies_width``, "energies_floor_ms" and "floor_ms" (products + energies + optimizer + clipping)."""
    device = batches[0].src.device
    with precision_context(device, precision):
        for batch in batches:  # warm-up
            step(model, nll_fn, optimizer, batch, clip)
        samples = [[phases(model, nll_fn, optimizer, batch, clip) for batch in batches] for _ in range(repeats)]
        flops = sum(matmul_flops(model, nll_fn, batch, precision) for batch in batches)
        synchronize(device)
        start = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for batch in batches:
                step(model, nll_fn, optimizer, batch, clip)
            synchronize(device)
        wall = time.perf_counter() - start
    n = len(batches)
    phases_ms = {key: 1e3 * statistics.median(sum(s[key] for s in rep) for rep in samples) / n for key in samples[0][0]}
    kinds = dict.fromkeys(KINDS, 0.0)
    ops: dict[str, list[float]] = {}
    for event in prof.key_averages():
        if event.key.startswith("aten::"):
            seconds = event.self_cpu_time_total / 1e6
            kinds[kind_of(event.key)] += seconds
            ops.setdefault(event.key, [0.0, 0])
            ops[event.key][0] += seconds
            ops[event.key][1] += event.count
    kinds["framework overhead"] = max(0.0, wall - sum(kinds.values()))
    top = sorted(ops.items(), key=lambda item: -item[1][0])[:8]
    result = {
        "phases_ms": phases_ms,
        "kinds_ms": {k: 1e3 * v / n for k, v in kinds.items()},
        "step_ms": 1e3 * wall / n,
        "matmul_gflop_s": flops / max(kinds["matrix products"], 1e-9) / 1e9,
        "top_ops": [(name, 1e3 * seconds / n, count // n) for name, (seconds, count) in top],
    }
    if energies_width:
        result["energies_floor_ms"] = 1e3 * energies_floor(batches, energies_width, repeats)
        result["floor_ms"] = (
            result["kinds_ms"]["matrix products"]
            + result["energies_floor_ms"]
            + phases_ms["optimizer"]
            + phases_ms["clipping"]
        )
    return result


def markdown(profiles: dict[str, dict[str, Any]]) -> list[str]:
    """One table: a column per profiled (system, implementation), rows the phases and kinds of work."""
    names = list(profiles)
    lines = ["| ms per step | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for phase in ("forward", "backward", "clipping", "optimizer"):
        lines.append(f"| {phase} | " + " | ".join(f"{p['phases_ms'][phase]:.1f}" for p in profiles.values()) + " |")
    lines.append("| *profiled step* | " + " | ".join(f"*{p['step_ms']:.1f}*" for p in profiles.values()) + " |")
    for kind in KINDS:
        lines.append(
            f"| {kind} | "
            + " | ".join(
                f"{p['kinds_ms'][kind]:.1f} ({100 * p['kinds_ms'][kind] / p['step_ms']:.0f}%)"
                for p in profiles.values()
            )
            + " |"
        )
    lines.append(
        "| matrix products, GFLOP/s | " + " | ".join(f"{p['matmul_gflop_s']:.0f}" for p in profiles.values()) + " |"
    )
    if any("floor_ms" in p for p in profiles.values()):
        lines.append(
            "| *floor: products + the energies' 4 passes + optimizer + clipping* | "
            + " | ".join(
                f"*{p['floor_ms']:.1f}* ({p['energies_floor_ms']:.1f})" if "floor_ms" in p else "–"
                for p in profiles.values()
            )
            + " |"
        )
    lines += _floor_bounds(profiles)
    lines += ["", "Costliest operators (ms per step, calls per step):"]
    for name, p in profiles.items():
        lines.append(f"- {name}: " + ", ".join(f"{op} {ms:.1f} ({calls})" for op, ms, calls in p["top_ops"]))
    return lines


def _floor_bounds(profiles: dict[str, dict[str, Any]]) -> list[str]:
    """For every system profiled with both implementations: the plain peer's step over sarnmt's floor."""
    lines = []
    for name, p in profiles.items():
        system, _, impl = name.rpartition(" ")
        plain = profiles.get(f"{system} plain")
        if impl == "sarnmt" and "floor_ms" in p and plain is not None:
            plain_ms, ours_ms = sum(plain["phases_ms"].values()), sum(p["phases_ms"].values())
            lines += [
                "",
                f"{system}: the plain peer's step {plain_ms:.1f} ms, sarnmt's {ours_ms:.1f} ms "
                f"({plain_ms / ours_ms:.2f}x), sarnmt's floor {p['floor_ms']:.1f} ms: at most "
                f"{plain_ms / p['floor_ms']:.2f}x the plain peer with everything but the products, the "
                "energies' four passes, the optimizer and the clipping counted as zero",
            ]
    return lines
