"""On a CUDA device: the fused kernels compute what the plain ones do, the GPU what the CPU does, and bf16 autocast
trains and decodes (``make gpu-check`` runs these first; docs/performance.md).

Marked ``gpu`` and skipped without a CUDA device. ``SARNMT_GPU_TEST_DEVICE=cpu`` runs the same bodies on the CPU:
``make gpu-check``'s dry run does that (``tests/test_gpu_check.py``), so that these tests cannot break on first
contact with a GPU.
"""

from __future__ import annotations

import os

import pytest
import torch

from sarnmt.decoding.beam import beam_decode
from sarnmt.decoding.captured import search_graphs
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.decoding.rule import BeamRule
from sarnmt.decoding.schedule import CAPTURED, STATIC
from sarnmt.kernels import KernelChoice
from sarnmt.models.hot_spots import kernel_choice
from sarnmt.training.loss import translation_loss
from sarnmt.training.optim import Adadelta, adadelta_update
from tests.conftest import SYSTEM_IDS, SYSTEMS, decoder_cfg
from tests.model_helpers import VOCAB, batch, build, build_system

DEVICE = torch.device(os.environ.get("SARNMT_GPU_TEST_DEVICE", "cuda"))
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(DEVICE.type == "cuda" and not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _on_device(tensors):
    return tuple(t.to(DEVICE) for t in tensors)


def _set_kernels(model: torch.nn.Module, choice: str) -> None:
    for module in [model, *model.modules()]:
        if isinstance(getattr(module, "kernels", None), KernelChoice):
            module.kernels = kernel_choice(choice)


def _training_mode(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` in training mode: cuDNN's RNN backward refuses eval mode ("cudnn RNN backward can only be called in
    training mode", seen on the first GPU lent). The test models have no dropout, so both modes compute the same."""
    assert all(m.p == 0 for m in model.modules() if isinstance(m, torch.nn.Dropout))
    assert all(getattr(m, "dropout", 0) == 0 for m in model.modules() if isinstance(m, torch.nn.RNNBase))
    return model.train()


def _nll_grads_hyps(model, src, src_mask, tgt, tgt_mask):
    _training_mode(model)
    nll = model.nll(src, src_mask, tgt, tgt_mask)
    grads = torch.autograd.grad(nll.sum(), list(model.parameters()), allow_unused=True)
    hyps = beam_decode(model, src, src_mask, 3, max_len_a=1.0, max_len_b=3)
    return nll, grads, hyps


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_fused_and_auto_kernels_equal_plain_ones_on_the_device(system, name, override):
    """kernels=fused and kernels=auto (on a GPU: PyTorch's packed cuDNN GRU for the encoder and its tanh) compute
    what kernels=plain computes on the device: the training NLL, every gradient and beam search's output, in
    float64."""
    model = build_system(system, name, override, scale=2.0).to(DEVICE)
    src, src_mask, tgt, tgt_mask = _on_device(batch())
    results = {}
    for choice in ("fused", "auto", "plain"):
        _set_kernels(model, choice)
        results[choice] = _nll_grads_hyps(model, src, src_mask, tgt, tgt_mask)
    nll_p, grads_p, hyps_p = results["plain"]
    for choice in ("fused", "auto"):
        nll, grads, hyps = results[choice]
        torch.testing.assert_close(nll, nll_p, atol=1e-11, rtol=0, msg=f"{choice}: NLL")
        for got, want in zip(grads, grads_p, strict=True):
            assert (got is None) == (want is None)
            if got is not None:
                torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-8, msg=f"{choice}: a gradient")
        assert hyps.tokens == hyps_p.tokens, choice
        assert hyps.normalized_scores == pytest.approx(hyps_p.normalized_scores, abs=1e-9), choice


@pytest.mark.parametrize("name", ["baseline", "self_attentive_content", "memory_rnn"])
def test_the_device_computes_what_the_cpu_does(name):
    """The same float64 model and batch on the CPU and on the device: the NLL, every gradient, the beam."""
    model = build(decoder_cfg(name), scale=2.0)
    cpu = _nll_grads_hyps(model, *batch())
    nll, grads, hyps = _nll_grads_hyps(model.to(DEVICE), *_on_device(batch()))
    torch.testing.assert_close(nll.cpu(), cpu[0], atol=1e-11, rtol=0)
    for got, want in zip(grads, cpu[1], strict=True):
        if want is not None:
            torch.testing.assert_close(got.cpu(), want, atol=1e-9, rtol=1e-8)
    assert hyps.tokens == cpu[2].tokens


def _float_model(name: str, seed: int = 0) -> torch.nn.Module:
    """A small float32 model (e < d as at the paper's size), weights not near zero, without dropout (the compared
    losses see the same function), in training mode (:func:`_training_mode`)."""
    return _training_mode(build(decoder_cfg(name), emb_dim=32, hidden_dim=64, seed=seed).float().to(DEVICE))


@pytest.mark.parametrize("name", ["baseline", "self_attentive_content"])
def test_bf16_autocast_loss_and_gradients_follow_fp32(name):
    """Under bf16 autocast the loss and gradients stay float32 and close to fp32's (bf16 products, fp32 softmax and
    loss), for the fused and the plain kernels alike."""
    model = _float_model(name)
    src, src_mask, tgt, tgt_mask = _on_device(batch())
    params = list(model.parameters())
    for choice in ("auto", "plain"):
        _set_kernels(model, choice)
        loss32 = translation_loss(model.nll(src, src_mask, tgt, tgt_mask), tgt_mask, "sentence")
        grads32 = torch.autograd.grad(loss32, params)
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
            loss16 = translation_loss(model.nll(src, src_mask, tgt, tgt_mask), tgt_mask, "sentence")
        grads16 = torch.autograd.grad(loss16, params)
        assert loss16.dtype == torch.float32 and torch.isfinite(loss16)
        assert loss16.item() == pytest.approx(loss32.item(), rel=0.02), choice
        flat32 = torch.cat([g.flatten() for g in grads32])
        flat16 = torch.cat([g.flatten() for g in grads16])
        assert flat16.dtype == torch.float32 and torch.isfinite(flat16).all()
        cosine = torch.nn.functional.cosine_similarity(flat16, flat32, dim=0).item()
        assert cosine > 0.99, (choice, cosine)


def test_bf16_training_steps_lower_the_loss_and_beam_search_runs():
    """A few bf16-autocast steps of the fused Adadelta on one batch lower its loss; batched beam search under
    autocast returns one finite-scored hypothesis per sentence within the length limit."""
    model = _float_model("self_attentive_content", seed=3)
    src, src_mask, tgt, tgt_mask = _on_device(batch())
    optimizer = Adadelta(model.parameters(), lr=1.0, rho=0.95, eps=1e-6)
    losses = []
    for _ in range(8):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
            loss = translation_loss(model.nll(src, src_mask, tgt, tgt_mask), tgt_mask, "sentence")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    assert all(map(torch.isfinite, map(torch.tensor, losses)))
    assert losses[-1] < losses[0]
    with torch.no_grad(), torch.autocast(DEVICE.type, dtype=torch.bfloat16):
        hyps = beam_decode(model, src, src_mask, 5, max_len_a=1.0, max_len_b=3)
    assert len(hyps.tokens) == src.size(0)
    for tokens, length in zip(hyps.tokens, src_mask.sum(1).tolist(), strict=True):
        assert len(tokens) <= length + 3 and all(0 <= t < VOCAB for t in tokens)
    assert all(map(torch.isfinite, map(torch.tensor, hyps.normalized_scores)))


def test_compiled_adadelta_matches_torch_on_the_device():
    """sarnmt's Adadelta, one compiled kernel per parameter (Triton on a GPU), gives torch.optim.Adadelta's
    parameters after five steps, and compiling did not fall back to the eager update."""
    if DEVICE.type == "cpu" and os.environ.get("ATEN_CPU_CAPABILITY", "").lower() == "default":
        pytest.skip(
            "ATEN_CPU_CAPABILITY=default: inductor still writes vectorised C++ for this CPU but compiles it without "
            "at::vec (a limit of the override in torch 2.13, not of any CPU: one without AVX gets no vector code)"
        )
    gen = torch.Generator().manual_seed(0)
    shapes = [(50, 70), (70,), (3, 1000)]
    ours = [torch.nn.Parameter(torch.randn(s, generator=gen).to(DEVICE)) for s in shapes]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    opt = Adadelta(ours, lr=0.7, rho=0.95, eps=1e-6)
    ref = torch.optim.Adadelta(theirs, lr=0.7, rho=0.95, eps=1e-6)
    for _ in range(5):
        for p, q in zip(ours, theirs, strict=True):
            p.grad = torch.randn(p.shape, generator=gen).to(DEVICE)
            q.grad = p.grad.clone()
        opt.step()
        ref.step()
    assert opt._update is not adadelta_update, "torch.compile failed: the eager update ran (see the warning)"
    for p, q in zip(ours, theirs, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_replayed_search_finds_what_the_eager_one_finds(precision):
    """The search with its steps replayed from CUDA graphs (sarnmt.decoding.captured) against the same search
    launched from Python, a cGRU with a query-scored history and the baseline, two batches in one bucket, float32
    and under bf16 autocast (the graphs captured without autocast's weight cache): the same hypotheses, scores
    within rounding, one graph for the bucket, no eager batch."""
    autocast = torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=precision == "bf16")
    for system in (0, SYSTEMS.index(("cgru", "self_attentive_rnn", "decoder.form=appendix"))):
        model = build_system(*SYSTEMS[system], seed=system, scale=6.0).float().to(DEVICE)
        for seed in (1, 2):  # three sentences each, one bucket
            src, src_mask, _, _ = _on_device(batch(seed))
            with torch.no_grad(), autocast:
                want = beam_decode(model, src, src_mask, 5, nbest=2, schedule=STATIC)
                got = beam_decode(model, src, src_mask, 5, nbest=2, schedule=CAPTURED)
            assert got.tokens == want.tokens
            assert got.scores == pytest.approx(want.scores, abs=1e-3 if precision == "bf16" else 1e-4)
        with autocast:
            graphs = search_graphs(model, BeamRule(5, LengthPenalty()), DEVICE, None)
        backend = "CudaGraphs" if DEVICE.type == "cuda" else "Eager"
        assert type(graphs.backend).__name__ == backend and len(graphs.replays) == 1 and graphs.eager_steps == 0
