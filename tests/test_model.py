"""Invariants of the model core, for every decoder variant (and both forms of its switches)."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from hydra.utils import get_class

from sarnmt.cli.params import compose_params, count
from sarnmt.decoding.greedy import greedy_decode
from sarnmt.errors import InputError
from sarnmt.kernels import KernelChoice
from sarnmt.kernels import attention as attention_kernels
from sarnmt.kernels.attention import scores_in_chunks
from sarnmt.kernels.choice import check_choice
from sarnmt.kernels.encoder import unrolled_bigru
from sarnmt.kernels.gru import gru_update
from sarnmt.kernels.loop_attention import LoopAttention
from sarnmt.kernels.loop_linear import LoopLinear
from sarnmt.kernels.output import linear_nll
from sarnmt.models.decoder import ConditionalGRUDecoder
from sarnmt.models.hot_spots import EQUATIONS, kernel_choice
from sarnmt.models.skeleton import RecurrentDecoder
from sarnmt.models.variants.base import DecoderVariant
from sarnmt.training.loss import token_nll
from tests.conftest import DECODER_FORMS, MODELS, SYSTEM_IDS, SYSTEMS, decoder_cfg
from tests.model_helpers import batch, build, build_system


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["decoder=baseline"], 108_725_885),
        (["decoder=mean_residual"], 108_725_885),
        (["decoder=self_attentive_content"], 108_976_885),
        (["decoder=self_attentive_content_scope"], 109_488_885),
        (["decoder=memory_rnn"], 109_775_485),
        (["decoder=memory_rnn", "decoder.form=appendix"], 110_824_061),
        (["decoder=self_attentive_rnn"], 110_287_485),
        (["decoder=self_attentive_rnn", "decoder.form=appendix"], 111_336_061),
    ],
)
def test_paper_parameter_counts(overrides, expected):
    assert count(compose_params(["model=paper", *overrides])) == expected


def test_en_zh_vocabulary_count():
    cfg = compose_params(["model=paper", "decoder=baseline", "src_vocab_size=25000", "tgt_vocab_size=25000"])
    assert count(cfg) == 71_200_885


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_logits_at_selected_positions_only(system, name, override):
    """Training reads out only the real target positions: the same logits, packed, and the same per-token loss."""
    model = build_system(system, name, override)
    src, src_mask, tgt, tgt_mask = batch()
    assert not tgt_mask.all()  # the batch has padding to skip
    full = model(src, src_mask, tgt)
    packed = model(src, src_mask, tgt, positions=tgt_mask)
    assert packed.logits.shape == (int(tgt_mask.sum()), full.logits.size(-1))
    torch.testing.assert_close(packed.logits, full.logits[tgt_mask], atol=1e-12, rtol=0)
    if full.src_attention is None:  # the fixed-context LSTM has no attention
        assert packed.src_attention is None
    else:
        torch.testing.assert_close(packed.src_attention, full.src_attention, atol=0, rtol=0)
    nll = token_nll(packed.logits, tgt, tgt_mask)
    torch.testing.assert_close(nll, token_nll(full.logits, tgt, tgt_mask), atol=1e-12, rtol=0)
    assert (nll[~tgt_mask] == 0).all() and (nll[tgt_mask] > 0).all()


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_training_nll_equals_cross_entropy_of_the_logits(system, name, override):
    """``Seq2Seq.nll`` (output layer and cross-entropy fused, as training takes it) gives the cross-entropy of the
    model's logits, and the same gradient for every parameter."""
    model = build_system(system, name, override)
    src, src_mask, tgt, tgt_mask = batch()
    fused = model.nll(src, src_mask, tgt, tgt_mask)
    logits = model(src, src_mask, tgt).logits
    plain = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten(), reduction="none")
    plain = plain.view_as(tgt) * tgt_mask
    assert fused.shape == tgt.shape and (fused[~tgt_mask] == 0).all()
    torch.testing.assert_close(fused, plain, atol=1e-12, rtol=0)
    params = [p for p in model.parameters()]
    weights = torch.rand(tgt.shape, dtype=fused.dtype, generator=torch.Generator().manual_seed(3))
    got = torch.autograd.grad((fused * weights).sum(), params, allow_unused=True)
    want = torch.autograd.grad((plain * weights).sum(), params, allow_unused=True)
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if g is not None:
            torch.testing.assert_close(g, w, atol=1e-12, rtol=1e-10)


