"""Where a training step's time goes (``python -m sarnmt.bench profile=[baseline]``): phases and kinds of work.

For each profiled system and implementation (sarnmt and the plain peer), on the workload's timed batches:

- **phases**, wall-clock: forward (through the loss), backward, gradient clipping, optimizer step;
- **kinds of work**, from ``torch.profiler``'s self time of every ATen operator: matrix products (``mm``, ``bmm``,
  ``addmm``, ``baddbmm``, ``addmv``: with the step's counted FLOPs, the rate they run at), copies and fills (``cat``,
  ``copy_``, ``fill_``, index and scatter operations: memory traffic that computes nothing), reductions and softmax,
  and the elementwise rest (gates, tanh, masks, the optimizer's arithmetic); **framework overhead** is the step's
  wall time that no ATen operator accounts for (Python, autograd's bookkeeping, dispatch).

The profiler's own cost inflates the operator count slightly; the shares are what to read, and the phases are timed
without it. The figures say which of these is largest, which is where a speed-up has to come from.
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

MATMUL = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addmv", "aten::addmv_", "aten::addbmm",
          "aten::_addmm_activation"}  # fmt: skip
MEMORY = {"aten::copy_", "aten::cat", "aten::stack", "aten::fill_", "aten::zero_", "aten::index_select",
          "aten::index_add_", "aten::index_put_", "aten::scatter_add_", "aten::scatter_", "aten::gather",
          "aten::embedding_dense_backward", "aten::_embedding_bag", "aten::clone", "aten::flip", "aten::empty",
          "aten::empty_strided", "aten::resize_"}  # fmt: skip
REDUCE = {"aten::sum", "aten::mean", "aten::amax", "aten::max", "aten::logsumexp", "aten::_softmax",
          "aten::_log_softmax", "aten::_softmax_backward_data", "aten::_log_softmax_backward_data",
          "aten::linalg_vector_norm", "aten::norm", "aten::cumsum", "aten::topk", "aten::argmax",
          "aten::nll_loss_forward", "aten::nll_loss_backward"}  # fmt: skip
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


def phases(model: nn.Module, nll_fn: NllFn, optimizer: torch.optim.Optimizer, batch: TrainBatch, clip: float | None
           ) -> dict[str, float]:  # fmt: skip
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


def profile_steps(model: nn.Module, nll_fn: NllFn, optimizer: torch.optim.Optimizer, batches: list[TrainBatch],
                  clip: float | None, precision: str, repeats: int,
                  step: Callable[..., Any]) -> dict[str, Any]:  # fmt: skip
    """Phases (medians over ``repeats`` passes over ``batches``, milliseconds per step) and kinds of work (one
    profiled pass; milliseconds per step and shares) of ``step`` (a training step: ``train_step``'s signature).

    :returns: {"phases_ms": {phase: ms}, "kinds_ms": {kind: ms}, "step_ms": profiled wall ms per step,
        "matmul_gflop_s": the matrix products' rate, "top_ops": the 8 costliest operators [(name, ms, calls)]}."""
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
    phases_ms = {key: 1e3 * statistics.median(sum(s[key] for s in rep) for rep in samples) / n
                 for key in samples[0][0]}  # fmt: skip
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
    return {"phases_ms": phases_ms, "kinds_ms": {k: 1e3 * v / n for k, v in kinds.items()}, "step_ms": 1e3 * wall / n,
            "matmul_gflop_s": flops / max(kinds["matrix products"], 1e-9) / 1e9,
            "top_ops": [(name, 1e3 * seconds / n, count // n) for name, (seconds, count) in top]}  # fmt: skip


def markdown(profiles: dict[str, dict[str, Any]]) -> list[str]:
    """One table: a column per profiled (system, implementation), rows the phases and kinds of work."""
    names = list(profiles)
    lines = ["| ms per step | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for phase in ("forward", "backward", "clipping", "optimizer"):
        lines.append(f"| {phase} | " + " | ".join(f"{p['phases_ms'][phase]:.1f}" for p in profiles.values()) + " |")
    lines.append("| *profiled step* | " + " | ".join(f"*{p['step_ms']:.1f}*" for p in profiles.values()) + " |")
    for kind in KINDS:
        lines.append(f"| {kind} | " + " | ".join(
            f"{p['kinds_ms'][kind]:.1f} ({100 * p['kinds_ms'][kind] / p['step_ms']:.0f}%)"
            for p in profiles.values()) + " |")  # fmt: skip
    lines.append("| matrix products, GFLOP/s | " + " | ".join(f"{p['matmul_gflop_s']:.0f}" for p in profiles.values())
                 + " |")  # fmt: skip
    lines += ["", "Costliest operators (ms per step, calls per step):"]
    for name, p in profiles.items():
        lines.append(f"- {name}: " + ", ".join(f"{op} {ms:.1f} ({calls})" for op, ms, calls in p["top_ops"]))
    return lines
