"""How the search meets the host (:class:`sarnmt.decoding.schedule.Schedule`): the static schedule a GPU runs keeps its
shapes, reads "every sentence is done" once per 8 steps through a non-blocking copy, takes its candidates on the
logits with their log-sum-exp and traces back on the device; here on the CPU it finds what the CPU's own schedule
(the search's original arithmetic, ``tests/test_search_harness.py``) finds."""

from __future__ import annotations

import collections
import dataclasses

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from sarnmt.data.text.codecs import EOS
from sarnmt.decoding.beam import beam_decode
from sarnmt.decoding.host_flag import DonePoll
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.decoding.rule import BeamRule
from sarnmt.decoding.schedule import CAPTURED, PER_STEP, STATIC, Schedule
from tests import model_helpers, search_harness
from tests.conftest import SYSTEM_IDS, SYSTEMS

# what makes the host wait for the device: a scalar read, a data-dependent shape, a copy to a Python list or array
SYNC_OPS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::unique", "aten::is_nonzero"}
SYNC_METHODS = ("tolist", "item", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__")


# the machine is shared: two threads of tiny products spin against each other there
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_schedule_is_a_rule_of_the_device():
    assert Schedule.for_device(torch.device("cpu")) is PER_STEP
    for device in ("cuda", "cuda:1", "mps"):
        rules = Schedule.for_device(torch.device(device))
        assert not rules.compact and not rules.exact and rules.check_every >= 8 and rules.lag > 0
        # a CUDA device replays its steps from captured graphs; another accelerator runs the same loop eagerly
        assert rules is (CAPTURED if device.startswith("cuda") else STATIC)
        assert rules.capture == device.startswith("cuda")


def test_the_poll_reads_each_copy_lag_steps_after_it_was_made():
    """Copies at steps 8, 16, ...; the copy of step 8 is read at step 10 and says what was true at step 8."""
    poll = DonePoll(check_every=8, lag=2)
    done_from = 11  # every sentence is done from step 11 on
    stops = [t for t in range(1, 41) if poll.stop(t, torch.tensor([t >= done_from, t >= done_from]))]
    # step 10 reads step 8's copy (not all done yet); step 18 reads step 16's: the first stop
    assert stops[0] == 18 and stops == [18, 26, 34]
    assert sorted(poll.flags) == [40]  # the copy of step 40 not yet read; the others read once each
    never = DonePoll(check_every=1, lag=0)
    assert not any(never.stop(t, torch.tensor([True, False])) for t in range(1, 10)) and not never.flags


def count_syncs(monkeypatch, run) -> tuple[int, collections.Counter]:
    """Host reads during ``run()``: the profiler's sync ops, and the tensor methods that copy to the host."""
    calls: collections.Counter = collections.Counter()
    for name in SYNC_METHODS:
        method = getattr(torch.Tensor, name)

        def counted(self, *args, _method=method, _name=name, **kwargs):
            calls[_name] += 1
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    monkeypatch.undo()
    ops = collections.Counter(event.name for event in prof.events() if event.name in SYNC_OPS)
    # .item() and its aten::_local_scalar_dense are one read
    reads = sum(calls.values()) + sum(n for op, n in ops.items() if op != "aten::_local_scalar_dense")
    reads = max(reads, ops["aten::_local_scalar_dense"])
    return reads, ops + calls


@pytest.mark.parametrize("schedule", [STATIC, CAPTURED], ids=["static", "captured"])
def test_a_40_step_beam_5_decode_meets_the_host_at_most_once_per_8_steps(monkeypatch, schedule):
    model = model_helpers.build_system("cgru", "self_attentive_content_scope", None, scale=6.0).float()
    src, src_mask, _, _ = model_helpers.batch()
    steps = []
    step = model.step

    def counted_step(*args):
        steps.append(1)
        return step(*args)

    monkeypatch.setattr(model, "step", counted_step)
    out = {}

    def run():
        out["hyps"] = beam_decode(model, src, src_mask, 5, LengthPenalty(), 0.0, 40, min_len=40, schedule=schedule)

    reads, seen = count_syncs(monkeypatch, run)
    assert len(steps) == 40 and [len(t) for t in out["hyps"].tokens] == [40, 40, 40]
    assert reads <= 40 // 8, seen
    # and the CPU's own schedule, which reads at every step, finds the same
    monkeypatch.setattr(model, "step", step)
    cpu = beam_decode(model, src, src_mask, 5, LengthPenalty(), 0.0, 40, min_len=40)
    assert cpu.tokens == out["hyps"].tokens
    reads_cpu, _ = count_syncs(monkeypatch, lambda: beam_decode(model, src, src_mask, 5, LengthPenalty(), 0.0, 16))
    assert reads_cpu > 16 // 8  # the count can fail: the CPU's schedule, which reads at every step, is caught


# the default run: one system of each model and a cGRU with a history; the others under -m slow
FAST = [
    ("cgru", "baseline", None),
    ("cgru", "self_attentive_rnn", "decoder.form=appendix"),
    ("lstm_fixed_context", "self_attentive_content", None),
    ("lstm_ff_attention", "mean_residual", None),
    ("lstm_input_feeding", "none", None),
]
CASES = [
    pytest.param(
        search_harness.Case(system, search, 8, penalty, nbest, min_len),
        id=f"{SYSTEM_IDS[system]}|{search}|{penalty}",
        marks=() if SYSTEMS[system] in FAST else pytest.mark.slow,
    )
    for system in range(len(SYSTEMS))
    for search, penalty, nbest, min_len in [
        ("greedy", "-", 1, 0),
        ("beam5", "dl4mt", 1, 0),
        ("beam5", "gnmt", 5, 0),
        ("beam3", "none", 3, 3),
    ]
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(
    "schedule",
    [
        STATIC,
        dataclasses.replace(STATIC, exact=True),
        Schedule(check_every=4, compact=True, lag=0, exact=True),
        CAPTURED,  # on a CPU its body runs uncaptured (sarnmt.utils.graphs.Eager): the rearranged step is checked
    ],
    ids=["static", "static-exact", "compact-every-4", "captured"],
)
def test_the_static_schedule_finds_what_the_cpu_schedule_finds(case, schedule):
    """In float64 (where the float32 rounding of a product, which on a CPU depends on its number of rows, cannot
    tip a choice): the same hypotheses, n-best lists and attention rows; the same scores with the exact arithmetic
    and within 1e-5 with the log-sum-exp."""
    model = model_helpers.build_system(*SYSTEMS[case.system], seed=case.system, scale=6.0)
    src, src_mask = search_harness.sources(case.batch)
    search = search_harness.search_of(case)
    settings = (case.beam_size, search.length_penalty, search.max_len_a, search.max_len_b)
    kwargs = {"return_attention": case.attention, "nbest": case.nbest, "min_len": case.min_len}
    want = beam_decode(model, src, src_mask, *settings, **kwargs, schedule=PER_STEP)
    got = beam_decode(model, src, src_mask, *settings, **kwargs, schedule=schedule)
    assert got.tokens == want.tokens
    assert [[e.tokens for e in n] for n in got.nbest] == [[e.tokens for e in n] for n in want.nbest]
    tol = 0 if schedule.exact else 1e-5
    assert got.scores == pytest.approx(want.scores, abs=tol, rel=0)
    assert got.normalized_scores == pytest.approx(want.normalized_scores, abs=tol, rel=0)
    for a, b in [(got.src_attention, want.src_attention), (got.tgt_attention, want.tgt_attention)]:
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            # float64 through up to 18 steps of a peaked model: another number of rows sums a product in another
            # order, and the rows moved by up to 2.7e-12 on an AVX2 CPU (1e-12 held on AVX-512); 1e-9 is still
            # a thousand times below anything that can tip a choice
            torch.testing.assert_close(x, y, atol=1e-9, rtol=0)


def test_candidates_from_logits_equal_those_of_the_log_softmax():
    """On hand-made logits (float32; two sentences, three slots, V = 7), with min_len and with a vocabulary smaller
    than 2k: the same candidates, scores within rounding."""
    gen = torch.Generator().manual_seed(0)
    for vocab, beam, t, min_len in [(7, 3, 2, 0), (7, 3, 2, 2), (2, 3, 2, 0), (7, 1, 1, 0)]:
        width = 1 if t == 1 else beam
        logits = torch.randn(2, width, vocab, generator=gen) * 4
        sums = torch.randn(2, width, generator=gen).sub(3)
        sums[1, -1] = float("-inf")  # an empty slot
        rule = BeamRule(beam, LengthPenalty(), min_len)
        want = rule.candidates(torch.log_softmax(logits, -1), sums, torch.tensor(t))
        got = rule.candidates_from_logits(logits.clone(), sums, torch.tensor(t))
        real = want.scores > float("-inf")
        assert torch.equal(got.scores > float("-inf"), real)
        torch.testing.assert_close(got.scores[real], want.scores[real], atol=2e-6, rtol=0)
        assert torch.equal(got.tokens[real], want.tokens[real]) and torch.equal(got.parents[real], want.parents[real])
        assert ((got.parents >= 0) & (got.parents < width)).all()
        if t <= min_len:
            assert not (got.tokens[real] == EOS).any()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_the_static_schedule_finds_what_the_cpu_finds():
    for system in (0, SYSTEMS.index(("lstm_ff_attention", "self_attentive_rnn", None))):
        model = model_helpers.build_system(*SYSTEMS[system], seed=system, scale=6.0)
        src, src_mask = search_harness.sources(8)
        cpu = beam_decode(model, src, src_mask, 5, LengthPenalty(), 1.5, 5, nbest=2, return_attention=True)
        model = model.cuda()
        gpu = beam_decode(
            model, src.cuda(), src_mask.cuda(), 5, LengthPenalty(), 1.5, 5, nbest=2, return_attention=True
        )
        assert gpu.tokens == cpu.tokens
        assert gpu.scores == pytest.approx(cpu.scores, abs=1e-5)
        assert all(a.device.type == "cpu" for a in gpu.src_attention)
