"""The search step as a CUDA graph: beam search (and greedy, beam 1) with every step after the first replayed from
one capture per shape bucket, so the host launches one graph a step instead of the step's ~100 kernels (issue 40).

It is the search of :func:`~sarnmt.decoding.beam.beam_decode` under its :data:`~sarnmt.decoding.schedule.STATIC`
schedule, the same rule in the same order, rearranged so that one step is a function of buffers whose shapes never
change (what a graph can hold):

- the decoder state's growing history has room for every step from the start and the step count is a device tensor
  (:meth:`~sarnmt.models.skeleton.RecurrentDecoder.static_state`); the step number t is a device tensor too, read by
  the rule's minimum length, length penalty and back pointers (:class:`~sarnmt.decoding.rule.BeamRule`);
- the per-step records for the trace-back are written into (steps, B, ·) buffers at place t − 1, and the finished
  pool, the live beam, the state and "done" are copied back into their own buffers at the end of the step;
- a batch runs in the smallest bucket (rows, source length, steps) that holds it (:data:`SEARCH_BUCKETS`): its
  source memory is padded with masked positions, and rows past the batch copy its first sentence and are done from
  the start (they finish nothing and are never traced back).

Step 1 (one row a sentence, not k) and the encoder run eagerly; "all done" comes to the host as in the eager loop
(a non-blocking copy every 8 steps, read 2 steps later). Graphs are kept per model and per search setting
(:func:`search_graphs`) and are dropped when the model's parameters move (``.to()``, ``.half()``); an in-place update
of the weights (training between validations) is read by the next replay. A batch outside every bucket, a bucket
beyond ``max_graphs`` or a capture that fails runs the eager search instead, with one warning per cause
(:class:`~sarnmt.utils.graphs.BucketedGraphs`). The capture is :class:`~sarnmt.utils.graphs.CudaGraphs` on a GPU; on a
CPU :class:`~sarnmt.utils.graphs.Eager` runs the same body uncaptured, which is how the tests hold this search to the
eager one.
"""

from __future__ import annotations

import weakref
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.decoding.host_flag import DonePoll
from sarnmt.decoding.rule import Finished, SearchRule
from sarnmt.decoding.search import Hypotheses
from sarnmt.decoding.step import search_step
from sarnmt.decoding.traceback import Records, trace_back
from sarnmt.models.state import DecoderState, SourceMemory
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


@dataclass
class StepBuffers:
    """One bucket's buffers: what a captured step reads and what it leaves for the next (R rows of k slots, S source
    positions, T steps).

    :param memory: the source memory, read by k state rows a sentence: annotations (R, S, ·), keys (R, S, ·), mask
        (R, S).  :param limits: each sentence's length limit, (R,).
    :param state: the decoder state of the R·k live rows (fixed-shape:
        :meth:`~sarnmt.models.skeleton.RecurrentDecoder.static_state`).
    :param prev: each row's last token, (R·k,).  :param scores: the live slots' running sums, (R, k).
    :param done: whether each sentence has stopped, (R,).  :param t: the step about to run, a long of shape ().
    :param pool: the finished hypotheses, k a sentence.
    :param tokens: every step's candidates' tokens, (T, R, 2k).  :param parents: their slots, (T, R, 2k).
    :param choice: the candidate each live slot took, (T, R, k).
    """

    memory: SourceMemory
    limits: Tensor
    state: DecoderState
    prev: Tensor
    scores: Tensor
    done: Tensor
    t: Tensor
    pool: Finished
    tokens: Tensor
    parents: Tensor
    choice: Tensor

    def leaves(self) -> list[Tensor]:
        """Every tensor of the buffers, in a fixed order (what :meth:`fill` copies into)."""
        pool, records = (self.pool.norm, self.pool.raw, self.pool.ref), (self.tokens, self.parents, self.choice)
        beam = (self.prev, self.scores, self.done, self.t)
        return [*self.memory.tensors(), self.limits, *self.state.tensors(), *beam, *pool, *records]

    def fill(self, first: StepBuffers) -> None:
        """Copy a batch after its first step into these buffers (:func:`_padded`): source positions past its length
        are masked; rows past the batch repeat its first sentence and are done (they finish nothing and are never
        traced back); the records of later steps repeat step 1's until each step writes its own."""
        for mine, theirs in zip(self.leaves(), first.leaves(), strict=True):
            mine.copy_(_padded(theirs, mine.shape))
        self.done[first.done.size(0) :] = True


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


