"""The captured search step (:mod:`sarnmt.decoding.captured`): the fixed-shape decoder state computes what the
growing one does, a bucket is captured once and replayed for every batch that fits it, and a batch outside the
buckets, ``kernels=plain`` or a request for attention rows runs the eager search. On a CPU the body runs
uncaptured (:class:`~sarnmt.utils.graphs.Eager`); ``tests/test_gpu.py`` replays real graphs. The search's
equivalence over every system and setting is ``tests/test_search_schedule.py`` (its ``captured`` schedule)."""

from __future__ import annotations

import gc
import io
import json
import logging
import weakref

import pytest
import torch
from hydra import compose, initialize_config_dir

from sarnmt.cli.translate import translate
from sarnmt.decoding import captured
from sarnmt.decoding.beam import beam_decode
from sarnmt.decoding.captured import (
    SEARCH_BUCKETS,
    capture_record,
    empty_buffers,
    fill,
    fixed_shape,
    search_graphs,
    step_body,
)
from sarnmt.decoding.penalties import LengthPenalty, max_lengths
from sarnmt.decoding.rule import BeamRule
from sarnmt.decoding.schedule import CAPTURED, STATIC, Schedule
from sarnmt.decoding.step import Search, search_step
from sarnmt.decoding.traceback import Records
from sarnmt.kernels.choice import KernelChoice
from sarnmt.models.history import HistoryAttention
from sarnmt.utils.graphs import Eager
from tests import model_helpers, search_harness
from tests.cli_helpers import train_tiny
from tests.conftest import CONF_DIR, SYSTEM_IDS, SYSTEMS
from tests.graph_helpers import HostTraffic, Traced, meta_as_a_gpu, on_meta

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def graphs_of(model, beam_size=5, device="cpu"):
    return search_graphs(model, BeamRule(beam_size, LengthPenalty()), torch.device(device), None)


def started(model, rule, src, src_mask, steps=32) -> Search:
    """A batch's search before step 1, as the loop starts it."""
    memory, state = model.encode(src, src_mask)
    records = Records.empty(src.size(0), steps, rule.beam_size, src.device)
    return Search.start(memory, state, max_lengths(src_mask, 2.0, 10), rule.beam_size, records)


@pytest.mark.parametrize("system", range(len(SYSTEMS)), ids=SYSTEM_IDS)
def test_the_fixed_shape_state_steps_as_the_growing_one(system):
    """Twelve steps of every system from the same tokens, float64: the same logits and source attention, the
    history attention's weights the same over the items so far and zero past them, the state's step a tensor."""
    model = model_helpers.build_system(*SYSTEMS[system], seed=system, scale=3.0)
    src, src_mask, tgt, _ = model_helpers.batch()
    memory, grown = model.encode(src, src_mask)
    fixed = model.static_state(grown, 16)
    assert isinstance(fixed.steps, torch.Tensor) and fixed.steps.shape == ()
    prev = None
    with torch.no_grad():
        for t in range(12):
            a, b = model.step(prev, grown, memory), model.step(prev, fixed, memory)
            torch.testing.assert_close(b.logits, a.logits, atol=1e-12, rtol=0)
            if a.src_attention is not None:
                torch.testing.assert_close(b.src_attention, a.src_attention, atol=1e-12, rtol=0)
            if a.tgt_attention is not None:
                assert b.tgt_attention.shape == (3, 16)
                torch.testing.assert_close(b.tgt_attention[:, : t + 1], a.tgt_attention, atol=1e-12, rtol=0)
                assert not b.tgt_attention[:, t + 1 :].any()
            shapes = [x.shape for x in (b.state.hidden, *b.state.variant.values(), *b.state.recurrent.values())]
            assert shapes == [x.shape for x in (fixed.hidden, *fixed.variant.values(), *fixed.recurrent.values())]
            grown, fixed = a.state, b.state
            prev = tgt[:, t % tgt.size(1)]
    assert int(fixed.steps) == 12


