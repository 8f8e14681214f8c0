"""One step of the search, stages 1-4 of :mod:`sarnmt.decoding.beam`'s docstring, written once for the loop that
launches every step from Python (:func:`~sarnmt.decoding.beam.beam_decode`) and for the step it replays from a
capture (:mod:`sarnmt.decoding.captured`): the model scores every live row, the rule takes the best 2k
continuations, merges the finishing ones into the pool and keeps the best k others as the live beam.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from sarnmt.decoding.rule import Beam, Candidates, Finished, SearchRule
from sarnmt.decoding.search import NEG_INF
from sarnmt.models.skeleton import StepOutput
from sarnmt.models.state import DecoderState, SourceMemory


@dataclass(slots=True)
class Stepped:
    """What one step of n sentences gives.  :param out: the model's step (logits, next state, attention rows).
    :param cand: the best 2k continuations.  :param beam: the live beam, k slots a sentence.
    :param stopped: whether each sentence stops here, shape (n,): its pool is full, it is at its length limit, or
        no live hypothesis has a finite score."""

    out: StepOutput
    cand: Candidates
    beam: Beam
    stopped: Tensor


def search_step(
    model: nn.Module,
    rule: SearchRule,
    exact: bool,
    prev: Tensor | None,
    state: DecoderState,
    memory: SourceMemory,
    scores: Tensor,
    limits: Tensor,
    t: int | Tensor,
    pool: Finished,
    active: Tensor | None,
    live: Tensor | None,
) -> Stepped:
    """Stages 1-4 of step t over n sentences of w live slots (w = 1 at step 1, k afterwards).

    :param exact: candidates from a float32 log-softmax (:meth:`~sarnmt.decoding.rule.BeamRule.candidates`), else
        on the logits with their log-sum-exp (:meth:`~sarnmt.decoding.rule.BeamRule.candidates_from_logits`).
    :param prev: each row's last token, shape (n·w,), or None at step 1.  :param scores: the slots' running sums,
        shape (n, w).  :param limits: the n sentences' length limits, shape (n,).  :param t: the step, 1-based (an
        int, or a long tensor of shape () in a captured step).  :param pool: the search's finished hypotheses
        (updated: :meth:`~sarnmt.decoding.rule.BeamRule.finish`).  :param active: the n sentences' pool rows, shape
        (n,), or None (all, in order).  :param live: whether each still searches, shape (n,), or None (all do).
    """
    out = model.step(prev, state, memory)  # 1. the model scores every row
    n, width = scores.shape
    if exact:  # 2. the best 2k continuations
        cand = rule.candidates(torch.log_softmax(out.logits.float(), dim=-1).view(n, width, -1), scores, t)
    else:
        cand = rule.candidates_from_logits(out.logits.view(n, width, -1), scores, t)
    at_limit = limits <= t
    full = rule.finish(pool, cand, active, at_limit, t, live)  # 3. finished hypotheses join the pool
    beam = rule.prune(cand)  # 4. the best k others are the live beam
    return Stepped(out, cand, beam, full | at_limit | ~(beam.scores > NEG_INF).any(dim=1))
