"""Small models and batches for the model tests (float64 so equivalences can be checked at 1e-6)."""

from __future__ import annotations

import torch

from sarnmt.data.loading.batching import pad_sequences
from sarnmt.models.factory import build_model
from tests.conftest import MODELS, decoder_cfg

VOCAB = 23


def build(decoder, emb_dim: int = 6, hidden_dim: int = 8, seed: int = 0, scale: float = 1.0, model: str = "cgru"):
    """A tiny float64 model in eval mode (``model``: a key of ``tests.conftest.MODELS``) with one
    ``sarnmt/conf/decoder`` node; weights scaled up so that the equivalence tests are not trivially satisfied by
    near-zero activations."""
    torch.manual_seed(seed)
    node = {"_target_": MODELS[model], "emb_dim": emb_dim, "hidden_dim": hidden_dim}
    net = build_model(node, decoder, VOCAB, VOCAB).double().eval()
    with torch.no_grad():
        for param in net.parameters():
            param.add_(torch.randn_like(param) * 0.3 * scale)
    return net


def build_system(model: str, name: str, override: str | None, **kwargs):
    """:func:`build` for one entry of ``tests.conftest.SYSTEMS``."""
    return build(decoder_cfg(name, override), model=model, **kwargs)


def batch(seed: int = 1):
    """Three source/target pairs of different lengths: (src, src_mask, tgt, tgt_mask)."""
    gen = torch.Generator().manual_seed(seed)
    lens = [(5, 7), (3, 4), (6, 2)]
    srcs = [torch.randint(2, VOCAB, (s,), generator=gen).tolist() for s, _ in lens]
    tgts = [torch.randint(2, VOCAB, (t,), generator=gen).tolist() for _, t in lens]
    src, src_mask = pad_sequences(srcs)
    tgt, tgt_mask = pad_sequences(tgts)
    return src, src_mask, tgt, tgt_mask
