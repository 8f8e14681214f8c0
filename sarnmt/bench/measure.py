"""The benchmark's measurements: training throughput, activation memory, decoding speed.

Every figure is a median over repeats taken after warm-up, so that one descheduled repeat on a shared machine does
not decide it; the caller interleaves sarnmt and its peers so that all see the same machine state.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch
from torch import Tensor
from torch.utils.flop_counter import FlopCounterMode

from sarnmt.bench.device_timing import event_seconds
from sarnmt.bench.workload import TrainBatch
from sarnmt.training.loss import translation_loss
from sarnmt.utils.precision import precision_context

# (model, batch) -> −log p(y_t) of the batch's gold targets, shape (B, T), zero on padding
NllFn = Callable[[torch.nn.Module, TrainBatch], Tensor]
T = TypeVar("T")


def sarnmt_nll(model: torch.nn.Module, batch: TrainBatch) -> Tensor:
    """As training computes it: readout at the real target positions only, output layer and cross-entropy fused."""
    return model.nll(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_loss(model: torch.nn.Module, nll_fn: NllFn, batch: TrainBatch) -> Tensor:
    """The paper's loss of one batch (summed over each sentence, averaged over sentences), as training takes it."""
    return translation_loss(nll_fn(model, batch), batch.tgt_mask, "sentence")


def gradients(model: torch.nn.Module, nll_fn: NllFn, batch: TrainBatch, clip: float | None) -> Tensor:
    """A training step up to the optimizer: forward, the paper's loss, backward, gradient clipping.
    :returns: the loss."""
    model.zero_grad(set_to_none=True)
    loss = step_loss(model, nll_fn, batch)
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    return loss.detach()


def train_step(
    model: torch.nn.Module, nll_fn: NllFn, optimizer: torch.optim.Optimizer, batch: TrainBatch, clip: float | None
) -> float:
    """One training step as :class:`~sarnmt.training.lit_module.TranslationModule` takes it: :func:`gradients`, then the
    optimizer step.  :returns: the loss."""
    loss = gradients(model, nll_fn, batch, clip)
    optimizer.step()
    return float(loss)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds ``fn`` takes, the device synchronised before and after: on a CUDA device between two CUDA events
    recorded around it (the device's clock, :func:`sarnmt.bench.device_timing.event_seconds`), else the host's."""
    if device.type == "cuda":
        return event_seconds(fn, device, repeats=1, warmup=0)[0]
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def in_turn(contenders: Sequence[T], repeat: int) -> Sequence[T]:
    """The order in which repeat number ``repeat`` times ``contenders``: as given, reversed every other repeat, so
    that none always comes first or last, or always after the same neighbour."""
    return contenders if repeat % 2 == 0 else contenders[::-1]


def median_rate(samples: list[tuple[float, float]]) -> float:
    """The median of amount/seconds over (amount, seconds) samples."""
    return statistics.median(amount / seconds for amount, seconds in samples)


def activation_bytes(model: torch.nn.Module, nll_fn: NllFn, batch: TrainBatch, precision: str) -> int:
    """Bytes of the tensors autograd saves for the backward pass of one batch (distinct storages counted once):
    the activation memory of training, measured the same way on every device."""
    seen: dict[int, int] = {}

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        # detached: a node that saves its own output would otherwise hold that output, whose grad_fn is the node, a
        # cycle through the autograd graph that Python cannot collect (2.3 GB left behind per WMT-length system)
        return tensor.detach()

    with precision_context(batch.src.device, precision), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        nll_fn(model, batch).sum()
    return sum(seen.values())


def matmul_flops(model: torch.nn.Module, nll_fn: NllFn, batch: TrainBatch, precision: str) -> int:
    """Floating-point operations of the matrix products (``torch.utils.flop_counter``) in one training step's
    forward, loss and backward: the work an implementation asks of the hardware, independent of how fast it runs.
    The parameters' gradients are cleared afterwards."""
    with precision_context(batch.src.device, precision), FlopCounterMode(display=False) as counter:
        step_loss(model, nll_fn, batch).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def peak_cuda_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    """Peak allocated GPU memory while ``fn`` runs, or None off CUDA."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device)


def sources_of(batch: TrainBatch) -> list[list[int]]:
    """The source sentences of a batch as id lists without EOS."""
    lengths = batch.src_mask.sum(dim=1).tolist()
    return [row[: n - 1] for row, n in zip(batch.src.tolist(), lengths, strict=True)]
