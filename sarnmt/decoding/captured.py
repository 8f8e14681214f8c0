"""The search step as a CUDA graph: beam search (and greedy, beam 1) with every step after the first replayed from
one capture per shape bucket, so the host launches one graph a step instead of the step's ~100 kernels.

This module supplies a step, not a search: :func:`~sarnmt.decoding.beam.run_search` is the one loop, and from step 2
on it calls the replay of its own step (:func:`~sarnmt.decoding.step.search_step`) over buffers whose shapes never
change (what a graph can hold). What capture asks of the step is only that its search be in fixed-shape form:

- the decoder state's growing history has room for every step (:meth:`~sarnmt.models.skeleton.RecurrentDecoder.
  static_state`; the step number is a device tensor in every search, :class:`~sarnmt.decoding.step.Search`);
- the search after step 1 (run eagerly by the loop, one row a sentence) is copied into the smallest bucket (rows,
  source length, steps) that holds it (:data:`SEARCH_BUCKETS`): its source memory is padded with masked positions,
  and rows past the batch copy its first sentence and are done from the start (they finish nothing and are never
  traced back); a replay copies what the step leaves back into those buffers (:func:`step_body`).

Graphs are kept per model and per setting that changes what a graph recorded (:func:`graph_key`: the rule, the
kernel flags, the schedule's arithmetic, the autocast and parameter dtypes, the device, training or evaluation mode)
and are dropped when the model's parameters move (``.to()``, ``.half()``); an in-place update of the weights
(training between validations) is read by the next replay. A batch outside every bucket, a bucket beyond
``max_graphs``, a bucket whose buffers or capture run out of memory, or a capture that fails runs on eagerly, with
one warning per cause (:class:`~sarnmt.utils.graphs.BucketedGraphs`), and :func:`capture_record` gives a run's
record what was captured and why not. The capture is :class:`~sarnmt.utils.graphs.CudaGraphs` on a GPU; on a CPU
:class:`~sarnmt.utils.graphs.Eager` runs the same body uncaptured, which is how the tests hold this search to the
eager one.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from functools import cache
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.decoding.rule import Finished, SearchRule
from sarnmt.decoding.schedule import CAPTURED, Schedule
from sarnmt.decoding.step import Search, search_step
from sarnmt.decoding.traceback import Records
from sarnmt.utils.graphs import BucketedGraphs, Buckets, CudaGraphs, Eager, GraphBackend, Key
from sarnmt.utils.precision import autocast_dtype

# Sentences a batch (powers of two and 1.5 times them from 32 on, so that padding rows cost at most a third of a
# batch, up to decoding's largest token batches of short sentences), padded source lengths (EOS included) and steps
# (the length limit a·S + b of those sources at a=2, b=10, and their neighbours).
SEARCH_BUCKETS = Buckets(
    rows=(1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048),
    source=(8, 16, 24, 32, 48, 64, 96, 128, 192, 256),
    target=(16, 32, 48, 64, 80, 112, 144, 208, 272, 400, 528),
)
MAX_GRAPHS = 48  # captures per model and setting; their activations share one memory pool


def may_capture(model: nn.Module) -> bool:
    """Whether ``model``'s search step may be captured: it has the fixed-shape state
    (:meth:`~sarnmt.models.skeleton.RecurrentDecoder.static_state`) and its kernel choice allows capture (every
    choice but ``kernels=plain``)."""
    return hasattr(model, "static_state") and getattr(getattr(model, "kernels", None), "capture", False)


def graph_key(model: nn.Module, rule: SearchRule, schedule: Schedule, device: torch.device) -> tuple:
    """Every setting that changes the operations a captured step records, besides the bucket's shapes (each bucket
    has its own graph): the rule (its type and ``repr``, which names its settings, beam size included), the kernel
    flags a search's call on ``device`` resolves to (:class:`~sarnmt.kernels.registry.Kernels`, after any
    :meth:`~sarnmt.kernels.choice.KernelChoice.override`), the schedule's arithmetic (``exact``, ``masked``), the
    device, the autocast dtype in force, the parameters' dtypes and whether the model is in training mode (dropout)."""
    kernels = getattr(model, "kernels", None)
    with torch.no_grad():  # as a search calls the model
        flags = kernels.flags(torch.empty(0, device=device)) if kernels is not None else None
    dtypes = tuple(sorted({str(p.dtype) for p in model.parameters()}))
    arithmetic = (schedule.exact, schedule.masked)
    return type(rule), repr(rule), flags, arithmetic, device, autocast_dtype(device.type), dtypes, model.training