def test_a_history_refuses_more_items_than_its_capacity():
    attention = HistoryAttention(4, None, key_bias=True, prefix="y_").double()
    history = attention.empty(torch.zeros(2, 4, dtype=torch.float64))
    for _ in range(3):
        history = attention.append(history, torch.randn(2, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="3 items does not fit a capacity of 2"):
        attention.with_capacity(history, 2)


def test_a_bucket_is_captured_once_and_replayed_for_every_batch_that_fits():
    model = model_helpers.build_system("cgru", "self_attentive_content", None, scale=6.0)
    for batch, flip in ((3, False), (4, False), (3, True)):  # every one in the bucket of 4 rows, 8 source positions
        src, src_mask = search_harness.sources(batch)
        src, src_mask = src[:, :7], src_mask[:, :7]
        if flip:
            src, src_mask = src.flip(0), src_mask.flip(0)
        want = beam_decode(model, src, src_mask, 5, nbest=2, schedule=STATIC)
        got = beam_decode(model, src, src_mask, 5, nbest=2, schedule=CAPTURED)
        assert got.tokens == want.tokens
        assert got.scores == pytest.approx(want.scores, abs=1e-9)
    graphs = graphs_of(model)
    assert graphs.backend.captures == 1 and list(graphs.replays) == [(4, 8, 32)] and graphs.eager_steps == 0


def test_outside_the_buckets_plain_kernels_and_attention_rows_run_the_eager_search(caplog):
    model = model_helpers.build_system("cgru", "self_attentive_content_scope", None, scale=6.0)
    longest = SEARCH_BUCKETS.source[-1]
    src = torch.randint(2, model_helpers.VOCAB, (2, longest + 1))
    src_mask = torch.ones_like(src, dtype=torch.bool)
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        for _ in range(2):
            got = beam_decode(model, src, src_mask, 2, LengthPenalty(), 0.0, 6, schedule=CAPTURED)
    want = beam_decode(model, src, src_mask, 2, LengthPenalty(), 0.0, 6, schedule=STATIC)
    assert got.tokens == want.tokens
    warned = [r.getMessage() for r in caplog.records if "outside the buckets" in r.getMessage()]
    assert len(warned) == 1 and f"{longest + 1}" in warned[0] and "rows, source, steps" in warned[0]
    graphs = graphs_of(model, 2)
    assert graphs.eager_steps == 2 and graphs.backend.captures == 0

    src, src_mask = search_harness.sources(3)
    beam_decode(model, src, src_mask, 2, return_attention=True, schedule=CAPTURED)
    assert graphs.backend.captures == 0  # attention rows: the eager loop keeps them
    model.kernels.choice = "plain"
    beam_decode(model, src, src_mask, 2, schedule=CAPTURED)
    assert graphs.backend.captures == 0
    model.kernels.choice = "auto"
    beam_decode(model, src, src_mask, 2, schedule=CAPTURED)
    assert graphs.backend.captures == 1


def test_graphs_are_dropped_when_the_parameters_move():
    model = model_helpers.build_system("cgru", "baseline", None)
    src, src_mask = search_harness.sources(3)
    beam_decode(model, src, src_mask, 5, schedule=CAPTURED)
    before = graphs_of(model)
    beam_decode(model, src, src_mask, 5, schedule=CAPTURED)
    assert graphs_of(model) is before
    model.float()  # new parameter memory: a replay would read the old
    beam_decode(model, src.clone(), src_mask, 5, schedule=CAPTURED)
    assert graphs_of(model) is not before


REPLAYED = [("cgru", "baseline", None), ("cgru", "self_attentive_content_scope", None)]
REPLAYED += [("lstm_ff_attention", "mean_residual", None), ("lstm_input_feeding", "none", None)]


@pytest.mark.parametrize(
    "system",
    [pytest.param(n, marks=() if SYSTEMS[n] in REPLAYED else pytest.mark.slow) for n in range(len(SYSTEMS))],
    ids=SYSTEM_IDS,
)
@pytest.mark.parametrize(("beam_size", "alpha"), [(5, 1.0), (1, 0.0)], ids=["beam5", "greedy"])
@pytest.mark.parametrize("rules", ["cpu", "gpu"])
def test_replayed_with_frozen_python_values_the_search_finds_what_the_eager_one_finds(
    system, beam_size, alpha, rules, monkeypatch
):
    """Replayed with a CUDA graph's semantics (:class:`tests.graph_helpers.Traced`): two batches in one bucket, with
    a minimum length (the step read from a buffer), one capture replayed for both, the same hypotheses and scores
    as the eager search, under the CPU's kernel rules and under a GPU's (every call resolved as on a CUDA device,
    on CPU tensors: the energies in one piece, tanh itself)."""
    if rules == "gpu":
        monkeypatch.setattr(KernelChoice, "on_gpu", staticmethod(lambda like: True))
    model = model_helpers.build_system(*SYSTEMS[system], seed=system, scale=6.0)
    penalty = LengthPenalty(alpha)
    graphs = search_graphs(model, BeamRule(beam_size, penalty, 2), torch.device("cpu"), Traced())
    src, src_mask = search_harness.sources(4)
    kwargs = {"nbest": beam_size, "min_len": 2}
    for flip in (False, True):  # the second batch: the same sentences the other way round
        src, src_mask = (src.flip(0), src_mask.flip(0)) if flip else (src, src_mask)
        want = beam_decode(model, src, src_mask, beam_size, penalty, **kwargs, schedule=STATIC)
        got = beam_decode(model, src, src_mask, beam_size, penalty, **kwargs, schedule=CAPTURED)
        assert got.tokens == want.tokens
        assert got.scores == pytest.approx(want.scores, abs=1e-9)
    assert graphs.backend.captures == 1 and graphs.eager_steps == 0


def test_the_kept_graphs_do_not_keep_their_model_alive():
    model = model_helpers.build_system("cgru", "self_attentive_content_scope", None)
    src, src_mask = search_harness.sources(3)
    beam_decode(model, src, src_mask, 5, schedule=CAPTURED)
    assert graphs_of(model).backend.captures == 1
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None


def test_host_traffic_lists_what_a_graph_cannot_hold(monkeypatch):
    """The check below can fail: each request to the host is listed, or fails on ``meta`` by itself."""
    x = torch.zeros(4, 3, device="meta")
    requests = {
        "made from host data": lambda: x + torch.tensor(2.0, device=x.device),
        "a Python list": lambda: x[[0, 1]],
        "reads host tensors": lambda: x * torch.ones(()),
    }
    for what, request in requests.items():
        with HostTraffic() as traffic:
            request()
        assert any(what in found for found in traffic.found), (what, traffic.found)
    for read in (lambda: x.sum().item(), lambda: x.nonzero(), lambda: x[x > 0], lambda: x.cpu().tolist()):
        with pytest.raises((RuntimeError, NotImplementedError)):
            read()
    with HostTraffic() as traffic:
        _ = x[1:3] * 2.0 + torch.arange(3, device=x.device)
    assert traffic.found == []
    model = model_helpers.build_system("cgru", "baseline", None).to("meta")
    with meta_as_a_gpu(monkeypatch):  # a GPU's rules: no cache-sized chunks of the energies
        assert model.kernels.flags(x) == model.kernels.rules(torch.device("cuda"), grad=True)
    assert model.kernels.flags(x) == model.kernels.rules(torch.device("cpu"), grad=True)


@pytest.mark.parametrize("system", range(len(SYSTEMS)), ids=SYSTEM_IDS)
def test_the_search_step_asks_nothing_of_the_host_under_a_gpus_rules(system, monkeypatch):
    """What a CUDA graph of the step would fail at, or freeze, checked without a GPU: the step's body runs on
    ``meta`` tensors under a CUDA device's kernel rules, where a read of a device value fails, and
    :class:`HostTraffic` lists every tensor made from host data or read from the host."""
    model = model_helpers.build_system(*SYSTEMS[system], seed=system, scale=3.0)
    src, src_mask = search_harness.sources(3)
    rule = BeamRule(5, LengthPenalty(), min_len=2)
    with torch.no_grad():  # the encoder and step 1 run eagerly, outside the graph
        first = fixed_shape(model, search_step(model, rule, CAPTURED, started(model, rule, src, src_mask)), 32)
    model, first = model.to("meta"), on_meta(first)
    with meta_as_a_gpu(monkeypatch), torch.no_grad():
        buffers = empty_buffers(first, SEARCH_BUCKETS.key(3, src.size(1), 32), src.size(1))
        fill(buffers, first)
        with HostTraffic() as traffic:
            done = step_body(model, rule, CAPTURED, buffers)
    assert traffic.found == []
    assert done is buffers.done and done.shape == (4,)


@pytest.mark.parametrize("system", range(len(SYSTEMS)), ids=SYSTEM_IDS)
def test_the_eager_search_step_builds_no_tensor_from_the_host_under_a_gpus_rules(system, monkeypatch):
    """The same step launched from Python on a GPU (the growing state of :data:`STATIC`, steps 1 and 2: the step
    number, the mean residual decoder's count of words, the rows to follow), on ``meta`` tensors: no tensor made from
    a host number at any step, no read of the device (a host-to-device copy a step would cost the GPU's eager loop)."""
    model = model_helpers.build_system(*SYSTEMS[system], seed=system, scale=3.0)
    src, src_mask = search_harness.sources(3)
    rule = BeamRule(5, LengthPenalty(), min_len=2)
    with torch.no_grad():
        search = started(model, rule, src, src_mask)
    model, search = model.to("meta"), on_meta(search)
    with meta_as_a_gpu(monkeypatch), torch.no_grad(), HostTraffic() as traffic:
        for _ in range(2):
            search = search_step(model, rule, STATIC, search)
    assert traffic.found == []
    assert search.scores.shape == (3, 5) and search.follow.shape == (3, 5)


def test_switching_a_kernel_flag_captures_a_new_graph():
    """A graph is a function of the kernel flags it was captured under: after ``override`` the search captures
    anew (an A/B of kernels times two graphs), and back to the configured choice it replays the first again."""
    model = model_helpers.build_system("cgru", "self_attentive_content", None, scale=6.0)
    src, src_mask = search_harness.sources(3)
    beam_decode(model, src, src_mask, 5, schedule=CAPTURED)
    before = graphs_of(model)
    assert before.backend.captures == 1
    model.kernels.override(sigmoid_tanh=False)
    beam_decode(model, src, src_mask, 5, schedule=CAPTURED)
    after = graphs_of(model)
    assert after is not before and after.backend.captures == 1
    model.kernels.override()
    beam_decode(model, src, src_mask, 5, schedule=CAPTURED)
    assert graphs_of(model) is before and before.backend.captures == 1 and after.backend.captures == 1


def test_a_bucket_whose_buffers_run_out_of_memory_runs_eagerly_and_is_recorded(monkeypatch, caplog):
    """The buffers of a bucket are allocated inside the guard against running out of device memory: that bucket
    runs eagerly (warned once, recorded), the search finds what the eager one finds, later buckets may capture."""
    model = model_helpers.build_system("cgru", "baseline", None, scale=6.0)
    graphs = search_graphs(model, BeamRule(5, LengthPenalty()), torch.device("cpu"), Eager())
    src, src_mask = search_harness.sources(3)
    allocate = captured.empty_buffers

    def no_room_for_four_rows(first, key, length):
        if key[0] == 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        return allocate(first, key, length)

    monkeypatch.setattr(captured, "empty_buffers", no_room_for_four_rows)
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        got = beam_decode(model, src, src_mask, 5, nbest=2, schedule=CAPTURED)
    want = beam_decode(model, src, src_mask, 5, nbest=2, schedule=STATIC)
    assert got.tokens == want.tokens and got.scores == pytest.approx(want.scores, abs=1e-9)
    [warning] = [r.getMessage() for r in caplog.records]
    assert "capturing bucket (4, 8, 32) ran out of device memory" in warning and "runs eagerly" in warning
    assert graphs.too_big == {(4, 8, 32)} and not graphs.broken and graphs.backend.captures == 0
    record = capture_record(model, torch.device("cpu"))
    assert record["captured"] is False and record["eager_batches"] == 1 and "out of device memory" in record["why"]
    beam_decode(model, src[:2], src_mask[:2], 5, schedule=CAPTURED)  # two rows: a bucket with room
    assert graphs.backend.captures == 1 and list(graphs.replays) == [(2, 8, 32)]


class Failing(Eager):
    """A capture that fails as CUDA's does when a step does what a graph cannot hold."""

    def capture(self, body):
        raise RuntimeError("operation not permitted when stream is capturing")


def test_a_failed_capture_is_recorded_not_only_warned(caplog):
    """Any other failure at capture: the search runs on eagerly (the same hypotheses), every later batch too, and
    the run's record says ``captured: false`` and why."""
    model = model_helpers.build_system("cgru", "baseline", None, scale=6.0)
    search_graphs(model, BeamRule(5, LengthPenalty()), torch.device("cpu"), Failing())
    src, src_mask = search_harness.sources(3)
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        got = [beam_decode(model, src, src_mask, 5, schedule=CAPTURED) for _ in range(2)]
    want = beam_decode(model, src, src_mask, 5, schedule=STATIC)
    assert all(hyps.tokens == want.tokens for hyps in got)
    assert len(caplog.records) == 1
    assert capture_record(model, torch.device("cpu")) == {
        "captured": False,
        "graphs": 0,
        "eager_batches": 2,
        "why": "capturing bucket (4, 8, 32) failed (RuntimeError: operation not permitted when stream is capturing)",
    }
    beam_decode(model, src, src_mask, 5, schedule=CAPTURED)
    assert capture_record(model, torch.device("cpu"))["eager_batches"] == 3


def test_a_captured_search_is_recorded_as_captured():
    model = model_helpers.build_system("cgru", "baseline", None, scale=6.0)
    cpu = torch.device("cpu")
    assert capture_record(model, cpu) == {
        "captured": False,
        "graphs": 0,
        "eager_batches": 0,
        "why": "a search on cpu launches every step from Python (Schedule.for_device)",
    }
    src, src_mask = search_harness.sources(3)
    beam_decode(model, src, src_mask, 5, schedule=CAPTURED)
    assert capture_record(model, cpu) == {"captured": True, "graphs": 1, "eager_batches": 0, "why": None}
    plain = model_helpers.build_system("cgru", "baseline", None)
    plain.kernels.choice = "plain"
    beam_decode(plain, src, src_mask, 5, schedule=CAPTURED)
    assert capture_record(plain, cpu)["why"].startswith("kernels=plain")


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("tiny"))


