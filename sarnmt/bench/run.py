"""The benchmark: every decoder variant, beside its peers (:mod:`sarnmt.bench.peer`), and the other systems
(``systems``: the LSTM models), in one process (``python -m sarnmt bench``), on every workload of ``workloads``.

A workload is a set of sentence lengths (:mod:`sarnmt.bench.workload`): Multi30K's, WMT news's (up to 50 tokens,
the paper's training lengths) or the peer corpus's. On each, for each variant (``decoders``) and system: training
throughput in target tokens per second through forward, the loss, backward, clipping and the optimizer step, for
sarnmt (with ``optim``) and for each of its peers (with ``reference_optim``, PyTorch's own optimizer; from a
checkout, ``make bench`` adds the *plain* implementation a competent user would write and ``make bench-full`` the
*textbook* one that recomputes everything at every step), on the same length-sorted batches and the same weights,
interleaved, with the optimizer step also timed on its own; matrix-product FLOPs per token and activation memory
(what autograd saves for backward) and, on a GPU, peak allocated memory; decoding speed (:mod:`sarnmt.bench.decode`).
A peer that does not implement a system (the peers write the paper's cGRU: not the LSTM systems) is left out for it.
:func:`bench` is a pure function of the composed config; :mod:`sarnmt.cli.bench` is the command.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn
from tqdm import tqdm

from sarnmt.bench.decode import decode_rates
from sarnmt.bench.device_timing import imported_source_hash
from sarnmt.bench.hardware import check_hardware, machine, resolve_device
from sarnmt.bench.measure import (
    NllFn,
    activation_bytes,
    gradients,
    in_turn,
    matmul_flops,
    median_rate,
    peak_cuda_bytes,
    sarnmt_nll,
    timed,
    train_step,
)
from sarnmt.bench.peer import Peer
from sarnmt.bench.profile import profile_steps
from sarnmt.bench.workload import TrainBatch, fixed_batch, make_workload, sorted_batches
from sarnmt.decoding.beam import BeamSearch
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.decoding.search import check_decoding
from sarnmt.errors import check_range
from sarnmt.kernels.choice import check_choice
from sarnmt.models.attention import SourceAttention
from sarnmt.models.factory import build_model, count_parameters
from sarnmt.utils.allocator import keep_freed_memory
from sarnmt.utils.precision import precision_context

log = logging.getLogger("sarnmt.bench")


@dataclass(frozen=True)
class System:
    """One timed model.  :param model: its ``model=`` node.  :param decoder: its ``decoder=`` node.
    :param peers: the peers that compute the same model and are timed beside it, by name (:mod:`sarnmt.bench.peer`)."""

    model: DictConfig
    decoder: DictConfig
    peers: dict[str, Peer]


def bench_model(cfg: DictConfig, system: System, device: torch.device) -> nn.Module:
    torch.manual_seed(cfg.seed)
    return build_model(system.model, system.decoder, cfg.vocab, cfg.vocab, cfg.kernels).to(device)


def implementations(system: System) -> list[str]:
    """The implementations timed for ``system``: sarnmt, and the peers that implement it."""
    return ["sarnmt", *system.peers]


def nll_of(system: System, impl: str) -> NllFn:
    """The loss of one implementation of :func:`implementations`."""
    return sarnmt_nll if impl == "sarnmt" else system.peers[impl].nll


def train_rates(
    cfg: DictConfig, models: dict[str, nn.Module], batches: list[TrainBatch], systems: dict[str, System]
) -> dict[str, dict[str, dict[str, float]]]:
    """Target tokens/s of every variant, for sarnmt and its peers (:func:`implementations`).

    sarnmt steps with ``optim``, the peers with ``reference_optim`` (PyTorch's stock optimizer, as their users
    would), each its own optimizer state over the shared weights. One step of every (variant, implementation) pair
    on each batch in turn, repeated, in reverse order every other repeat: all figures see the same machine state and
    none always follows the same neighbour, so their ratios hold on a shared machine. The optimizer step is timed
    apart from the rest of the step as well.

    :returns: {variant: {implementation: {"tok_s": whole steps, "model_tok_s": forward, loss, backward and clipping
        only, "optimizer_ms": milliseconds per optimizer step}}}.
    """
    device = batches[0].src.device
    runs = [(name, impl) for name in models for impl in implementations(systems[name])]
    optimizers = {
        (name, impl): instantiate(cfg.optim if impl == "sarnmt" else cfg.reference_optim)(
            params=models[name].parameters()
        )
        for name, impl in runs
    }
    for model in models.values():
        model.train()
    samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {run: [] for run in runs}
    progress = tqdm(total=len(runs) * (cfg.warmup + cfg.repeats * len(batches)), desc="training steps", unit="step")
    with precision_context(device, cfg.precision):
        for name, impl in runs:
            for batch in batches[: cfg.warmup]:
                train_step(models[name], nll_of(systems[name], impl), optimizers[(name, impl)], batch, cfg.clip)
                progress.update()
        for repeat in range(cfg.repeats):
            totals = {run: [0.0, 0.0, 0.0] for run in runs}  # tokens, seconds before the optimizer, optimizer
            for batch in batches:
                for name, impl in in_turn(runs, repeat):
                    total = totals[(name, impl)]
                    total[0] += batch.tokens
                    nll_fn = nll_of(systems[name], impl)
                    total[1] += timed(partial(gradients, models[name], nll_fn, batch, cfg.clip), device)
                    total[2] += timed(optimizers[(name, impl)].step, device)
                    progress.update()
            for run, total in totals.items():
                samples[run].append(tuple(total))
    progress.close()
    rates: dict[str, dict[str, dict[str, float]]] = {name: {} for name in models}
    for (name, impl), runs_samples in samples.items():
        rates[name][impl] = _rates(runs_samples, len(batches))
    return rates


def _rates(samples: list[tuple[float, float, float]], steps: int) -> dict[str, float]:
    return {
        "tok_s": median_rate([(tokens, model + opt) for tokens, model, opt in samples]),
        "model_tok_s": median_rate([(tokens, model) for tokens, model, _ in samples]),
        "optimizer_ms": 1e3 * statistics.median(opt for _, _, opt in samples) / steps,
    }


def memory_and_decoding(cfg: DictConfig, system: System, batches: list[TrainBatch]) -> dict[str, Any]:
    """Activation memory and matrix-product FLOPs per token of every implementation, peak GPU memory of a training
    step, decoding speed. Keys of a peer's figures start with its name (``plain_``, ``reference_``)."""
    device = batches[0].src.device
    model = bench_model(cfg, system, device).train()
    longest = batches[-1]
    tokens = sum(b.tokens for b in batches)
    record: dict[str, Any] = {}
    for impl in implementations(system):
        nll_fn, prefix = nll_of(system, impl), "" if impl == "sarnmt" else impl + "_"
        record[prefix + "activation_mib"] = activation_bytes(model, nll_fn, longest, cfg.precision) / 2**20
        flops = sum(matmul_flops(model, nll_fn, b, cfg.precision) for b in batches)
        record[prefix + "train_flops_per_token"] = flops / tokens
    optimizer = instantiate(cfg.optim)(params=model.parameters())
    with precision_context(device, cfg.precision):
        peak = peak_cuda_bytes(partial(train_step, model, sarnmt_nll, optimizer, longest, cfg.clip), device)
    record["peak_mib"] = None if peak is None else peak / 2**20
    record.update(decode_rates(cfg, bench_model(cfg, system, device), batches, system.peers))
    return record