_GRAPHS: weakref.WeakKeyDictionary[nn.Module, dict[Any, tuple[BucketedGraphs, tuple]]] = weakref.WeakKeyDictionary()


def search_graphs(
    model: nn.Module,
    rule: SearchRule,
    device: torch.device,
    backend: GraphBackend | None,
    schedule: Schedule | None = None,
) -> BucketedGraphs:
    """The captured steps of ``model`` under ``rule`` and ``schedule`` (default: the captured search's,
    :data:`~sarnmt.decoding.schedule.CAPTURED`) on ``device``, made once per :func:`graph_key` and kept while the
    model lives; dropped when its parameters moved to new memory since.  :param backend: the capture of a new entry
    (default: CUDA graphs on a GPU, none on a CPU)."""
    params = tuple(p.data_ptr() for p in model.parameters())
    setting = graph_key(model, rule, schedule if schedule is not None else CAPTURED, device)
    kept = _GRAPHS.setdefault(model, {})
    graphs, made_for = kept.get(setting, (None, None))
    if graphs is None or made_for != params:
        chosen = backend if backend is not None else (CudaGraphs() if device.type == "cuda" else Eager())
        graphs = BucketedGraphs(SEARCH_BUCKETS, chosen, MAX_GRAPHS, "search step", dims="rows, source, steps")
        kept[setting] = (graphs, params)
    return graphs


def fixed_shape(model: nn.Module, search: Search, steps: int) -> Search:
    """``search`` (after step 1) in fixed-shape form, room for ``steps`` steps: the state follows the live beam now
    (then row i is slot i: :attr:`~sarnmt.decoding.step.Search.follow` is the identity, (B, k)) and its growing
    history is padded (:meth:`~sarnmt.models.skeleton.RecurrentDecoder.static_state`)."""
    if search.follow is None:
        return replace(search, state=model.static_state(search.state, steps))
    rows = search.follow.numel()
    state = model.static_state(search.state.reorder(search.follow.view(-1)), steps)
    return replace(search, state=state, follow=torch.arange(rows, device=search.t.device).view_as(search.follow))


def empty_buffers(first: Search, key: Key, length: int) -> Search:
    """Zeroed buffers of bucket ``key`` = (rows R, source S, steps T), shaped like ``first`` (a search in
    fixed-shape form) but for R sentences, T steps and, in the memory's tensors that span the batch's ``length``
    source positions, S of them (a memory of another width, the fixed-context LSTM's one vector, keeps it)."""
    rows, source, steps = key
    k = first.scores.size(1)

    def like(tensor: Tensor, *lead: int) -> Tensor:
        if tensor.dim() == 0:
            return tensor.clone()
        return tensor.new_zeros(*lead, *tensor.shape[len(lead) :])

    memory = first.memory.map(lambda t: t.new_zeros(rows, source if t.size(1) == length else t.size(1), *t.shape[2:]))
    return Search(
        memory=memory,
        limits=like(first.limits, rows),
        state=first.state.map(lambda t: like(t, rows * k)),
        follow=None if first.follow is None else like(first.follow, rows),
        prev=like(first.prev, rows * k),
        scores=like(first.scores, rows),
        done=like(first.done, rows),
        t=first.t.clone(),
        pool=Finished.empty(rows, k, first.scores.device),
        records=Records.empty(rows, steps, k, first.scores.device),
    )


def fill(buffers: Search, first: Search) -> None:
    """Copy a batch's search after step 1 (in fixed-shape form) into a bucket's buffers: source positions and
    steps past its own are zeros (a masked position, a record not yet written); rows past the batch repeat its
    first sentence and are done (they finish nothing and are never traced back)."""
    for mine, theirs in zip(buffers.leaves(), first.leaves(), strict=True):
        mine.copy_(_padded(theirs, mine.shape))
    buffers.done[first.done.size(0) :] = True