def translated_capture(checkpoint, caplog) -> dict:
    """``translate``'s record of the capture: the JSON of its closing log line (``capture: {...}``)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("translate", [f"ckpt_path={checkpoint}", "progress=false", "decoding=beam", "device=cpu"])
    caplog.clear()
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="sarnmt"):
        translate(cfg, io.StringIO("ta brin\nnu gorm ta\n\nbrin\n"), out)
    assert out.getvalue().count("\n") == 4
    [line] = [r.getMessage() for r in caplog.records if "capture: " in r.getMessage()]
    assert line.startswith("wrote 4 lines; capture: ")
    return json.loads(line.split("capture: ", 1)[1])


def test_translate_records_whether_its_search_was_captured_and_why_not(tiny_checkpoint, monkeypatch, caplog):
    """``translate`` records what ``evaluate``'s record does (:func:`capture_record`'s keys): on a CPU no capture
    and why; under a GPU's schedule a replayed search (the injectable backend runs it uncaptured on a CPU); and a
    capture that fails: ``captured: false`` and why, not only the warning."""
    assert translated_capture(tiny_checkpoint, caplog) == {
        "captured": False,
        "graphs": 0,
        "eager_batches": 0,
        "why": "a search on cpu launches every step from Python (Schedule.for_device)",
    }
    monkeypatch.setattr(Schedule, "for_device", classmethod(lambda cls, device: CAPTURED))
    record = translated_capture(tiny_checkpoint, caplog)
    assert record == {"captured": True, "graphs": 1, "eager_batches": 0, "why": None}
    monkeypatch.setattr(captured, "Eager", Failing)  # the backend a CPU's search captures with
    record = translated_capture(tiny_checkpoint, caplog)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert record["captured"] is False and record["graphs"] == 0 and record["eager_batches"] == 1
    assert record["why"].startswith("capturing bucket (4, ") and record["why"].endswith(
        "failed (RuntimeError: operation not permitted when stream is capturing)"
    )
    assert len(warned) == 1 and record["why"] in warned[0]