def _step_through(model, src, src_mask, tgt):
    memory, state = model.encode(src, src_mask)
    logits, tgt_attention, prev = [], [], None
    for t in range(tgt.size(1)):
        out = model.step(prev, state, memory)
        logits.append(out.logits)
        tgt_attention.append(out.tgt_attention)
        state, prev = out.state, tgt[:, t]
    return torch.stack(logits, dim=1), tgt_attention


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_teacher_forced_equals_step_by_step(system, name, override):
    model = build_system(system, name, override)
    src, src_mask, tgt, tgt_mask = batch()
    full = model(src, src_mask, tgt)
    stepped, step_attention = _step_through(model, src, src_mask, tgt)
    mask = tgt_mask.unsqueeze(-1)
    assert full.logits.abs().max() > 0.1  # not trivially equal
    torch.testing.assert_close(full.logits * mask, stepped * mask, atol=1e-6, rtol=0)
    if full.tgt_attention is None:
        assert all(a is None for a in step_attention)
    else:
        for t, row in enumerate(step_attention):
            torch.testing.assert_close(full.tgt_attention[:, t, : row.size(1)], row, atol=1e-6, rtol=0)
            assert torch.all(full.tgt_attention[:, t, row.size(1) :] == 0)
            torch.testing.assert_close(row.sum(-1), torch.ones_like(row[:, 0]))


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_causality(system, name, override):
    model = build_system(system, name, override)
    src, src_mask, tgt, _ = batch()
    base = model(src, src_mask, tgt).logits
    for t in range(tgt.size(1) - 1):
        changed = tgt.clone()
        changed[:, t + 1] = (changed[:, t + 1] + 5) % 20 + 2
        logits = model(src, src_mask, changed).logits
        torch.testing.assert_close(logits[:, : t + 2], base[:, : t + 2], atol=1e-12, rtol=0)
        if t + 2 < tgt.size(1):  # ... and does change the logits after it
            assert (logits[:, t + 2 :] - base[:, t + 2 :]).abs().max() > 1e-6


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_padding_invariance(system, name, override):
    model = build_system(system, name, override)
    src, src_mask, tgt, tgt_mask = batch()
    together = model(src, src_mask, tgt)
    for row in range(src.size(0)):
        s_len, t_len = int(src_mask[row].sum()), int(tgt_mask[row].sum())
        alone = model(src[row : row + 1, :s_len], src_mask[row : row + 1, :s_len], tgt[row : row + 1, :t_len])
        torch.testing.assert_close(together.logits[row, :t_len], alone.logits[0], atol=1e-6, rtol=0)
        # padded source positions get exactly zero attention
        assert together.src_attention is None or torch.all(together.src_attention[row, :t_len, s_len:] == 0)


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_reorder_commutes_with_step(system, name, override):
    model = build_system(system, name, override)
    src, src_mask, tgt, _ = batch()
    memory, state = model.encode(src, src_mask)
    for t in range(3):  # build some history first
        state = model.step(None if t == 0 else tgt[:, t - 1], state, memory).state
    perm = torch.tensor([2, 0, 1])
    identity = state.reorder(torch.arange(3))
    torch.testing.assert_close(identity.hidden, state.hidden)
    a = model.step(tgt[:, 2], state, memory)
    b = model.step(tgt[:, 2][perm], state.reorder(perm), memory.reorder(perm))
    torch.testing.assert_close(a.logits[perm], b.logits, atol=1e-12, rtol=0)
    torch.testing.assert_close(a.state.hidden[perm], b.state.hidden, atol=1e-12, rtol=0)
    for key, value in [*a.state.variant.items(), *a.state.recurrent.items()]:
        torch.testing.assert_close(value[perm], {**b.state.variant, **b.state.recurrent}[key], atol=1e-12, rtol=0)


