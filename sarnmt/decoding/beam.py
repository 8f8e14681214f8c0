"""Search: the batched beam search loop over the model's step function and the generic state ``reorder``.

The rules are dl4mt's (docs/models.md §Decoding); the search rule itself (which candidates a step keeps, which
hypotheses finish, how they are ranked) is an object beside this loop: :class:`~sarnmt.decoding.rule.BeamRule`, or
any other :class:`~sarnmt.decoding.rule.SearchRule` handed to :func:`run_search` (``BeamSearch(rule=...)``).
This is the only decoding loop: greedy search is this loop with k = 1 (:mod:`sarnmt.decoding.greedy`).

B sentences × k beams are flattened to B·k rows. Each step:

1. the model scores every live row: log-probabilities of shape (B, k, V);
2. the rule takes the best **2k** candidates per sentence over k × V, their scores the running sums
   (:meth:`~sarnmt.decoding.rule.BeamRule.candidates`; on a GPU taken on the logits with their log-sum-exp,
   :meth:`~sarnmt.decoding.rule.BeamRule.candidates_from_logits`);
3. an EOS candidate ranked within the top k, or any candidate at the sentence's length limit, *finishes*: it is
   length-normalised and merged into the sentence's pool of k finished hypotheses
   (:meth:`~sarnmt.decoding.rule.BeamRule.finish`);
4. the best k non-EOS candidates become the live beam (:meth:`~sarnmt.decoding.rule.BeamRule.prune`);
5. the state follows them through ``state.reorder``, once, when the next step starts (so that the rows of the
   sentences the loop drops in between go in the same reorder).

Step 1 extends one empty hypothesis per sentence (the source memory is read by 1 row per sentence, then by k:
:attr:`SourceMemory.beams`), so no work is spent on k identical copies.

A minimum length m (fairseq's ``min_len``) forbids EOS while a hypothesis has fewer than m tokens. With ``nbest``
= n <= k the n best finished hypotheses of every sentence are traced back (:attr:`Hypotheses.nbest`).

A sentence is done when its pool holds k finished hypotheses, when it reaches its length limit ``max_len_a · |src| +
max_len_b``, or when no live hypothesis has a finite score. How the loop learns that is the device's
:class:`~sarnmt.decoding.schedule.Schedule`: on a CPU it reads it at every step and drops the done sentences' rows (the
search's shapes and bits of the CPU's schedule); on a GPU a done sentence's rows stay, masked, every step has the same
shapes, and whether all are done is copied to the host without waiting every 8 steps and read 2 steps later, so the host
never waits for the device inside the loop. Tokens, back pointers and attention rows are recorded by every step on the
device, finished hypotheses stay there too, and the final hypotheses are traced back once at the end, on the device, and
come to the host in one copy (:mod:`sarnmt.decoding.traceback`), which gives each hypothesis its own attention rows,
whatever reorders happened on the way.

Every step is one function (:func:`~sarnmt.decoding.step.search_step`: stage 5 of the previous step, then 1-4, and
its records) over the search between two steps (:class:`~sarnmt.decoding.step.Search`). On a CUDA device, from step 2
on, the loop calls that step replayed from one CUDA graph per shape bucket instead of launching it
(:mod:`sarnmt.decoding.captured`: the same step over fixed-shape buffers), unless attention rows are asked for,
``kernels=plain`` is chosen or the batch fits no bucket; the loop, its stop test and the trace-back are the same.

With k = 1 the output is greedy search's: the argmax at every step (``tests/test_model.py`` checks it against a
hand-written argmax loop).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from sarnmt.decoding.captured import may_capture, replayed, search_graphs
from sarnmt.decoding.host_flag import DonePoll
from sarnmt.decoding.penalties import LengthPenalty, max_lengths
from sarnmt.decoding.rule import BeamRule, RuleFactory, SearchRule
from sarnmt.decoding.schedule import Schedule
from sarnmt.decoding.search import Hypotheses
from sarnmt.decoding.step import Search, search_step
from sarnmt.decoding.traceback import Records, trace_back
from sarnmt.errors import InputError


@torch.no_grad()
def beam_decode(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    beam_size: int = 5,
    length_penalty: LengthPenalty | None = None,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
    return_attention: bool = False,
    nbest: int = 1,
    min_len: int = 0,
    schedule: Schedule | None = None,
) -> Hypotheses:
    """Beam search for a batch; returns the best finished hypothesis of every sentence (and the n best).

    :param model: anything with the models' ``encode`` and ``step`` (every model the factory builds).
    :param src: shape (B, S).  :param src_mask: shape (B, S).  :param beam_size: k >= 1.
    :param length_penalty: ranks finished hypotheses (default: dl4mt's score / length including EOS).
    :param nbest: n, 1 <= n <= k: also trace back the n best finished hypotheses (:attr:`Hypotheses.nbest`).
    :param min_len: m >= 0: no EOS before a hypothesis has m tokens.
    :param schedule: how the loop meets the host (default: :meth:`Schedule.for_device` of ``src``).
    """
    rule = BeamRule(beam_size, length_penalty if length_penalty is not None else LengthPenalty(), min_len)
    return run_search(model, src, src_mask, rule, max_len_a, max_len_b, return_attention, nbest, schedule)


@torch.no_grad()
def run_search(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    rule: SearchRule,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
    return_attention: bool = False,
    nbest: int = 1,
    schedule: Schedule | None = None,
) -> Hypotheses:
    """The search loop under any rule (:class:`~sarnmt.decoding.rule.SearchRule`; :func:`beam_decode` runs it
    under dl4mt's :class:`~sarnmt.decoding.rule.BeamRule`): k = ``rule.beam_size`` live slots a sentence.

    :param src: shape (B, S).  :param src_mask: shape (B, S).  :param nbest: n, 1 <= n <= k.
    :param schedule: how the loop meets the host (default: :meth:`Schedule.for_device` of ``src``).
    """
    schedule = schedule if schedule is not None else Schedule.for_device(src.device)
    limits = max_lengths(src_mask, max_len_a, max_len_b)
    # a bound known on the host: the longest limit a source of the padded length could have
    steps = max(1, int(max_len_a * src.size(1) + max_len_b))
    capture = schedule.capture and not return_attention and may_capture(model)
    graphs = search_graphs(model, rule, src.device, None, schedule) if capture else None
    memory, state = model.encode(src, src_mask)
    records = Records.empty(src.size(0), steps, rule.beam_size, src.device, return_attention)
    search = Search.start(memory, state, limits, rule.beam_size, records)
    step = partial(search_step, model, rule, schedule)
    poll = DonePoll(schedule.check_every, schedule.lag)  # unless compacting: "all done" read `lag` steps late
    for t in range(1, steps + 1):
        search = step(search)  # stage 5 of step t − 1, stages 1-4 of step t
        if t == steps:
            break
        if schedule.compact:  # the host reads "done" and decides the shapes: the done sentences' rows go
            if t % schedule.check_every == 0:
                keep = (~search.done).nonzero().squeeze(1)
                if keep.numel() == 0:
                    break
                if keep.numel() < search.done.numel():
                    search = search.select(keep)
        elif poll.stop(t, search.done):
            break
        if t == 1 and graphs is not None:  # from step 2 on, the same step replayed (None: on eagerly)
            step, search = replayed(graphs, model, rule, schedule, search, src.size(1)) or (step, search)
    return trace_back(search.records, search.pool, src_mask, nbest, t)


def _qualified_name(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


class BeamSearch:
    """Beam search as a configured object (``sarnmt/conf/decoding/beam.yaml``), of settings checked where they entered
    (:func:`~sarnmt.decoding.search.build_search`).

    :param beam_size: k.  :param length_penalty: how finished hypotheses are ranked (dl4mt: alpha=1, offset=0).
    :param max_len_a: output length limit ``a·|src| + b``.  :param max_len_b: see ``max_len_a``.
    :param min_len: no EOS before this many tokens (0: none).
    :param batch_tokens: how a stream of sentences is cut into batches (:func:`sarnmt.decoding.stream.decode_stream`):
        sorted by length, at most this many padded source tokens (EOS included) a batch; None: the command's
        ``batch_size`` sentences on a CPU, :data:`~sarnmt.decoding.stream.GPU_BATCH_TOKENS` on a GPU. It decides
        the batches, not the outputs.
    :param rule: what builds the search rule from (beam_size, length_penalty, min_len)
        (:data:`~sarnmt.decoding.rule.RuleFactory`; in a config ``rule: {_target_: ..., _partial_: true}``); None:
        dl4mt's :class:`~sarnmt.decoding.rule.BeamRule`. Another rule changes the search, not the loop; the records
        name it (:meth:`settings`).
    """

    name = "beam"

    def __init__(
        self,
        beam_size: int = 5,
        length_penalty: LengthPenalty | None = None,
        max_len_a: float = 2.0,
        max_len_b: int = 10,
        min_len: int = 0,
        batch_tokens: int | None = None,
        rule: RuleFactory | None = None,
    ) -> None:
        self.beam_size, self.max_len_a, self.max_len_b, self.min_len = beam_size, max_len_a, max_len_b, min_len
        self.batch_tokens = batch_tokens
        self.length_penalty = length_penalty if length_penalty is not None else LengthPenalty()
        self.rule: SearchRule = (rule if rule is not None else BeamRule)(beam_size, self.length_penalty, min_len)
        self.rule_name = None if rule is None else _qualified_name(self.rule)
        if self.rule.beam_size != beam_size:
            raise InputError(
                f"rule: {self.rule_name} built a rule of beam size {self.rule.beam_size}, the search's is {beam_size}"
            )

    def __call__(
        self, model: nn.Module, src: Tensor, src_mask: Tensor, return_attention: bool = False, nbest: int = 1
    ) -> Hypotheses:
        return run_search(model, src, src_mask, self.rule, self.max_len_a, self.max_len_b, return_attention, nbest)

    def settings(self) -> dict[str, Any]:
        """The settings, JSON-able, for records; ``rule`` only where one was configured (so the default's records
        read as before it was configurable)."""
        found = {
            "search": self.name,
            "beam_size": self.beam_size,
            "length_penalty": self.length_penalty.settings(),
            "max_len_a": self.max_len_a,
            "max_len_b": self.max_len_b,
            "min_len": self.min_len,
        }
        return found if self.rule_name is None else {**found, "rule": self.rule_name}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(beam_size={self.beam_size}, length_penalty={self.length_penalty!r}, "
            f"max_len_a={self.max_len_a}, max_len_b={self.max_len_b}, min_len={self.min_len})"
        )
