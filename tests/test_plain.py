"""The benchmark's plain peer (benchmarks/peers/plain.py) computes exactly sarnmt's model, and searches as sarnmt
does."""

from __future__ import annotations

import pytest
import torch

from benchmarks.peers.plain import plain_beam, plain_greedy, plain_logits, plain_nll
from sarnmt.decoding.beam import beam_decode
from sarnmt.decoding.greedy import greedy_decode
from sarnmt.decoding.penalties import LengthPenalty
from sarnmt.training.loss import token_nll
from tests.conftest import DECODER_FORMS
from tests.test_oracle import IDS, VOCAB, _batch, _model


@pytest.mark.parametrize(("name", "override"), DECODER_FORMS, ids=IDS)
def test_plain_equals_model(name, override):
    model, _ = _model(name, override)  # float64, dropout 0
    src, src_mask, tgt, tgt_mask = _batch()
    expected = model(src, src_mask, tgt).logits
    actual = plain_logits(model, src, src_mask, tgt)
    assert actual.shape == expected.shape == (4, tgt.size(1), VOCAB)
    torch.testing.assert_close(actual[tgt_mask], expected[tgt_mask], atol=1e-9, rtol=0)
    nll = plain_nll(model, src, src_mask, tgt, tgt_mask)
    torch.testing.assert_close(nll, token_nll(expected, tgt, tgt_mask).to(nll.dtype), atol=1e-6, rtol=0)
    assert nll[~tgt_mask].abs().max() == 0
    nll.sum().backward()  # trains through the model's own parameters
    assert model.decoder.cell2.weight_hh.grad.abs().max() > 0


@pytest.mark.parametrize(
    "name", ["baseline", "mean_residual", "self_attentive_content", "memory_rnn", "self_attentive_rnn"]
)
def test_plain_search_finds_sarnmt_hypotheses(name):
    model, _ = _model(name, None)
    model.eval()
    src, src_mask, _, _ = _batch()
    assert plain_greedy(model, src, src_mask, 0.5, 4) == greedy_decode(model, src, src_mask, 0.5, 4).tokens
    sarnmt = beam_decode(model, src, src_mask, 3, LengthPenalty(), 0.5, 4)
    assert any(sarnmt.tokens) and plain_beam(model, src, src_mask, 3, 0.5, 4) == sarnmt.tokens
    # equal lengths (make peers): no EOS before 5 tokens, at most 6: the same hypotheses, 5 or 6 tokens each
    sarnmt = beam_decode(model, src, src_mask, 3, LengthPenalty(), 0.0, 6, min_len=5)
    assert plain_beam(model, src, src_mask, 3, 0.0, 6, min_len=5) == sarnmt.tokens
    assert {len(tokens) for tokens in sarnmt.tokens} <= {5, 6}