def throughput_series(
    cfg: DictConfig, systems: dict[str, System], device: torch.device
) -> dict[str, dict[str, list[float]]]:
    """Training tokens/s of sarnmt against sentence length (batch ``batch_size``) and against batch size (length
    25), for every variant: where the target-side attention's O(T²) shows; and beam-k sentences/s against batch
    size (``beam_batch``, the same batches' sources): where decoding stops gaining from a bigger batch."""
    series: dict[str, dict[str, list[float]]] = {}
    points = [("length", n, cfg.batch_size, n) for n in cfg.plot_lengths]
    points += [("batch", bs, bs, 25) for bs in cfg.plot_batch_sizes]
    progress = tqdm(total=len(systems) * len(points), desc="plot series", unit="point")
    for name, system in systems.items():
        model = bench_model(cfg, system, device).train()
        optimizer = instantiate(cfg.optim)(params=model.parameters())
        series[name] = {"length": [], "batch": [], "beam_batch": []}
        beam = BeamSearch(cfg.decode.beam_size, LengthPenalty(), cfg.decode.max_len_a, cfg.decode.max_len_b)
        with precision_context(device, cfg.precision):
            for axis, _, batch_size, length in points:
                batch = fixed_batch(batch_size, length, cfg.vocab, cfg.seed).to(device)
                train_step(model, sarnmt_nll, optimizer, batch, cfg.clip)  # warm-up at this shape
                seconds = timed(partial(train_step, model, sarnmt_nll, optimizer, batch, cfg.clip), device)
                series[name][axis].append(batch.tokens / seconds)
                if axis == "batch":
                    with torch.no_grad():
                        model.eval()
                        search = partial(beam, model, batch.src, batch.src_mask)
                        search()  # warm-up
                        series[name]["beam_batch"].append(batch_size / timed(search, device))
                        model.train()
                progress.update()
    progress.close()
    return series


