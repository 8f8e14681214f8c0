"""One step of the search, stages 1-5 of :mod:`sarnmt.decoding.beam`'s docstring, written once: the loop
(:func:`~sarnmt.decoding.beam.run_search`) calls it for every step it launches from Python, and a captured step
(:mod:`sarnmt.decoding.captured`) is this same function over fixed-shape buffers, replayed by that loop.

The search between two steps is a :class:`Search`. Step t (:func:`search_step`) first lets the decoder state follow
the live beam that step t − 1 chose (stage 5 of step t − 1: one reorder, by :attr:`Search.follow`), then the model
scores every live row (1), the rule takes the best 2k continuations (2), merges the finishing ones into the pool (3)
and keeps the best k others as the live beam (4); the step writes its records and leaves the search before step
t + 1. Stage 5 waits for the next step so that the loop may drop the rows of finished sentences in between
(:meth:`Search.select`) and the state is still reordered once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from sarnmt.decoding.rule import Finished, SearchRule
from sarnmt.decoding.schedule import Schedule
from sarnmt.decoding.search import NEG_INF
from sarnmt.decoding.traceback import Records
from sarnmt.models.state import DecoderState, SourceMemory


@dataclass
class Search:
    """The search between two steps, for n sentences of w live slots each (w = 1 before step 2, k =
    ``rule.beam_size`` from then on) out of a batch of B: what step t reads and what it leaves for step t + 1.

    :param memory: the n sentences' source memory, read by w state rows each (:attr:`SourceMemory.beams`).
    :param limits: their length limits, (n,), long.
    :param state: the decoder state after step t − 1, one row for each live slot of step t − 1 (n · w' rows),
        not yet following the live beam.
    :param follow: the state row each live slot extends, (n, w): follow[r, j] = r·w' + parent[r, j], w' the
        width of step t − 1 (stage 5 of step t − 1, applied when step t starts: slot j of sentence r gets that
        row); None: row i is slot i.
    :param prev: each slot's last token, (n·w,); None before step 1.
    :param scores: the slots' running log-probability sums, (n, w), float32 (-inf: an empty slot).
    :param done: whether each sentence has stopped, (n,).
    :param t: the step about to run, a long of shape () on the device (what the rule and the records read).
    :param pool: the finished hypotheses, k for each of the B sentences.
    :param records: what every step recorded for the trace-back, B rows.
    :param active: the batch rows of the n sentences, (n,); None: all B, in order.
    """

    memory: SourceMemory
    limits: Tensor
    state: DecoderState
    follow: Tensor | None
    prev: Tensor | None
    scores: Tensor
    done: Tensor
    t: Tensor
    pool: Finished
    records: Records
    active: Tensor | None = None

    @classmethod
    def start(cls, memory: SourceMemory, state: DecoderState, limits: Tensor, beam_size: int, records: Records):
        """The search before step 1: one empty hypothesis a sentence (w = 1; the source memory is read by one row a
        sentence, so no work is spent on k identical copies), nothing finished.

        :param memory: the encoder's, B sentences.  :param state: the decoder state before step 1, (B, ·).
        :param limits: each sentence's length limit, (B,).  :param records: empty, B rows."""
        batch, device = limits.size(0), limits.device
        return cls(
            memory=memory,
            limits=limits,
            state=state,
            follow=None,
            prev=None,
            scores=torch.zeros(batch, 1, dtype=torch.float, device=device),
            done=torch.zeros(batch, dtype=torch.bool, device=device),
            t=torch.ones((), dtype=torch.long, device=device),
            pool=Finished.empty(batch, beam_size, device),
            records=records,
        )

    def select(self, keep: Tensor) -> Search:
        """The search of the sentences ``keep`` (indices into the n, shape (n',)): the loop drops the rows of the
        finished ones. The state's rows go when the next step starts, in the same reorder as the beam's."""
        n = self.scores.size(0)
        follow = self.follow if self.follow is not None else torch.arange(n, device=keep.device).unsqueeze(1)
        return replace(
            self,
            memory=self.memory.reorder(keep),
            limits=self.limits[keep],
            follow=follow[keep],
            prev=self.prev.view(n, -1)[keep].view(-1),  # after a step: every slot has its last token
            scores=self.scores[keep],
            done=self.done[keep],
            active=keep if self.active is None else self.active[keep],
        )

    def changing(self) -> list[Tensor]:
        """Every tensor that a step replaces, in a fixed order (the same for two searches of one structure): the
        state's, ``follow``, ``prev``, ``scores``, ``done``, ``t`` and the pool's. The memory and the limits stay;
        the records are written in place."""
        beam = [x for x in (self.follow, self.prev, self.scores, self.done, self.t) if x is not None]
        return [*self.state.tensors(), *beam, self.pool.norm, self.pool.raw, self.pool.ref]

    def leaves(self) -> list[Tensor]:
        """Every tensor, in a fixed order: the memory's, the limits, :meth:`changing` and the records'."""
        records = (self.records.tokens, self.records.parents, self.records.choice)
        return [*self.memory.tensors(), self.limits, *self.changing(), *records]


def search_step(model: nn.Module, rule: SearchRule, schedule: Schedule, s: Search) -> Search:
    """Step t of the search ``s`` (the module docstring): stage 5 of step t − 1, stages 1-4 of step t over n
    sentences of w live slots, step t's records written (in place, into ``s.records``).

    :param schedule: ``exact``: candidates from a float32 log-softmax of the n·w × V logits
        (:meth:`~sarnmt.decoding.rule.BeamRule.candidates`), else on the logits with their log-sum-exp
        (:meth:`~sarnmt.decoding.rule.BeamRule.candidates_from_logits`); ``masked``: a done sentence's rows are
        stepped, masked (they finish nothing, its pool stays), else every row is live.
    :returns: the search before step t + 1: k live slots a sentence, the model's new state (n·w rows) with the rows
        it must follow, (n, k), and ``done`` (n,): each sentence stops here if its pool is full, it is at its length
        limit, or no live hypothesis has a finite score."""
    state = s.state if s.follow is None else s.state.reorder(s.follow.view(-1))  # 5. of step t − 1
    out = model.step(s.prev, state, s.memory)  # 1. the model scores every row
    n, width = s.scores.shape
    if schedule.exact:  # 2. the best 2k continuations
        cand = rule.candidates(torch.log_softmax(out.logits.float(), dim=-1).view(n, width, -1), s.scores, s.t)
    else:
        cand = rule.candidates_from_logits(out.logits.view(n, width, -1), s.scores, s.t)
    at_limit = s.limits <= s.t
    pool = replace(s.pool)  # the rule merges into it (3.); the search before this step keeps its own
    full = rule.finish(pool, cand, s.active, at_limit, s.t, ~s.done if schedule.masked else None)
    beam = rule.prune(cand)  # 4. the best k others are the live beam
    s.records.add(s.t, s.active, cand, beam, out.src_attention, out.tgt_attention)
    k = rule.beam_size
    # slot j of sentence r extends state row r·w + its parent (k = 1: row r extends itself, nothing to follow)
    follow = None if k == 1 else torch.arange(n, device=s.t.device).unsqueeze(1) * width + beam.parents
    return Search(
        memory=s.memory if width == k else s.memory.with_beams(k),
        limits=s.limits,
        state=out.state,
        follow=follow,
        prev=beam.tokens.view(-1),
        scores=beam.scores,
        done=s.done | full | at_limit | ~(beam.scores > NEG_INF).any(dim=1),
        t=s.t + 1,
        pool=pool,
        records=s.records,
        active=s.active,
    )