def first_step(model: nn.Module, rule: SearchRule, src: Tensor, src_mask: Tensor, limits: Tensor, steps: int):
    """Encode and run step 1 eagerly (one row a sentence): the batch's :class:`StepBuffers` before step 2, with room
    for ``steps`` steps.  :param src: shape (B, S).  :param src_mask: shape (B, S).  :param limits: shape (B,)."""
    k, batch, device = rule.beam_size, src.size(0), src.device
    memory, state = model.encode(src, src_mask)
    state = model.static_state(state, steps)
    pool = Finished.empty(batch, k, device)
    scores = src.new_zeros(batch, 1, dtype=torch.float)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    step = search_step(model, rule, False, None, state, memory, scores, limits, 1, pool, None, ~done)
    cand, beam, done = step.cand, step.beam, done | step.stopped
    state = step.out.state.reorder((torch.arange(batch, device=device).unsqueeze(1) + beam.parents).view(-1))
    return StepBuffers(
        memory=memory.with_beams(k),
        limits=limits,
        state=state,
        prev=beam.tokens.reshape(-1),
        scores=beam.scores,
        done=done,
        t=torch.tensor(2, device=device),
        pool=pool,
        tokens=cand.tokens.unsqueeze(0),
        parents=cand.parents.unsqueeze(0),
        choice=beam.choice.unsqueeze(0),
    )


def empty_buffers(first: StepBuffers, key: Key, length: int) -> StepBuffers:
    """Buffers of bucket ``key`` = (rows R, source S, steps T), shaped like ``first``'s but for R sentences and, in
    the memory's tensors that span the batch's ``length`` source positions, S of them (a memory of another width,
    the fixed-context LSTM's one vector, keeps it)."""
    rows, source, steps = key
    k = first.scores.size(1)

    def like(tensor: Tensor, *lead: int) -> Tensor:
        if tensor.dim() == 0:
            return tensor.clone()
        return tensor.new_zeros(*lead, *tensor.shape[len(lead) :])

    memory = first.memory.map(lambda t: t.new_zeros(rows, source if t.size(1) == length else t.size(1), *t.shape[2:]))
    state = first.state.map(lambda t: like(t, rows * k))
    c = first.tokens.size(2)
    return StepBuffers(
        memory=memory,
        limits=like(first.limits, rows),
        state=state,
        prev=like(first.prev, rows * k),
        scores=like(first.scores, rows),
        done=like(first.done, rows),
        t=first.t.clone(),
        pool=Finished.empty(rows, k, first.scores.device),
        tokens=first.tokens.new_zeros(steps, rows, c),
        parents=first.parents.new_zeros(steps, rows, c),
        choice=first.choice.new_zeros(steps, rows, k),
    )


def step_body(model: nn.Module, rule: SearchRule, buffers: StepBuffers) -> Tensor:
    """One search step t >= 2 over the buffers, left in them for the next (the eager loop's stages 1-5 in the same
    order): :returns: ``buffers.done``."""
    b = buffers
    rows, k = b.scores.shape
    pool = replace(b.pool)  # merge rebinds the pool's fields: the copies go back below
    step = search_step(model, rule, False, b.prev, b.state, b.memory, b.scores, b.limits, b.t, pool, None, ~b.done)
    cand, beam = step.cand, step.beam
    place = (b.t - 1).view(1)
    for record, value in ((b.tokens, cand.tokens), (b.parents, cand.parents), (b.choice, beam.choice)):
        record.index_copy_(0, place, value.unsqueeze(0))
    done = b.done | step.stopped
    parents = (torch.arange(rows, device=b.t.device).unsqueeze(1) * k + beam.parents).view(-1)
    for mine, new in zip(b.state.tensors(), step.out.state.reorder(parents).tensors(), strict=True):
        mine.copy_(new)
    for mine, new in ((b.pool.norm, pool.norm), (b.pool.raw, pool.raw), (b.pool.ref, pool.ref)):
        mine.copy_(new)
    b.prev.copy_(beam.tokens.view(-1))
    b.scores.copy_(beam.scores)
    b.done.copy_(done)
    b.t.add_(1)
    return b.done