def _padded(tensor: Tensor, shape: torch.Size) -> Tensor:
    """``tensor`` grown to ``shape``: rows (dim 0) past its own repeat row 0; other dimensions padded with zeros
    (False for a mask: padded source positions are masked)."""
    if tensor.dim() == 0:
        return tensor
    pads = []
    for have, want in zip(reversed(tensor.shape[1:]), reversed(shape[1:]), strict=True):
        pads += [0, want - have]
    grown = F.pad(tensor, pads) if any(pads) else tensor
    extra = shape[0] - tensor.size(0)
    return torch.cat([grown, grown[:1].expand(extra, *grown.shape[1:])]) if extra else grown


def step_body(model: nn.Module, rule: SearchRule, schedule: Schedule, buffers: Search) -> Tensor:
    """What a capture records: the loop's step (:func:`~sarnmt.decoding.step.search_step`) over a bucket's buffers,
    what it leaves copied back into them (:meth:`~sarnmt.decoding.step.Search.changing`; the records are written
    in place), so that they hold the search before the next step.  :returns: ``buffers.done``, (R,)."""
    after = search_step(model, rule, schedule, buffers)
    for mine, new in zip(buffers.changing(), after.changing(), strict=True):
        mine.copy_(new)
    return buffers.done


def replayed(
    graphs: BucketedGraphs, model: nn.Module, rule: SearchRule, schedule: Schedule, search: Search, length: int
) -> tuple[Callable[[Search], Search], Search] | None:
    """The loop's step from step 2 on as a replay: the step to call (it ignores its argument: the replay reads its
    buffers) and the search it steps, ``search`` (after step 1) copied into the bucket's buffers. None where the
    loop goes on eagerly with ``search`` (the fallbacks of :class:`~sarnmt.utils.graphs.BucketedGraphs`).

    :param length: the batch's source length S (its memory's width).  :param search: B sentences, after step 1."""
    shape = (search.limits.size(0), length, search.records.tokens.size(1) - 1)  # (B, S, the host's bound on steps)
    key = graphs.buckets.key(*shape)
    first = cache(lambda: fixed_shape(model, search, key[2]))  # made in the out-of-memory guard (prepare)
    device_type, dtype = search.t.device.type, autocast_dtype(search.t.device.type)
    owner = weakref.ref(model)  # the kept replay must not keep the model (the key of its cache entry) alive

    def body(buffers: Search) -> Tensor:
        # under autocast without its weight cache, which a graph cannot hold (as the captured training step)
        with nullcontext() if dtype is None else torch.autocast(device_type, dtype, cache_enabled=False):
            return step_body(owner(), rule, schedule, buffers)

    replay = graphs.prepare(shape, lambda key: empty_buffers(first(), key, length), lambda b: fill(b, first()), body)
    if replay is None:
        return None
    buffers = graphs.statics[key]

    def step(_: Search) -> Search:
        replay()
        return buffers

    return step, buffers


def capture_record(model: nn.Module, device: torch.device) -> dict[str, Any]:
    """What a run's record says of the captured search on ``model`` (its searches so far, since its parameters last
    moved): ``captured``, true when some batch's steps were replayed and none ran eagerly; ``graphs``, the buckets
    captured; ``eager_batches``, the batches that ran eagerly although capture was on (outside the buckets, beyond
    ``max_graphs``, out of memory, after a failed capture); ``why``, None or why steps ran eagerly: every cause
    warned, or why no capture was tried (``kernels=plain``, a device other than CUDA)."""
    kept = [graphs for graphs, _ in _GRAPHS.get(model, {}).values()]
    graphs, eager = sum(len(g.replays) for g in kept), sum(g.eager_steps for g in kept)
    reasons = [message for g in kept for message in g.warned.values()]
    if not kept:
        if not may_capture(model):
            reasons = ["kernels=plain (or a model without a fixed-shape state) runs every step from Python"]
        elif device.type != "cuda":
            reasons = [f"a search on {device.type} launches every step from Python (Schedule.for_device)"]
        else:
            reasons = ["no search ran with capture on (attention rows asked for, or no batch decoded)"]
    return {
        "captured": graphs > 0 and eager == 0,
        "graphs": graphs,
        "eager_batches": eager,
        "why": "; ".join(reasons) or None,
    }
