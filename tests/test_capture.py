"""The captured training step (sarnmt/training/capture.py): bucket choice, padding that changes nothing, the eager
fallbacks with their one-time warnings, all on the CPU through the :class:`Eager` backend; the CUDA graph itself in
the test marked ``gpu`` (skipped without a CUDA device)."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from functools import partial

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader

from sarnmt.data.loading.batching import Batch, pad_sequences
from sarnmt.errors import InputError
from sarnmt.kernels.choice import KernelChoice
from sarnmt.kernels.encoder import unrolled_bigru
from sarnmt.kernels.masked_lstm import masked_lstm
from sarnmt.kernels.output import every_position
from sarnmt.kernels.registry import resolve
from sarnmt.models.encoder import DL4MTBiGRU
from sarnmt.models.hot_spots import EQUATIONS, kernel_choice, packed_lstm
from sarnmt.models.positions import selected_rows
from sarnmt.training.capture import Buckets, CaptureStrategy, CudaGraphs, Eager, StaticBatch, padded_loss
from sarnmt.training.lit_module import TranslationModule
from sarnmt.training.optim import Adadelta
from sarnmt.utils.oom import halve_on_oom
from tests.conftest import SYSTEM_IDS, SYSTEMS, decoder_cfg
from tests.graph_helpers import HostTraffic, Traced, meta_as_a_gpu, on_meta
from tests.model_helpers import VOCAB, build, build_system
from tests.model_helpers import batch as model_batch

BUCKETS = {"rows": [2, 4, 8], "source": [4, 8, 12], "target": [4, 8, 12]}


def batches(shapes: list[tuple[int, int, int]], seed: int = 0) -> list[Batch]:
    """Batches of (rows, longest source, longest target) tokens before EOS, the other rows shorter."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for rows, source, target in shapes:
        srcs = [torch.randint(2, VOCAB, (max(1, source - r),), generator=gen).tolist() for r in range(rows)]
        tgts = [torch.randint(2, VOCAB, (max(1, target - 2 * r),), generator=gen).tolist() for r in range(rows)]
        (src, src_mask), (tgt, tgt_mask) = pad_sequences(srcs), pad_sequences(tgts)
        out.append(Batch(src, src_mask, tgt, tgt_mask, torch.arange(rows)))
    return out


def fit(
    data: list[Batch],
    strategy=None,
    normalization: str = "sentence",
    accelerator: str = "cpu",
    dtype: torch.dtype = torch.float64,
    system: tuple[str, str, str | None] | None = None,
) -> TranslationModule:
    """A tiny baseline (float64 unless ``dtype``; another of the 24 systems with ``system``) trained on ``data``, one
    update per batch, clipped at 1 (the paper's)."""
    if system is None:
        net = build(decoder_cfg("baseline"), emb_dim=6, hidden_dim=8, seed=3)
    else:
        net = build_system(*system, emb_dim=6, hidden_dim=8, seed=3)
    net = net.to(dtype).train()
    module = TranslationModule(
        net, partial(Adadelta, lr=1.0, rho=0.95, eps=1e-6, compiled=False), normalization, bleu=False
    )
    trainer = L.Trainer(
        accelerator=accelerator,
        devices=1,
        strategy=strategy if strategy is not None else "auto",
        max_steps=len(data),
        gradient_clip_val=1.0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, train_dataloaders=DataLoader(data, batch_size=None, shuffle=False))
    return module


def assert_same(a: TranslationModule, b: TranslationModule) -> None:
    for (name, x), y in zip(a.net.named_parameters(), b.net.parameters(), strict=True):
        assert torch.allclose(x, y, rtol=1e-9, atol=1e-11), name


def captured(backend=None, **kwargs) -> CaptureStrategy:
    return CaptureStrategy(device="cpu", buckets=kwargs.pop("buckets", BUCKETS), backend=backend or Eager(), **kwargs)


def test_the_smallest_bucket_that_holds_the_shape():
    buckets = Buckets.from_config(BUCKETS)
    assert buckets.key(3, 5, 4) == (4, 8, 4)
    assert buckets.key(2, 4, 12) == (2, 4, 12)
    assert buckets.key(9, 4, 4) is None and buckets.key(2, 13, 4) is None and buckets.key(2, 4, 13) is None


@pytest.mark.parametrize(
    "bad",
    [
        {"rows": [], "source": [4], "target": [4]},
        {"rows": [4, 2], "source": [4], "target": [4]},
        {"rows": [2], "source": [0, 4], "target": [4]},
        {"rows": [2]},
    ],
)
def test_bad_buckets_are_refused_naming_the_key(bad):
    with pytest.raises(InputError, match=r"^trainer\.strategy\.buckets\.(rows|source|target)="):
        Buckets.from_config(bad)