def bench_workload(cfg: DictConfig, systems: dict[str, System], device: torch.device, name: str) -> dict[str, Any]:
    """Every figure of every system on the workload ``name`` (its sentence lengths: ``lengths.<name>``).
    :returns: {"workload": what was timed, "variants": one dict of figures per system}."""
    workload = make_workload(
        cfg.lengths[name], cfg.vocab, cfg.batch_size * cfg.train_batches * cfg.synthetic_pool, cfg.seed
    )
    batches = [b.to(device) for b in sorted_batches(workload.pairs, cfg.batch_size, cfg.train_batches)]
    models = {system: bench_model(cfg, spec, device) for system, spec in systems.items()}
    rates = train_rates(cfg, models, batches, systems)
    sizes = {system: count_parameters(model) for system, model in models.items()}
    del models
    variants = []
    for system in systems:
        ours = rates[system]["sarnmt"]
        v: dict[str, Any] = {
            "decoder": system,
            "parameters": sizes[system],
            "train_tok_s": ours["tok_s"],
            "model_tok_s": ours["model_tok_s"],
            "optimizer_ms": ours["optimizer_ms"],
        }
        for impl, theirs in rates[system].items():
            if impl != "sarnmt":
                v[f"{impl}_train_tok_s"] = theirs["tok_s"]
                v[f"{impl}_model_tok_s"] = theirs["model_tok_s"]
                v[f"{impl}_optimizer_ms"] = theirs["optimizer_ms"]
                v[f"train_speedup_vs_{impl}"] = ours["tok_s"] / theirs["tok_s"]
                v[f"model_speedup_vs_{impl}"] = ours["model_tok_s"] / theirs["model_tok_s"]
        if "baseline" in rates:
            v["train_overhead_vs_baseline"] = 1 - ours["tok_s"] / rates["baseline"]["sarnmt"]["tok_s"]
        variants.append(v)
    for v in tqdm(variants, desc=f"memory and decoding ({name})", unit="variant"):
        v.update(memory_and_decoding(cfg, systems[v["decoder"]], batches))
        for impl in ["", *(f"{peer}_" for peer in systems[v["decoder"]].peers)]:
            if impl + "train_flops_per_token" in v:
                v[impl + "train_gflop_s"] = v[impl + "train_flops_per_token"] * v[impl + "train_tok_s"] / 1e9
        if cfg.peak_gflop_s:
            v["share_of_peak"] = v["train_gflop_s"] / cfg.peak_gflop_s
        log.info("%s, %s: %.0f target tok/s", name, v["decoder"], v["train_tok_s"])
    result = {
        "workload": {
            "name": name,
            "description": workload.description,
            "pairs": len(workload.pairs),
            "batches": len(batches),
            "target_tokens": sum(b.tokens for b in batches),
            "padded_lengths": [[b.src.size(1), b.tgt.size(1)] for b in batches],
        },
        "variants": variants,
    }
    if cfg.profile:
        result["profiles"] = profiles(cfg, systems, batches)
    return result


def energies_width(model: torch.nn.Module) -> int | None:
    """2d, the width of the source attention's energies, for a model with :class:`SourceAttention`; else None."""
    widths = [module.v.numel() for module in model.modules() if isinstance(module, SourceAttention)]
    return widths[0] if widths else None


def profiles(cfg: DictConfig, systems: dict[str, System], batches: list[TrainBatch]) -> dict[str, Any]:
    """:mod:`sarnmt.bench.profile` of every system of ``profile``, for each implementation timed for it.
    :returns: {"<system> <implementation>": the profile}."""
    device = batches[0].src.device
    out: dict[str, Any] = {}
    for system in tqdm(cfg.profile, desc="profiles", unit="system"):
        for impl in implementations(systems[system]):
            model = bench_model(cfg, systems[system], device).train()
            optimizer = instantiate(cfg.optim if impl == "sarnmt" else cfg.reference_optim)(params=model.parameters())
            out[f"{system} {impl}"] = profile_steps(
                model,
                nll_of(systems[system], impl),
                optimizer,
                batches,
                cfg.clip,
                cfg.precision,
                cfg.repeats,
                train_step,
                energies_width(model) if impl == "sarnmt" else None,
            )
    return out


def bench(cfg: DictConfig, systems: dict[str, System]) -> dict[str, Any]:
    """Run the benchmark.  :param systems: name (a decoder of ``decoders`` or a model of ``systems``) -> what it
    builds.
    :returns: the record: ``machine``, ``config``, ``runs`` (one :func:`bench_workload` result per workload, in the
        order of ``workloads``) and, with ``plot``, ``series``.
    :raises InputError: for ``batch_size``, ``train_batches``, ``repeats`` or ``warmup`` out of range (each a whole
        number; ``warmup`` may be 0), before anything is built."""
    for key, minimum in (("batch_size", 1), ("train_batches", 1), ("repeats", 1), ("warmup", 0)):
        check_range(key, cfg[key], minimum, whole=True)
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    device = resolve_device(cfg.device)
    check_hardware(device, cfg.precision)
    check_choice(cfg.kernels)
    check_decoding(cfg.decode, "decode")
    if cfg.keep_freed_memory and device.type == "cpu":
        keep_freed_memory()
    record: dict[str, Any] = {
        "machine": machine(device),
        "config": OmegaConf.to_container(cfg, resolve=True),
        "runs": [bench_workload(cfg, systems, device, name) for name in cfg.workloads],
    }
    if cfg.plot:
        record["series"] = throughput_series(cfg, systems, device)
    record["code"] = imported_source_hash()  # the package files this process imported: the code that ran
    return record
