"""The test oracle (tests/oracle.py, the textbook model) computes exactly sarnmt's teacher-forced model."""

from __future__ import annotations

import pytest
import torch
from omegaconf import DictConfig

from sarnmt.data.loading.batching import pad_sequences
from sarnmt.data.text.codecs import EOS
from sarnmt.decoding.greedy import greedy_decode
from sarnmt.models.factory import build_model
from sarnmt.models.seq2seq import Seq2Seq
from tests.conftest import DECODER_FORMS, compose_train
from tests.oracle import STATED, textbook_greedy, textbook_logits

IDS = [f"{name}{'+' + override.split('=')[1] if override else ''}" for name, override in DECODER_FORMS]
VOCAB = 20


def _model(name: str, override: str | None) -> tuple[Seq2Seq, DictConfig]:
    """A float64 model from the real configs (model=tiny shrunk to e = 8, d = 12, dropout 0), every parameter
    perturbed so that biases are non-zero and no path is trivially exact; and its decoder config."""
    cfg = compose_train(
        [f"decoder={name}", *([override] if override else []), "model=tiny", "model.emb_dim=8", "model.hidden_dim=12"]
    )
    assert cfg.model.init_std == 0.1
    assert cfg.model.dropout_readout == cfg.model.dropout_embeddings == cfg.model.dropout_hidden == 0
    torch.manual_seed(0)
    model = build_model(cfg.model, cfg.decoder, VOCAB, VOCAB)
    model = model.double()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    return model, cfg.decoder


def _batch():
    """Four pairs; source lengths 6, 2, 4, 6 and target lengths 3, 7, 1, 5 (+ EOS), both padded."""
    gen = torch.Generator().manual_seed(1)
    lens = [(6, 3), (2, 7), (4, 1), (6, 5)]
    src, src_mask = pad_sequences([torch.randint(2, VOCAB, (s,), generator=gen).tolist() for s, _ in lens])
    tgt, tgt_mask = pad_sequences([torch.randint(2, VOCAB, (t,), generator=gen).tolist() for _, t in lens])
    return src, src_mask, tgt, tgt_mask


@pytest.mark.parametrize(("name", "override"), DECODER_FORMS, ids=IDS)
def test_oracle_equals_model(name, override):
    model, decoder = _model(name, override)  # train mode: the oracle's dropout sites are no-ops at rate 0
    src, src_mask, tgt, tgt_mask = _batch()
    expected = model(src, src_mask, tgt).logits
    actual = textbook_logits(model, decoder, src, src_mask, tgt)
    assert actual.shape == expected.shape == (4, tgt.size(1), VOCAB)
    assert expected[tgt_mask].abs().max() > 0.1  # not trivially equal
    torch.testing.assert_close(actual[tgt_mask], expected[tgt_mask], atol=1e-9, rtol=0)

    # the same loss differentiated through both: identical gradients, into the model's own parameters
    names, params = zip(*[(n, p) for n, p in model.named_parameters() if p.requires_grad], strict=True)

    def grads(logits):
        loss = torch.nn.functional.cross_entropy(logits[tgt_mask], tgt[tgt_mask])
        return torch.autograd.grad(loss, params, allow_unused=True, materialize_grads=True)

    got, want = grads(actual), grads(expected)
    for param_name, g, w in zip(names, got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-9, rtol=0, msg=lambda m, n=param_name: f"{n}: {m}")
    reached = {n for n, g in zip(names, got, strict=True) if g.abs().max() > 1e-6}
    assert set(names) - reached == {"decoder.attention.score_bias"}  # c cancels in the softmax


def test_the_oracle_writes_out_every_variant_of_the_paper():
    """Table 1's decoders are checked against the textbook's own statement of their equations, not their hooks."""
    paper = ["baseline", "mean_residual", "self_attentive_content", "self_attentive_content_scope", "memory_rnn"]
    for name in [*paper, "self_attentive_rnn"]:
        assert compose_train([f"decoder={name}"]).decoder._target_ in STATED, name


@pytest.mark.parametrize(("name", "override"), DECODER_FORMS, ids=IDS)
def test_a_variant_the_oracle_does_not_state_runs_its_own_step_hooks(name, override):
    """A decoder config whose ``_target_`` the oracle does not write out (a variant of one's own) runs the variant's
    one-step hooks inside the textbook step: for every paper variant that equals the teacher-forced model too, so a
    new variant is held to its teacher-forced form (``readout_all``, the loop) with nothing written in the oracle."""
    model, decoder = _model(name, override)
    src, src_mask, tgt, tgt_mask = _batch()
    expected = model(src, src_mask, tgt).logits
    own = {"_target_": "a.variant.of.ones.Own"}
    torch.testing.assert_close(
        textbook_logits(model, own, src, src_mask, tgt)[tgt_mask], expected[tgt_mask], atol=1e-9, rtol=0
    )


def test_oracle_trains_the_model():
    model, decoder = _model("self_attentive_content", None)
    src, src_mask, tgt, tgt_mask = _batch()
    before = [p.detach().clone() for p in model.parameters()]
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    logits = textbook_logits(model, decoder, src, src_mask, tgt)
    torch.nn.functional.cross_entropy(logits[tgt_mask], tgt[tgt_mask]).backward()
    optim.step()
    changed = [not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True)]
    assert sum(changed) >= len(changed) - 1  # all but the score bias c, which cancels in the softmax


@pytest.mark.parametrize("name", ["baseline", "self_attentive_content", "memory_rnn"])
def test_oracle_greedy_equals_sarnmt_greedy(name):
    """The oracle's greedy loop picks the same words as sarnmt's batched greedy search (up to each EOS)."""
    model, decoder = _model(name, None)
    model.eval()
    src, src_mask, _, _ = _batch()
    ref = textbook_greedy(model, decoder, src, src_mask, max_len=8)
    hyps = greedy_decode(model, src, src_mask, max_len_a=0.0, max_len_b=8)
    for row, tokens in enumerate(hyps.tokens):
        words = ref[row].tolist()
        expected = words[: words.index(EOS)] if EOS in words else words
        assert tokens == expected