@pytest.mark.parametrize("normalization", ["sentence", "token"])
def test_padded_captured_steps_train_as_the_eager_steps(one_torch_thread, normalization):
    # every batch padded to a bigger bucket (rows, source and target), two batches sharing one bucket
    data = batches([(3, 5, 4), (2, 7, 9), (3, 6, 4), (7, 10, 11)])
    backend = Eager()
    strategy = captured(backend)
    assert_same(fit(data, strategy, normalization), fit(data, normalization=normalization))
    assert backend.captures == 3 and strategy.graphs.eager_steps == 0


@pytest.mark.parametrize("rules", ["cpu", "gpu"])
@pytest.mark.parametrize(
    "system",
    [
        None,
        pytest.param(("lstm_input_feeding", "none", None), marks=pytest.mark.slow),
        pytest.param(("lstm_fixed_context", "baseline", None), marks=pytest.mark.slow),
    ],
    ids=str,
)
def test_replayed_with_frozen_python_values_captured_steps_train_as_the_eager_steps(
    one_torch_thread, monkeypatch, rules, system
):
    """The same, replayed with a CUDA graph's semantics (:class:`tests.graph_helpers.Traced`: the forward and
    backward passes recorded once on the buffers, parameters and gradients, every Python value frozen), for the
    baseline and the LSTM systems (their masked encoder), under the CPU's kernel rules and under a GPU's (every call
    resolved as on a CUDA device, on CPU tensors)."""
    if rules == "gpu":
        monkeypatch.setattr(KernelChoice, "on_gpu", staticmethod(lambda like: True))
    data = batches([(3, 5, 4), (2, 7, 9), (3, 6, 4), (7, 10, 11)])
    backend = Traced()
    strategy = captured(backend)
    assert_same(fit(data, strategy, system=system), fit(data, system=system))
    assert backend.captures == 3 and strategy.graphs.eager_steps == 0


def test_a_batch_that_is_no_translation_batch_runs_eagerly_with_one_warning(monkeypatch, caplog):
    """A language model's segments under ``trainer=gpu``: the eager step, and one warning that says so."""
    from lightning.pytorch.strategies import SingleDeviceStrategy

    monkeypatch.setattr(SingleDeviceStrategy, "training_step", lambda self, *args, **kwargs: "eager")
    strategy = captured()
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        assert [strategy.training_step((torch.zeros(2, 3), torch.zeros(2, 3))) for _ in range(3)] == ["eager"] * 3
    warnings = [r.getMessage() for r in caplog.records if "not a translation batch" in r.getMessage()]
    assert warnings == [
        "captured training step: a batch of type tuple is not a translation batch; its steps run "
        "eagerly (this warning is shown once)"
    ]
    assert strategy.graphs is None  # nothing captured


def test_a_shape_outside_the_buckets_runs_eagerly_with_one_warning(one_torch_thread, caplog):
    data = batches([(3, 5, 4), (2, 14, 4), (9, 5, 4), (2, 15, 3), (3, 5, 4)])  # three outside: long and wide
    strategy = captured()
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        module = fit(data, strategy)
    assert_same(module, fit(data))
    warnings = [r.getMessage() for r in caplog.records if "captured training step" in r.getMessage()]
    assert len(warnings) == 1 and "outside the buckets" in warnings[0] and "runs eagerly" in warnings[0]
    assert strategy.graphs.eager_steps == 3 and len(strategy.graphs.replays) == 1


def test_graphs_beyond_max_graphs_and_a_failed_capture_run_eagerly(one_torch_thread, caplog):
    data = batches([(3, 5, 4), (2, 7, 9), (3, 5, 4), (2, 7, 10)])
    strategy = captured(max_graphs=1)
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        assert_same(fit(data, strategy), fit(data))
    assert [r.getMessage().count("max_graphs=1") for r in caplog.records] == [1]
    assert strategy.graphs.eager_steps == 2

    class Failing:
        def capture(self, body):
            raise RuntimeError("operation not permitted when stream is capturing")

    caplog.clear()
    strategy = captured(Failing())
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        assert_same(fit(data, strategy), fit(data))
    assert len(caplog.records) == 1 and "capturing bucket (4, 8, 8) failed" in caplog.records[0].getMessage()
    assert strategy.graphs.eager_steps == 4

    class TooBig(Eager):  # the first bucket met, (4, 8, 8), does not fit the device; the next, (2, 8, 12), does
        def capture(self, body):
            if self.captures == 0:
                self.captures = -1
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return super().capture(body)

    caplog.clear()
    strategy = captured(TooBig())
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        assert_same(fit(data, strategy), fit(data))
    [warning] = [r.getMessage() for r in caplog.records]
    assert "capturing bucket (4, 8, 8) ran out of device memory" in warning and "runs eagerly" in warning
    assert strategy.graphs.eager_steps == 2 and list(strategy.graphs.replays) == [(2, 8, 12)]
    assert not strategy.graphs.broken and strategy.graphs.too_big == {(4, 8, 8)}