_GRAPHS: weakref.WeakKeyDictionary[nn.Module, dict[Any, BucketedGraphs]] = weakref.WeakKeyDictionary()


def search_graphs(
    model: nn.Module, rule: SearchRule, device: torch.device, backend: GraphBackend | None
) -> BucketedGraphs:
    """The captured steps of ``model`` under ``rule`` on ``device`` (with the autocast dtype in force), made once and
    kept while the model lives; dropped when its parameters moved to new memory since."""
    params = tuple(p.data_ptr() for p in model.parameters())
    setting = (type(rule), repr(rule), device, autocast_dtype(device.type))  # a rule's repr names its settings
    kept = _GRAPHS.setdefault(model, {})
    graphs, made_for = kept.get(setting, (None, None))
    if graphs is None or made_for != params:
        chosen = backend if backend is not None else (CudaGraphs() if device.type == "cuda" else Eager())
        graphs = BucketedGraphs(SEARCH_BUCKETS, chosen, MAX_GRAPHS, "search step", dims="rows, source, steps")
        kept[setting] = (graphs, params)
    return graphs


def captured_decode(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    rule: SearchRule,
    limits: Tensor,
    steps: int,
    nbest: int,
    check_every: int,
    lag: int,
    backend: GraphBackend | None = None,
) -> Hypotheses | None:
    """The search of a batch with its steps replayed; None where the eager search must run (outside the buckets,
    beyond ``max_graphs``, a failed capture: warned once each).

    :param limits: each sentence's length limit, shape (B,).  :param steps: the host's bound on every limit.
    :param check_every: copy "all done" to the host every this many steps.  :param lag: read it this many later.
    :param backend: the capture (default: CUDA graphs on a GPU, none on a CPU)."""
    graphs = search_graphs(model, rule, src.device, backend)
    shape = (src.size(0), src.size(1), steps)
    key = graphs.choose(shape)
    if key is None:
        return None
    first = first_step(model, rule, src, src_mask, limits, key[2])
    device_type, dtype = src.device.type, autocast_dtype(src.device.type)
    owner = weakref.ref(model)  # the kept replay must not keep the model (the key of its cache entry) alive

    def body(buffers: StepBuffers) -> Tensor:
        # under autocast without its weight cache, which a graph cannot hold (as the captured training step)
        with nullcontext() if dtype is None else torch.autocast(device_type, dtype, cache_enabled=False):
            return step_body(owner(), rule, buffers)

    replay = graphs.prepare(shape, lambda key: empty_buffers(first, key, src.size(1)), lambda b: b.fill(first), body)
    if replay is None:
        return None
    buffers = graphs.statics[key]
    poll = DonePoll(check_every, lag)
    ran = 1
    for t in range(2, steps + 1):
        done = replay()
        ran = t
        if t == steps or poll.stop(t, done):
            break
    batch = src.size(0)
    records = Records(
        batch,
        False,
        tokens=list(buffers.tokens[:ran, :batch].unbind(0)),
        parents=list(buffers.parents[:ran, :batch].unbind(0)),
        choice=list(buffers.choice[:ran, :batch].unbind(0)),
        active=[None] * ran,
    )
    pool = Finished(buffers.pool.norm[:batch], buffers.pool.raw[:batch], buffers.pool.ref[:batch])
    return trace_back(records, pool, src_mask, nbest)
