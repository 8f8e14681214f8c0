"""Every decoder variant and every LSTM system can learn: it memorises a batch of 16 random sentence pairs."""

from __future__ import annotations

import pytest
import torch

from sarnmt.data.loading.batching import pad_sequences
from sarnmt.decoding.greedy import greedy_decode
from sarnmt.models.factory import build_model
from sarnmt.training.loss import token_nll, translation_loss
from tests.conftest import DECODERS, compose_train

LSTM_SYSTEMS = [
    ("lstm_fixed_context_tiny", None),
    ("lstm_ff_attention_tiny", None),
    ("lstm_input_feeding_tiny", None),
    ("lstm_fixed_context_tiny", "mean_residual"),
    ("lstm_ff_attention_tiny", "self_attentive_content"),
]
CASES = [("tiny", name) for name in DECODERS] + LSTM_SYSTEMS


@pytest.mark.parametrize(("model", "name"), CASES, ids=[f"{m}:{n or 'default'}" for m, n in CASES])
def test_overfits_16_pairs(model, name):
    torch.manual_seed(0)
    decoder = [f"decoder={name}"] if name else []
    cfg = compose_train([f"model={model}", *decoder, "model.emb_dim=32", "model.hidden_dim=64"])
    net = build_model(cfg.model, cfg.decoder, 20, 20)
    gen = torch.Generator().manual_seed(1)
    srcs = [torch.randint(2, 20, (int(n),), generator=gen).tolist() for n in torch.randint(3, 9, (16,), generator=gen)]
    tgts = [torch.randint(2, 20, (int(n),), generator=gen).tolist() for n in torch.randint(3, 9, (16,), generator=gen)]
    src, src_mask = pad_sequences(srcs)
    tgt, tgt_mask = pad_sequences(tgts)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    for _ in range(300):
        optimizer.zero_grad()
        nll = token_nll(net(src, src_mask, tgt).logits, tgt, tgt_mask)
        loss = translation_loss(nll, tgt_mask, "sentence")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        if nll.sum() / tgt_mask.sum() < 0.01:
            break
    net.eval()
    assert (nll.sum() / tgt_mask.sum()).item() < 0.05
    assert greedy_decode(net, src, src_mask).tokens == tgts