@pytest.mark.parametrize("first_step", ["zero_slot", "paper"])
def test_mean_residual_is_the_cumulative_mean(first_step):
    from sarnmt.models.variants import MeanResidual

    variant = MeanResidual(4, 5, first_step=first_step).double()
    with torch.no_grad():
        variant.prev_proj.weight.copy_(torch.eye(4))
        variant.prev_proj.bias.zero_()
    embs = torch.randn(2, 6, 4, dtype=torch.double)
    embs[:, 0] = 0  # the zero "previous word" of step 1
    summary, _ = variant.readout_all(embs, None, None)
    for t in range(6):  # step t+1 sees y_1 .. y_t
        words = embs[:, 1 : t + 1]
        denominator = t + 1 if first_step == "zero_slot" else max(t, 1)
        torch.testing.assert_close(summary[:, t], words.sum(1) / denominator)
    assert torch.all(summary[:, 0] == 0)


def test_self_attentive_first_summary_is_zero_and_uniform_at_equal_scores():
    """d_1 = 0 (the zero slot only); with v = 0 all scores tie and d_t is the mean over {0, y_1..y_{t-1}}."""
    from sarnmt.models.variants import MeanResidual, SelfAttentiveResidual

    attentive = SelfAttentiveResidual(4, 5).double()
    mean = MeanResidual(4, 5).double()
    with torch.no_grad():
        attentive.attention.v.zero_()
        mean.prev_proj.load_state_dict(attentive.prev_proj.state_dict())
    embs = torch.randn(2, 5, 4, dtype=torch.double)
    embs[:, 0] = 0
    a, weights = attentive.readout_all(embs, None, torch.randn(2, 5, 5, dtype=torch.double))
    m, _ = mean.readout_all(embs, None, None)
    torch.testing.assert_close(a, m)
    torch.testing.assert_close(weights[:, 0, 0], torch.ones(2, dtype=torch.double))


def test_every_system_runs_the_one_decoder_loop():
    """The cGRU and the LSTM systems are systems of one skeleton: none writes a time loop or a step of its own."""
    decoders = [ConditionalGRUDecoder, *(get_class(MODELS[m]) for m in MODELS if m != "cgru")]
    for cls in decoders:
        assert issubclass(cls, RecurrentDecoder)
        for klass in cls.__mro__[: cls.__mro__.index(RecurrentDecoder)]:
            assert not {"teacher_forced", "decode_step", "decode_logits", "decode_nll"} & set(vars(klass)), klass


@pytest.mark.parametrize(("name", "override"), DECODER_FORMS, ids=[f"{n}:{o}" for n, o in DECODER_FORMS])
def test_a_variants_fast_summary_is_its_step_form_run_over_the_sequence(name, override):
    """Hook 2's formula is written once and its history summary once in step form (``summary_step``); the base
    derives the whole-sequence form from it. A variant's own faster ``summary_all`` equals that derived form."""
    variant = build(decoder_cfg(name, override)).decoder.variant
    gen = torch.Generator().manual_seed(3)
    embs, prev_hiddens, hiddens = (torch.randn(3, 5, dim, generator=gen, dtype=torch.float64) for dim in (6, 8, 8))
    embs[:, 0] = 0  # ȳ_0
    fast = variant.summary_all(embs, prev_hiddens, hiddens)
    derived = DecoderVariant.summary_all(variant, embs, prev_hiddens, hiddens)
    for got, want in zip(fast, derived, strict=True):
        assert (got is None) == (want is None)
        if got is not None:
            torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    if type(variant).summary_step is not DecoderVariant.summary_step:
        assert fast[0] is not None


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_greedy_matches_manual_argmax(system, name, override):
    model = build_system(system, name, override, scale=3.0)
    src, src_mask, _, _ = batch()
    hyps = greedy_decode(model, src, src_mask, max_len_a=1.0, max_len_b=3, return_attention=True)
    for row in range(src.size(0)):
        s_len = int(src_mask[row].sum())
        memory, state = model.encode(src[row : row + 1, :s_len], src_mask[row : row + 1, :s_len])
        prev, tokens = None, []
        for _ in range(s_len + 3):
            out = model.step(prev, state, memory)
            word = int(out.logits.argmax(-1))
            if word == 0:
                break
            tokens.append(word)
            state, prev = out.state, torch.tensor([word])
        assert hyps.tokens[row] == tokens
        if not hyps.src_attention:  # a model without attention (the fixed-context LSTM) returns none
            assert model.encode(src, src_mask)[0].annotations.size(1) == 1
            continue
        attention = hyps.src_attention[row]
        assert attention.shape[1] == s_len
        torch.testing.assert_close(attention.sum(-1), torch.ones(attention.size(0), dtype=attention.dtype))