def test_accumulated_gradients_run_eagerly_with_one_warning(one_torch_thread, caplog, monkeypatch):
    data = batches([(3, 5, 4), (2, 7, 9), (3, 6, 4), (2, 7, 9)])
    real = L.Trainer

    def accumulating(**kwargs):
        return real(**kwargs, accumulate_grad_batches=2)

    monkeypatch.setattr(L, "Trainer", accumulating)
    strategy = captured()
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        assert_same(fit(data, strategy), fit(data))
    assert [r.getMessage().count("accumulate_grad_batches=2") for r in caplog.records] == [1]
    assert not strategy.graphs.replays


def test_the_padded_training_step_waits_on_the_host_nowhere():
    """What a CUDA graph cannot hold: a host sync (a read of a device value, or a shape decided by one) inside the
    captured forward and backward passes, counted as the profiler's host-syncing ops (``aten::item``,
    ``aten::nonzero``, ``aten::_local_scalar_dense``)."""
    from torch.profiler import ProfilerActivity, profile

    net = build(decoder_cfg("baseline"), emb_dim=6, hidden_dim=8, seed=3).train()
    (batch,) = batches([(3, 5, 4)])
    static = StaticBatch.empty((4, 8, 8), batch, torch.device("cpu"))
    static.fill(batch, "sentence")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss, _, _ = padded_loss(net, static, "sentence")
        loss.backward()
    syncs = [e.name for e in prof.events() if e.name in ("aten::_local_scalar_dense", "aten::nonzero", "aten::item")]
    assert syncs == []


