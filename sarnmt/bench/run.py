"""The benchmark: every decoder variant, beside the textbook reference, and the other systems (``systems``: the LSTM
models), in one process (``python -m sarnmt.bench``).

For each variant (``decoders``) and system: training throughput in target tokens per second through forward, the
paper's loss, backward, clipping and the optimizer step, for sarnmt (with ``optim``) and for
:mod:`sarnmt.bench.reference` (with ``reference_optim``) on the same length-sorted batches and the same weights,
interleaved, with the optimizer step also timed on its own; activation memory (what autograd saves for backward)
and, on a GPU, peak allocated memory; decoding speed in sentences per second for greedy and beam search, batched
(``batch_size`` sentences per call) and one sentence at a time, and for the reference's greedy loop. The reference
implements the paper's cGRU only: the LSTM systems are timed without it. :func:`bench` is a pure function of the
composed config; :mod:`sarnmt.bench.__main__` is the command.
"""

from __future__ import annotations

import logging
import platform
import statistics
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn
from tqdm import tqdm

from sarnmt.bench.measure import (
    activation_bytes,
    gradients,
    matmul_flops,
    median_rate,
    peak_cuda_bytes,
    sarnmt_nll,
    sources_of,
    textbook_nll,
    timed,
    train_step,
)
from sarnmt.bench.reference import reference_greedy
from sarnmt.bench.workload import (
    TrainBatch,
    Workload,
    corpus_workload,
    fixed_batch,
    sorted_batches,
    synthetic_workload,
)
from sarnmt.data.batching import pad_sequences
from sarnmt.decoding.beam import BeamSearch
from sarnmt.decoding.greedy import GreedySearch
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.lit_module import count_parameters
from sarnmt.models.factory import build_model
from sarnmt.translate import pick_device
from sarnmt.utils.allocator import keep_freed_memory
from sarnmt.utils.precision import precision_context

log = logging.getLogger("sarnmt.bench")


def resolve_device(name: str) -> torch.device:
    """:func:`~sarnmt.translate.pick_device`, refusing a CUDA device the machine does not have."""
    try:
        device = pick_device(name)
    except RuntimeError as err:  # torch.device's own error for a name it does not know
        raise ValueError(f"bench: device must be cpu, cuda, cuda:N or auto, got {name!r}") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("bench: device=cuda but no CUDA device is available (use device=cpu or device=auto)")
    return device


@dataclass(frozen=True)
class System:
    """One timed model.  :param model: its ``model=`` node.  :param decoder: its ``decoder=`` node.
    :param reference: whether the textbook implementation (the cGRU's) computes the same model and is timed too."""

    model: DictConfig
    decoder: DictConfig
    reference: bool


def bench_model(cfg: DictConfig, system: System, device: torch.device) -> nn.Module:
    torch.manual_seed(cfg.seed)
    return build_model(system.model, system.decoder, cfg.vocab, cfg.vocab, cfg.kernels).to(device)


def make_workload(cfg: DictConfig) -> Workload:
    src, tgt = Path(cfg.corpus.src), Path(cfg.corpus.tgt)
    if src.is_file() and tgt.is_file():
        return corpus_workload(src, tgt, cfg.vocab, cfg.corpus.max_len)
    low, high = cfg.synthetic_lengths
    log.warning("bench: %s / %s not found: synthetic sentences of %d-%d tokens instead", src, tgt, low, high)
    sentences = cfg.batch_size * cfg.train_batches * cfg.synthetic_pool
    return synthetic_workload(sentences, cfg.vocab, (low, high), cfg.seed)


def train_rates(cfg: DictConfig, models: dict[str, nn.Module], batches: list[TrainBatch],
                systems: dict[str, System]) -> dict[str, dict[str, dict[str, float]]]:  # fmt: skip
    """Target tokens/s of every variant, for sarnmt and (``reference``) the textbook implementation.

    sarnmt steps with ``optim``, the reference with ``reference_optim`` (PyTorch's stock Adadelta), each its own
    optimizer state over the shared weights. One step of every (variant, implementation) pair on each batch in turn,
    repeated: all figures see the same machine state, so their ratios hold on a shared machine. The optimizer step
    is timed apart from the rest of the step as well.

    :returns: {variant: {"sarnmt" | "reference": {"tok_s": whole steps, "model_tok_s": forward, loss, backward and
        clipping only, "optimizer_ms": milliseconds per optimizer step}}}.
    """
    device = batches[0].src.device
    impls = {"sarnmt": (sarnmt_nll, cfg.optim), **({"reference": (textbook_nll, cfg.reference_optim)}
                                                       if cfg.reference else {})}  # fmt: skip
    runs = [(name, impl) for name in models for impl in impls if impl == "sarnmt" or systems[name].reference]
    optimizers = {(name, impl): instantiate(impls[impl][1])(params=models[name].parameters()) for name, impl in runs}
    for model in models.values():
        model.train()
    samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {run: [] for run in runs}
    progress = tqdm(total=len(runs) * (cfg.warmup + cfg.repeats * len(batches)), desc="training steps", unit="step")
    with precision_context(device, cfg.precision):
        for name, impl in runs:
            for batch in batches[: cfg.warmup]:
                train_step(models[name], impls[impl][0], optimizers[(name, impl)], batch, cfg.clip)
                progress.update()
        for _ in range(cfg.repeats):
            totals = {run: [0.0, 0.0, 0.0] for run in runs}  # tokens, seconds before the optimizer, optimizer
            for batch in batches:
                for name, impl in runs:
                    total = totals[(name, impl)]
                    total[0] += batch.tokens
                    total[1] += timed(partial(gradients, models[name], impls[impl][0], batch, cfg.clip), device)
                    total[2] += timed(optimizers[(name, impl)].step, device)
                    progress.update()
            for run, total in totals.items():
                samples[run].append(tuple(total))
    progress.close()
    return {name: {impl: _rates(samples[(name, impl)], len(batches)) for impl in impls if (name, impl) in samples}
            for name in models}  # fmt: skip


