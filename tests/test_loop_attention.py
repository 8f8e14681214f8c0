"""LoopAttention: the teacher-forced loop's attention, its source-side gradients formed once after the loop."""

from __future__ import annotations

import gc

import pytest
import torch

from sarnmt.kernels.loop_attention import LoopAttention
from sarnmt.models.attention import SourceAttention
from sarnmt.models.state import SourceMemory

B, S, D, STEPS = 3, 5, 4, 6


def _setup(dtype=torch.float64):
    torch.manual_seed(0)
    attention = SourceAttention(D, 2 * D).to(dtype)
    with torch.no_grad():
        attention.v.normal_()
        attention.score_bias.fill_(0.3)
    source = torch.randn(B, S, 2 * D, dtype=dtype, requires_grad=True)
    mask = torch.ones(B, S, dtype=torch.bool)
    mask[1, 3:] = False  # padding in one sentence
    start = torch.randn(B, D, dtype=dtype, requires_grad=True)
    mixer = torch.randn(2 * D, D, dtype=dtype) * 0.5
    return attention, source, mask, start, mixer


def _unroll(attention, source, mask, start, mixer, loop: bool):
    """A small recurrence through the attention: s_t = tanh(c_{t-1} M + s_{t-1}); the loss reads the contexts
    (all but the last) and the weights, so both outputs carry gradients into the backward pass."""
    annotations = source * 1.5  # not a leaf, as the encoder's output is not
    memory = SourceMemory(annotations=annotations, keys=attention.project_keys(annotations), mask=mask)
    looped = LoopAttention(attention, memory) if loop else None
    state, loss = start, 0
    for t in range(STEPS):
        if looped is None:
            context, weights = attention(state, memory)
        else:
            context, weights = looped(attention.query_proj(state))
        assert (weights[~mask] == 0).all()
        if t < STEPS - 1:
            loss = loss + (context * (t + 1)).sum()
        loss = loss + (weights * torch.arange(S, dtype=weights.dtype)).sum() * (t % 2)
        state = torch.tanh(context @ mixer + state)
    return loss


def test_every_gradient_equals_plain_autograd():
    attention, source, mask, start, mixer = _setup()
    wrt = (source, start, attention.v, attention.score_bias, attention.key_proj.weight, attention.query_proj.weight)
    plain = torch.autograd.grad(_unroll(attention, source, mask, start, mixer, loop=False), wrt)
    deferred = torch.autograd.grad(_unroll(attention, source, mask, start, mixer, loop=True), wrt)
    for got, want in zip(deferred, plain, strict=True):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)
    assert plain[0].abs().max() > 0.1 and plain[2].abs().max() > 0.1  # not trivially zero


def test_values_equal_the_layer():
    attention, source, mask, start, _ = _setup()
    memory = SourceMemory(annotations=source, keys=attention.project_keys(source), mask=mask)
    context, weights = LoopAttention(attention, memory)(attention.query_proj(start))
    want_context, want_weights = attention(start, memory)
    torch.testing.assert_close(context, want_context, atol=1e-14, rtol=0)
    torch.testing.assert_close(weights, want_weights, atol=1e-14, rtol=0)


def test_bf16_autocast_follows_the_layer():
    attention, source, mask, start, mixer = _setup(torch.float32)
    wrt = (source, start, attention.v)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain = torch.autograd.grad(_unroll(attention, source, mask, start, mixer, loop=False).float(), wrt)
        deferred = torch.autograd.grad(_unroll(attention, source, mask, start, mixer, loop=True).float(), wrt)
    for got, want in zip(deferred, plain, strict=True):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want, atol=0.05 * want.abs().max().item(), rtol=0)


def test_search_memory_with_beams_is_refused():
    attention, source, mask, _, _ = _setup()
    memory = SourceMemory(annotations=source, keys=attention.project_keys(source), mask=mask, beams=5)
    with pytest.raises(ValueError, match="beams=5"):
        LoopAttention(attention, memory)


def _alive(kind: type) -> int:
    gc.collect()
    return sum(isinstance(obj, kind) for obj in gc.get_objects())


def test_a_forward_without_backward_leaves_nothing_behind():
    """A loop run under autograd and then dropped without a backward pass (a forward-only measurement, a loss that is
    never used) is collected: the record keeps α_t without their graph, so no cycle runs through the autograd nodes."""
    before = _alive(LoopAttention)
    attention, source, mask, start, mixer = _setup()
    loss = _unroll(attention, source, mask, start, mixer, loop=True)
    assert loss.requires_grad
    del loss
    assert _alive(LoopAttention) == before


def test_activation_measurement_leaves_the_graph_collectable():
    """bench's activation_bytes counts what autograd saves through a saved-tensors hook; a hook that returned the saved
    tensor itself kept every node that saves its own output (tanh, softmax) alive through its output: 2.3 GB left behind
    per WMT-length system in the full bench. Nothing of the graph survives it now."""
    from sarnmt.bench.measure import activation_bytes

    class Loop(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.parts = _setup()

        def forward(self):
            return _unroll(*self.parts, loop=True)

    before = _alive(LoopAttention)
    saved = activation_bytes(Loop(), lambda model, batch: model(), _Batch(), "fp32")
    assert saved > 0 and _alive(LoopAttention) == before


class _Batch:
    src = torch.zeros(1)
