"""A/B of one kernel flag (sarnmt/kernels/): the fused set with the flag on and off, in one process, on the
same weights and batches, interleaved, medians of the repeats. Prints training target tokens/s (forward, backward,
Adam) and batched beam-5 output tokens/s. Usage:

    .venv/bin/python benchmarks/ab_kernels.py sigmoid_tanh [decoder=baseline workload=wmt repeats=5]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from sarnmt.bench.compose import compose_bench
from sarnmt.bench.measure import sarnmt_nll, sources_of, train_step
from sarnmt.bench.workload import make_workload, sorted_batches
from sarnmt.data.loading.batching import pad_sequences
from sarnmt.decoding.beam import beam_decode
from sarnmt.kernels import KernelChoice, Kernels
from sarnmt.models.factory import build_model


def with_flag(model: torch.nn.Module, flag: str, on: bool) -> None:
    """Every KernelChoice in ``model`` resolves to its configured set with ``flag`` set to ``on``."""
    for module in [model, *model.modules()]:
        choice = getattr(module, "kernels", None)
        if isinstance(choice, KernelChoice):
            choice.override(**{flag: on})


def main(argv: list[str]) -> int:
    flag, *rest = argv
    if flag not in Kernels.__dataclass_fields__:
        print(f"error: unknown kernel flag {flag!r}; choose from {list(Kernels.__dataclass_fields__)}", file=sys.stderr)
        return 2
    opts = dict(arg.split("=", 1) for arg in rest)
    cfg, systems = compose_bench([f"decoders=[{opts.get('decoder', 'baseline')}]", "systems=[]"])
    system = next(iter(systems.values()))
    torch.manual_seed(cfg.seed)
    model = build_model(system.model, system.decoder, cfg.vocab, cfg.vocab)
    workload = make_workload(cfg.lengths[opts.get("workload", "wmt")], cfg.vocab, 4096, cfg.seed)
    batches = sorted_batches(workload.pairs, cfg.batch_size, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    src, mask = pad_sequences(sources_of(batches[1]))
    rates: dict[tuple[str, bool], list[float]] = {}
    for _ in range(int(opts.get("repeats", 5))):
        for on in (True, False):
            with_flag(model, flag, on)
            model.train()
            start, tokens = time.perf_counter(), 0
            for batch in batches:
                train_step(model, sarnmt_nll, optimizer, batch, None)
                tokens += batch.tokens
            rates.setdefault(("train tok/s", on), []).append(tokens / (time.perf_counter() - start))
            model.eval()
            with torch.no_grad():
                start = time.perf_counter()
                hyps = beam_decode(model, src, mask, 5)
                out = sum(len(t) + 1 for t in hyps.tokens)
            rates.setdefault(("beam5 out tok/s", on), []).append(out / (time.perf_counter() - start))
    print(
        f"{flag}: model={cfg.model._target_.rsplit('.', 1)[-1]} e/d from bench defaults, V={cfg.vocab}, "
        f"workload {opts.get('workload', 'wmt')}, torch threads {torch.get_num_threads()}"
    )
    for what in ("train tok/s", "beam5 out tok/s"):
        on, off = (statistics.median(rates[(what, s)]) for s in (True, False))
        print(f"  {what:16s} on {on:8.0f}   off {off:8.0f}   on/off {on / off:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