@pytest.mark.parametrize("beams", [1, 2])
def test_search_time_attention_in_cache_sized_chunks_equals_one_piece(monkeypatch, beams):
    """Without autograd the source attention forms its energies a few sentences at a time (the ``attention_scores``
    hot spot's kernel); the result is the same."""
    model = build(decoder_cfg("baseline", None))
    src, src_mask, _, _ = batch()
    memory, _ = model.encode(src, src_mask)
    memory = memory.with_beams(beams)
    query = torch.randn(3 * beams, 8, dtype=torch.float64)
    # parameters want gradients: one piece
    context, weights = model.decoder.attention(query, memory, model.kernels(query).attention_scores)
    assert context.requires_grad
    monkeypatch.setattr(attention_kernels, "CACHE_CHUNK", 8 * beams * src.size(1))  # one sentence per chunk
    with torch.no_grad():
        scores = model.kernels(query).attention_scores
        assert scores.func is attention_kernels.scores_in_chunks
        chunked = model.decoder.attention(query, memory, scores)
    torch.testing.assert_close(chunked[0], context.detach(), atol=1e-12, rtol=0)
    torch.testing.assert_close(chunked[1], weights.detach(), atol=1e-12, rtol=0)


def _gru_update_plain(gates_x, gates_h, h):
    d = h.size(-1)
    r = torch.sigmoid(gates_x[:, :d] + gates_h[:, :d])
    u = torch.sigmoid(gates_x[:, d : 2 * d] + gates_h[:, d : 2 * d])
    candidate = torch.tanh(gates_x[:, 2 * d :] + r * gates_h[:, 2 * d :])
    return u * h + (1 - u) * candidate


def test_gru_update_and_its_hand_written_backward_match_autograd():
    """The one-node GRU update equals the equations written as plain tensor code, values and all three gradients,
    also for an input-side projection that is a strided view (as the loops pass it)."""
    gen = torch.Generator().manual_seed(3)
    wide = torch.randn(4, 2, 9, dtype=torch.float64, generator=gen, requires_grad=True)
    gates_x = wide[:, 1]  # (4, 9), row stride 18
    gates_h = torch.randn(4, 9, dtype=torch.float64, generator=gen, requires_grad=True)
    h = torch.randn(4, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    grad = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    out = gru_update(gates_x, gates_h, h)
    expected = _gru_update_plain(gates_x, gates_h, h)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)
    got = torch.autograd.grad(out, (wide, gates_h, h), grad)
    want = torch.autograd.grad(expected, (wide, gates_h, h), grad)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-12, rtol=0)
    assert torch.autograd.gradcheck(gru_update, (gates_x.detach().requires_grad_(), gates_h, h))


def test_gru_update_promotes_mixed_dtypes():
    """Under autocast the projections may be bf16 and the state fp32: computed in fp32, gradients in each dtype."""
    gates_x = torch.randn(2, 6, dtype=torch.bfloat16, requires_grad=True)
    gates_h = torch.randn(2, 6, dtype=torch.bfloat16, requires_grad=True)
    h = torch.randn(2, 2, requires_grad=True)
    out = gru_update(gates_x, gates_h, h)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert (gates_x.grad.dtype, gates_h.grad.dtype, h.grad.dtype) == (torch.bfloat16, torch.bfloat16, torch.float32)


