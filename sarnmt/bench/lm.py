"""Training speed of Table 6's language models, in one run on the same batches (:func:`bench_lm`; the command
``sarnmt bench-lm [scale=mini|paper|smoke] [threads=N] [steps=K] [warmup=K] [repeats=R]``, :mod:`sarnmt.cli.bench_lm`,
``sarnmt/conf/bench_lm.yaml``).

Each model of ``sweep/specs/tables/table6.yaml`` is built at the scale's sizes (``by_scale``; the paper's from its
``lm_model=`` config) with the scale's vocabulary size, and trained with Adam on the same random segments (B streams
of T words, the state carried from segment to segment as in training, dropout as configured); after ``warmup``
untimed updates, ``steps`` updates are timed, ``repeats`` times with the models interleaved, and the median is
reported as words/s beside the parameter count. Figures compare models measured in the same run (docs/reproducing.md,
Table 6).
"""

from __future__ import annotations

import statistics
import time

import torch

from sarnmt.errors import InputError, check_range
from sarnmt.models.factory import build_language_model, count_parameters
from sarnmt.sweep.plan import plan_jobs
from sarnmt.sweep.spec import load_scale, load_table
from sarnmt.utils.compose import compose

VOCAB = {"smoke": 231, "mini": 10_000, "paper": 77_000}  # the scales' vocabulary sizes (corpus reports, Daniluk)


def models(scale: str, vocab_size: int) -> dict[str, tuple[torch.nn.Module, dict]]:
    """``{row label: (model, its data config)}`` at the scale's sizes."""
    built = {}
    for job in plan_jobs([load_table(6)], load_scale(scale)):
        cfg = compose("lm", [o for o in job.train if not o.startswith(("lm_data=", "data.path="))])
        torch.manual_seed(1)
        built[job.row] = (build_language_model(cfg.model, vocab_size), dict(cfg.data))
    return built


def time_updates(net: torch.nn.Module, batches: list[torch.Tensor], warmup: int) -> float:
    """Seconds for the updates after ``warmup``, state carried across segments."""
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    state, start = None, 0.0
    for k, segment in enumerate(batches):
        if k == warmup:
            start = time.perf_counter()
        inputs, targets = segment[:, :-1], segment[:, 1:]
        nll, state = net.nll(inputs, targets, torch.ones_like(inputs, dtype=torch.bool), state)
        state = state.detach()
        optimizer.zero_grad(set_to_none=True)
        nll.mean().backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        optimizer.step()
    return time.perf_counter() - start


def bench_lm(scale: str, threads: int | None = None, steps: int = 20, warmup: int = 3, repeats: int = 3) -> str:
    """:returns: the Markdown table of words/s per row of Table 6 (with its heading), measured as the module says."""
    if scale not in VOCAB:
        raise InputError(f"scale={scale}: not one of {', '.join(sorted(VOCAB))}")
    for key, value, minimum in (("steps", steps, 1), ("warmup", warmup, 0), ("repeats", repeats, 1)):
        check_range(key, value, minimum, whole=True)
    if threads is not None:
        check_range("threads", threads, 1, whole=True)
        torch.set_num_threads(threads)
    vocab_size = VOCAB[scale]
    built = models(scale, vocab_size)
    data = next(iter(built.values()))[1]
    batch, bptt = int(data["batch_size"]), int(data["bptt"])
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, vocab_size, (batch, bptt + 1), generator=generator) for _ in range(warmup + steps)]
    seconds: dict[str, list[float]] = {name: [] for name in built}
    for _ in range(repeats):
        for name, (net, _) in built.items():
            seconds[name].append(time_updates(net.train(), batches, warmup))
    words = steps * batch * bptt
    lines = [
        f"Table 6 language models, scale {scale}: V = {vocab_size:,}, {batch} streams x {bptt} words, Adam, "
        f"{torch.get_num_threads()} threads; median of {repeats} x {steps} updates\n",
        "| row | parameters | d | train words/s | vs LSTM |\n|---|---:|---:|---:|---:|",
    ]
    base = None
    for name, (net, _) in built.items():
        rate = words / statistics.median(seconds[name])
        base = base or rate
        lines.append(f"| {name} | {count_parameters(net):,} | {net.hidden_dim} | {rate:,.0f} | {rate / base:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m sarnmt.bench.lm: an alias of sarnmt bench-lm (run_alias says how)
    from sarnmt.utils.hydra_app import run_alias

    run_alias()