@pytest.mark.parametrize(("model", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_static_shapes_give_every_systems_loss_and_gradients(model, name, override, one_torch_thread):
    """Under ``static_shapes`` (the captured step's forms: every position read out, the unrolled encoder) each
    system's −log p and gradients are those of its usual forms (selected positions), zero at padding."""
    net = build_system(model, name, override, emb_dim=6, hidden_dim=8, seed=5).double().train()
    src, src_mask, tgt, tgt_mask = model_batch()

    def nll_and_grads(static: bool):
        torch.manual_seed(0)  # the same dropout masks
        net.zero_grad()
        with net.kernels.static_shapes() if static else nullcontext():
            nll = net.nll(src, src_mask, tgt, tgt_mask)
        (nll * torch.linspace(0.5, 1.5, nll.numel(), dtype=nll.dtype).view_as(nll)).sum().backward()
        return nll.detach(), [p.grad.clone() for p in net.parameters() if p.grad is not None]

    (usual, usual_grads), (static, static_grads) = nll_and_grads(False), nll_and_grads(True)
    assert torch.equal(static[~tgt_mask.bool()], torch.zeros_like(static[~tgt_mask.bool()]))
    torch.testing.assert_close(static, usual, rtol=1e-10, atol=1e-12)
    assert len(static_grads) == len(usual_grads)
    for a, b in zip(static_grads, usual_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize(("model", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_the_captured_training_step_asks_nothing_of_the_host_under_a_gpus_rules(model, name, override, monkeypatch):
    """What a CUDA graph of the forward and backward passes would fail at, or freeze, checked without a GPU: they
    run on ``meta`` tensors under a CUDA device's rules (the LSTM systems' packed encoder reads its lengths on the
    host; under ``static_shapes`` the masked loop runs instead), where a read of a device value fails, and
    :class:`~tests.graph_helpers.HostTraffic` lists every tensor made from host data or read from the host."""
    net = build_system(model, name, override, emb_dim=6, hidden_dim=8, seed=5).train()
    (batch,) = batches([(3, 5, 4)])
    static = StaticBatch.empty((4, 8, 8), batch, torch.device("cpu"))
    static.fill(batch, "sentence")
    net, static = net.to("meta"), on_meta(static)
    with meta_as_a_gpu(monkeypatch), HostTraffic() as traffic:
        loss, nll_sum, tokens = padded_loss(net, static, "sentence")
        loss.backward()
    assert traffic.found == []
    assert loss.shape == () and all(p.grad is not None for p in net.parameters() if p.requires_grad)


def test_the_masked_lstm_encodes_as_the_packed_one():
    """:func:`masked_lstm` (no host read) against PyTorch's packed LSTM, one and two directions, float64: the
    annotations, both final states and every gradient, for sentences of full length, of length 1 and between."""
    torch.manual_seed(0)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] + [0] * 6]).bool()
    for bidirectional in (False, True):
        rnn = torch.nn.LSTM(5, 4, batch_first=True, bidirectional=bidirectional).double()
        emb = torch.randn(3, 7, 5, dtype=torch.float64, requires_grad=True)
        results = []
        for encoder in (packed_lstm, masked_lstm):
            rnn.zero_grad()
            emb.grad = None
            annotations, hidden, cell = encoder(rnn, emb, mask)
            (annotations.sum() + 1.3 * hidden.sum() + 0.7 * cell.sum()).backward()
            grads = [emb.grad.clone(), *(p.grad.clone() for p in rnn.parameters())]
            results.append((annotations.detach(), hidden.detach(), cell.detach(), *grads))
        assert results[1][0].shape == (3, 7, 8 if bidirectional else 4)
        assert not results[1][0][~mask].any()
        for got, want in zip(*results, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)


def test_a_gpus_captured_step_runs_the_masked_encoder_and_reads_every_position():
    """The rules of a CUDA device, read without one: ``kernels=auto`` runs PyTorch's packed GRU there (its lengths
    are read on the host) and selects the real positions (``nonzero``); under ``static_shapes`` neither."""
    choice = kernel_choice("auto")
    cuda = torch.device("cuda")
    usual = resolve(choice.rules(cuda, grad=True), EQUATIONS)
    assert usual.bigru == DL4MTBiGRU.packed and usual.output_rows is selected_rows
    with choice.static_shapes():
        flags = choice.rules(cuda, grad=True)
        static = resolve(flags, EQUATIONS)
    assert flags.static_shapes and not choice.rules(cuda, grad=True).static_shapes  # the context ends it
    assert static.bigru.func is unrolled_bigru and static.output_rows is every_position


def test_kernels_plain_turns_the_capture_off(one_torch_thread):
    data = batches([(3, 5, 4)])
    strategy = captured(kernels="plain")
    fit(data, strategy)
    assert strategy.graphs is None


def test_out_of_memory_halves_the_batch_with_a_warning(caplog):
    tried = []

    def run(size: int) -> str:
        tried.append(size)
        if size > 100:
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        return f"ran {size}"

    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        assert halve_on_oom(run, 512) == (64, "ran 64")
    assert tried == [512, 256, 128, 64]
    assert [r.getMessage() for r in caplog.records][
        0
    ] == "out of device memory at batch size 512; halving it to 256 and going on"
    with pytest.raises(torch.OutOfMemoryError):
        halve_on_oom(run, 400, minimum=200)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graphs_train_as_the_eager_steps_on_the_gpu():
    data = batches([(3, 5, 4), (2, 7, 9), (3, 6, 3), (3, 5, 4)])
    cuda = [Batch(*(t.cuda() for t in (b.src, b.src_mask, b.tgt, b.tgt_mask, b.ids))) for b in data]
    strategy = CaptureStrategy(device="cuda", buckets=BUCKETS, backend=CudaGraphs())

    def fit_cuda(strategy):
        return fit(cuda, strategy, accelerator="gpu", dtype=torch.float32)

    graphed = fit_cuda(strategy)
    assert strategy.graphs.eager_steps == 0 and not strategy.graphs.broken and len(strategy.graphs.replays) == 2
    eager = fit_cuda(CaptureStrategy(device="cuda", buckets=BUCKETS, kernels="plain"))
    for x, y in zip(graphed.net.parameters(), eager.net.parameters(), strict=True):
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-6)


def test_trainer_gpu_trains_the_toy_job_as_trainer_cpu(tmp_path, one_torch_thread, caplog, monkeypatch):
    """The whole main job through trainer=gpu's config (its strategy, buckets and the module's logging), on the CPU
    with the Eager backend: the same losses as trainer=cpu, every batch inside the buckets."""
    from sarnmt.training.run import train
    from tests.conftest import compose_train

    small = ["data.n_train=300", "data.n_dev=40", "data.n_test=40", "data.max_tokens=600", "model.emb_dim=16"]
    small += ["model.hidden_dim=32", "trainer.max_epochs=2", "test=false", "validation=cost", "logger=csv"]
    small += ["validation.val_check_interval=5", "val_bleu=false"]
    graphed = ["trainer=gpu", "trainer.accelerator=cpu", "trainer.precision=32-true", "trainer.strategy.device=cpu"]
    graphed += ["+trainer.strategy.backend._target_=sarnmt.training.capture.Eager"]
    captures, replays = [], []

    def capture(self, body):
        captures.append(body)
        return lambda: replays.append(1) or body()

    monkeypatch.setattr(Eager, "capture", capture)
    plain = train(compose_train([*small, "trainer=cpu"], output_dir=tmp_path / "cpu"))
    assert not captures
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        captured = train(compose_train([*small, *graphed], output_dir=tmp_path / "gpu"))
    assert not [r for r in caplog.records if "captured training step" in r.getMessage()]
    assert 1 <= len(captures) <= 64 and len(replays) > len(captures)  # every update replayed, buckets reused
    for key in ("train/loss", "val/loss"):
        assert captured[key] == pytest.approx(plain[key], rel=1e-4), key