@pytest.mark.parametrize("grad", [True, False])
def test_unrolled_encoder_equals_packed_gru(grad):
    """The CPU loop over both directions computes what PyTorch's GRU over packed sequences computes: the same
    annotations (zero at padding; the backward direction starting at each sentence's last real token) and, when
    trained, the same gradients for every encoder parameter."""
    model = build(decoder_cfg("baseline", None))
    src, src_mask, _, _ = batch()
    rnn = model.encoder.rnn
    weights = torch.randn(*src.shape, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    unrolled = partial(unrolled_bigru, rnn, gru_update=gru_update, loop_weights=True)
    results = []
    for run in (rnn.packed, unrolled):
        model.zero_grad()
        with torch.set_grad_enabled(grad):
            annotations = run(model.encoder.embedding(src), src_mask)
        assert annotations.shape == (*src.shape, 16)
        assert not annotations[~src_mask].any()
        if grad:
            (annotations * weights).sum().backward()
        results.append((annotations.detach(), [p.grad for p in rnn.parameters()]))
    (packed, packed_grads), (unrolled, unrolled_grads) = results
    torch.testing.assert_close(unrolled, packed, atol=1e-12, rtol=0)
    for got, want in zip(unrolled_grads, packed_grads, strict=True):
        if grad:
            torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        else:
            assert got is None and want is None


@pytest.mark.parametrize(("system", "name", "override"), SYSTEMS, ids=SYSTEM_IDS)
def test_fused_kernels_equal_plain_ones(system, name, override):
    """kernels=fused (loop weight gradients, loop attention, the one-node GRU update, the unrolled encoder, the fused
    output layer and loss, chunked search-time attention) computes what kernels=plain computes: the training NLL,
    every gradient and the search's output, in float64."""
    from sarnmt.decoding.beam import beam_decode

    model = build_system(system, name, override, scale=2.0)
    src, src_mask, tgt, tgt_mask = batch()
    results = []
    for choice in ("fused", "plain"):
        for module in [model, *model.modules()]:
            if isinstance(getattr(module, "kernels", None), KernelChoice):
                module.kernels = kernel_choice(choice)
        nll = model.nll(src, src_mask, tgt, tgt_mask)
        grads = torch.autograd.grad(nll.sum(), list(model.parameters()), allow_unused=True)
        hyps = beam_decode(model, src, src_mask, 3, max_len_a=1.0, max_len_b=3)
        results.append((nll, grads, hyps))
    (nll_f, grads_f, hyps_f), (nll_p, grads_p, hyps_p) = results
    torch.testing.assert_close(nll_f, nll_p, atol=1e-12, rtol=0)
    for got, want in zip(grads_f, grads_p, strict=True):
        assert (got is None) == (want is None)
        if got is not None:
            torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-9)
    assert hyps_f.tokens == hyps_p.tokens
    assert hyps_f.normalized_scores == pytest.approx(hyps_p.normalized_scores, abs=1e-9)


def test_kernel_choice_is_resolved_in_one_place():
    cpu = torch.zeros(1)
    auto = kernel_choice("auto")
    assert auto.flags(cpu).unrolled_encoder and auto.flags(cpu).loop_weights
    with torch.no_grad():
        searched, search_spots = auto.flags(cpu), auto(cpu)
    assert searched.chunked_attention and not searched.loop_weights  # no gradients to defer in search
    assert not any(vars(kernel_choice("plain").flags(cpu)).values())
    assert searched.sigmoid_tanh and auto.flags(cpu).sigmoid_tanh
    assert not auto._flags_by_call[(True, False)].sigmoid_tanh  # a GPU keeps PyTorch's tanh
    with pytest.raises(InputError, match=r"^kernels='fast' is not a choice: use one of auto, fused, plain"):
        check_choice("fast")  # where kernels= enters; the choice itself trusts it
    # each flag puts its registered kernel on its hot spot; the others keep the model's equations
    assert kernel_choice("plain")(cpu) is EQUATIONS
    spots = auto(cpu)
    assert spots.gru_update is gru_update and spots.output_nll is linear_nll and spots.step_linear is LoopLinear
    assert spots.step_attention.func is LoopAttention and spots.step_attention.keywords == {"sigmoid_tanh": True}
    assert spots.attention_scores is EQUATIONS.attention_scores  # with autograd: the energies in one piece
    assert spots.bigru.func is unrolled_bigru
    assert spots.bigru.keywords == {"gru_update": gru_update, "loop_weights": True}
    assert search_spots.step_linear is EQUATIONS.step_linear and search_spots.attention_scores.func is scores_in_chunks
    assert search_spots.bigru.keywords == {"gru_update": gru_update, "loop_weights": False}
    on_gpu = auto._resolved[(True, True)]
    assert on_gpu.bigru is EQUATIONS.bigru and on_gpu.gru_update is gru_update  # cuDNN's packed GRU
    # an override (benchmarks/ab_kernels.py) forces one flag everywhere and is replaced by the next one
    choice = kernel_choice("auto")
    choice.override(sigmoid_tanh=False)
    assert not choice.flags(cpu).sigmoid_tanh and choice.flags(cpu).loop_weights
    assert not choice._flags_by_call[(True, True)].sigmoid_tanh
    assert choice(cpu).step_attention.keywords == {"sigmoid_tanh": False}
    choice.override(unrolled_encoder=False)
    assert choice.flags(cpu).sigmoid_tanh and choice(cpu).bigru is EQUATIONS.bigru
    with pytest.raises(ValueError, match=r"unknown kernel flags \['fast_tanh'\]"):
        choice.override(fast_tanh=True)