def _rates(samples: list[tuple[float, float, float]], steps: int) -> dict[str, float]:
    return {"tok_s": median_rate([(tokens, model + opt) for tokens, model, opt in samples]),
            "model_tok_s": median_rate([(tokens, model) for tokens, model, _ in samples]),
            "optimizer_ms": 1e3 * statistics.median(opt for _, _, opt in samples) / steps}  # fmt: skip


def evenly_spaced(items: list, count: int) -> list:
    """``count`` items spread evenly over ``items`` (a batch sorted by length: short, middle and long ones alike)."""
    if count >= len(items):
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def decode_rates(cfg: DictConfig, model: nn.Module, batches: list[TrainBatch], reference: bool
                 ) -> dict[str, float]:  # fmt: skip
    """Sentences/s: greedy and beam search, batched and one at a time; the reference's greedy loop, batched."""
    device = batches[0].src.device
    sources = sources_of(batches[len(batches) // 2])  # a batch of median length
    a, b = cfg.decode.max_len_a, cfg.decode.max_len_b
    searches = {"greedy": GreedySearch(a, b), f"beam{cfg.decode.beam_size}": BeamSearch(
        cfg.decode.beam_size, LengthPenalty(), a, b)}  # fmt: skip
    model.eval()
    rates: dict[str, float] = {}

    def run(search, group: list[list[int]]) -> None:
        src, mask = pad_sequences(group)
        search(model, src.to(device), mask.to(device))

    def run_each(search, group: list[list[int]]) -> None:
        for sentence in group:
            run(search, [sentence])

    with precision_context(device, cfg.precision), torch.no_grad():
        for name, search in searches.items():
            single = evenly_spaced(sources, cfg.decode.single)
            run(search, sources[:1])  # warm-up
            batched_s, single_s = [], []
            one_at_a_time = partial(run_each, search, single)
            for _ in range(cfg.repeats):
                batched_s.append((len(sources), timed(partial(run, search, sources), device)))
                single_s.append((len(single), timed(one_at_a_time, device)))
            rates[f"{name}_batched"] = median_rate(batched_s)
            rates[f"{name}_single"] = median_rate(single_s)
        if reference:
            src, mask = (t.to(device) for t in pad_sequences(sources))
            max_len = int(a * (src.size(1) - 1) + b)
            rates["reference_greedy_batched"] = median_rate(
                [(len(sources), timed(lambda: reference_greedy(model, src, mask, max_len), device))
                 for _ in range(cfg.repeats)]  # fmt: skip
            )
    return rates


def memory_and_decoding(cfg: DictConfig, system: System, batches: list[TrainBatch]) -> dict[str, Any]:
    """Activation memory (sarnmt and reference), peak GPU memory of a training step, decoding speed."""
    device = batches[0].src.device
    reference = cfg.reference and system.reference
    model = bench_model(cfg, system, device).train()
    longest = batches[-1]
    record: dict[str, Any] = {"activation_mib": activation_bytes(model, sarnmt_nll, longest, cfg.precision) / 2**20}
    tokens = sum(b.tokens for b in batches)

    def flops_per_token(nll_fn) -> float:
        return sum(matmul_flops(model, nll_fn, b, cfg.precision) for b in batches) / tokens

    record["train_flops_per_token"] = flops_per_token(sarnmt_nll)
    if reference:
        record["reference_activation_mib"] = activation_bytes(model, textbook_nll, longest, cfg.precision) / 2**20
        record["reference_train_flops_per_token"] = flops_per_token(textbook_nll)
    optimizer = instantiate(cfg.optim)(params=model.parameters())
    with precision_context(device, cfg.precision):
        peak = peak_cuda_bytes(partial(train_step, model, sarnmt_nll, optimizer, longest, cfg.clip), device)
    record["peak_mib"] = None if peak is None else peak / 2**20
    # decoding with fresh (random) weights: a few training steps already make EOS likely, which would end
    # single-sentence searches early; random weights make every hypothesis run to its length limit instead
    record.update(decode_rates(cfg, bench_model(cfg, system, device), batches, reference))
    return record


def throughput_series(cfg: DictConfig, systems: dict[str, System], device: torch.device
                      ) -> dict[str, dict[str, list[float]]]:  # fmt: skip
    """Training tokens/s of sarnmt against sentence length (batch ``batch_size``) and against batch size (length
    25), for every variant: where the target-side attention's O(T²) shows."""
    series: dict[str, dict[str, list[float]]] = {}
    points = [("length", n, cfg.batch_size, n) for n in cfg.plot_lengths]
    points += [("batch", bs, bs, 25) for bs in cfg.plot_batch_sizes]
    progress = tqdm(total=len(systems) * len(points), desc="plot series", unit="point")
    for name, system in systems.items():
        model = bench_model(cfg, system, device).train()
        optimizer = instantiate(cfg.optim)(params=model.parameters())
        series[name] = {"length": [], "batch": []}
        with precision_context(device, cfg.precision):
            for axis, _, batch_size, length in points:
                batch = fixed_batch(batch_size, length, cfg.vocab, cfg.seed).to(device)
                train_step(model, sarnmt_nll, optimizer, batch, cfg.clip)  # warm-up at this shape
                seconds = timed(partial(train_step, model, sarnmt_nll, optimizer, batch, cfg.clip), device)
                series[name][axis].append(batch.tokens / seconds)
                progress.update()
    progress.close()
    return series


def bench(cfg: DictConfig, systems: dict[str, System]) -> dict[str, Any]:
    """Run the benchmark.  :param systems: name (a decoder of ``decoders`` or a model of ``systems``) -> what it
    builds.
    :returns: the record (``machine``, ``config``, ``workload``, ``variants`` and, with ``plot``, ``series``)."""
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    device = resolve_device(cfg.device)
    if cfg.keep_freed_memory and device.type == "cpu":
        keep_freed_memory()
    workload = make_workload(cfg)
    batches = [b.to(device) for b in sorted_batches(workload.pairs, cfg.batch_size, cfg.train_batches)]
    models = {name: bench_model(cfg, system, device) for name, system in systems.items()}
    rates = train_rates(cfg, models, batches, systems)
    variants = []
    for name in systems:
        ours = rates[name]["sarnmt"]
        v: dict[str, Any] = {"decoder": name, "parameters": count_parameters(models[name]),
                             "train_tok_s": ours["tok_s"], "model_tok_s": ours["model_tok_s"],
                             "optimizer_ms": ours["optimizer_ms"]}  # fmt: skip
        if "reference" in rates[name]:
            theirs = rates[name]["reference"]
            v["reference_train_tok_s"] = theirs["tok_s"]
            v["reference_model_tok_s"] = theirs["model_tok_s"]
            v["reference_optimizer_ms"] = theirs["optimizer_ms"]
            v["train_speedup_vs_reference"] = ours["tok_s"] / theirs["tok_s"]
            v["model_speedup_vs_reference"] = ours["model_tok_s"] / theirs["model_tok_s"]
        if "baseline" in rates:
            v["train_overhead_vs_baseline"] = 1 - ours["tok_s"] / rates["baseline"]["sarnmt"]["tok_s"]
        variants.append(v)
    del models
    for v in tqdm(variants, desc="memory and decoding", unit="variant"):
        v.update(memory_and_decoding(cfg, systems[v["decoder"]], batches))
        v["train_gflop_s"] = v["train_flops_per_token"] * v["train_tok_s"] / 1e9
        if cfg.peak_gflop_s:
            v["share_of_peak"] = v["train_gflop_s"] / cfg.peak_gflop_s
        if "reference_train_flops_per_token" in v:
            v["reference_train_gflop_s"] = v["reference_train_flops_per_token"] * v["reference_train_tok_s"] / 1e9
        log.info("%s: %.0f target tok/s", v["decoder"], v["train_tok_s"])
    record: dict[str, Any] = {
        "machine": machine(device),
        "config": OmegaConf.to_container(cfg, resolve=True),
        "workload": {"description": workload.description, "pairs": len(workload.pairs), "batches": len(batches),
                     "target_tokens": sum(b.tokens for b in batches),
                     "padded_lengths": [[b.src.size(1), b.tgt.size(1)] for b in batches]},  # fmt: skip
        "variants": variants,
    }
    if cfg.plot:
        record["series"] = throughput_series(cfg, systems, device)
    return record


def machine(device: torch.device) -> dict[str, Any]:
    info = {"device": device.type, "torch": torch.__version__, "threads": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine(), "python": platform.python_version()}  # fmt: skip
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info