@pytest.mark.parametrize(("dtype", "atol"), [(torch.float64, 1e-15), (torch.float32, 3e-7)])
def test_tanh_by_sigmoid_is_tanh(dtype, atol):
    """kernels.sigmoid_tanh: 2σ(2x) − 1 in place is tanh x, over the whole range and near 0 (where the subtraction
    cancels), in float64 to rounding and in float32 within 3e-7; without the flag, and in bfloat16, torch.tanh."""
    from sarnmt.kernels.attention import tanh_

    x = torch.cat([torch.linspace(-20, 20, 40001), torch.linspace(-1e-4, 1e-4, 2001), torch.tensor([0.0])])
    want = torch.tanh(x.double())
    got = x.to(dtype).clone()
    assert tanh_(got, True) is got  # in place
    torch.testing.assert_close(got.double(), want, atol=atol, rtol=0)
    assert got.abs().max() <= 1 and (got[x > 0] >= 0).all() and (got[x < 0] <= 0).all()
    plain = x.to(dtype).clone()
    assert torch.equal(tanh_(plain, False), torch.tanh(x.to(dtype)))
    half = x.bfloat16()
    assert torch.equal(tanh_(half.clone(), True), torch.tanh(half))


def _lstm(inputs: int, hidden: int) -> int:
    """One LSTM layer's parameters in PyTorch's layout: 4 gates × (W x + U h + two biases)."""
    return 4 * hidden * (inputs + hidden) + 8 * hidden


@pytest.mark.parametrize("model", ["lstm_fixed_context", "lstm_ff_attention", "lstm_input_feeding"])
def test_lstm_parameter_counts_follow_the_seeds_equations(model):
    """Counted from the seeds' equations at the paper's size (e = 500, d = 1024, 50K vocabularies)."""
    e, d, v = 500, 1024, 50_000
    target = v * e + e  # target embeddings and the start symbol's
    if model == "lstm_fixed_context":  # h(n); γ(j) = lstm([y; h(n)]); l = V[γ; y; h(n)] + b
        want = v * e + _lstm(e, d) + target + _lstm(e + d, d) + v * (d + d) + v * e + v
    elif model == "lstm_ff_attention":  # u = [h; η]; a(γ, u) = v_aᵀ tanh(W u + b + U γ) + c; l = V[γ; y; c] + b
        attention = 2 * d * 2 * d + 2 * d + d * 2 * d + 2 * d + 1
        want = v * e + 2 * _lstm(e, d) + target + _lstm(e + 2 * d, d) + attention + v * (d + 2 * d) + v * e + v
    else:  # W_h, W_c (h × 2h); LSTM([y; o]); W_attProj (h × 2h); W_u (h × 3h); W_vocab (V × h); no biases
        want = v * e + 2 * _lstm(e, d) + target + 2 * d * 2 * d + _lstm(e + d, d) + d * 2 * d + d * 3 * d + v * d
    assert count(compose_params([f"model={model}"])) == want
