"""Small models and batches for the model tests (float64 so equivalences can be checked at 1e-6)."""

from __future__ import annotations

import torch
from hydra.utils import instantiate

from sarnmt.data.batching import pad_sequences
from sarnmt.models.seq2seq import Seq2Seq

VOCAB = 23


def build(decoder_cfg, emb_dim: int = 6, hidden_dim: int = 8, seed: int = 0, scale: float = 1.0):
    """A tiny float64 Seq2Seq in eval mode for one ``conf/decoder`` node; weights scaled up so that the
    equivalence tests are not trivially satisfied by near-zero activations."""
    torch.manual_seed(seed)
    model = Seq2Seq(VOCAB, VOCAB, emb_dim, hidden_dim, instantiate(decoder_cfg)).double().eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.3 * scale)
    return model


def batch(seed: int = 1):
    """Three source/target pairs of different lengths: (src, src_mask, tgt, tgt_mask)."""
    gen = torch.Generator().manual_seed(seed)
    lens = [(5, 7), (3, 4), (6, 2)]
    srcs = [torch.randint(2, VOCAB, (s,), generator=gen).tolist() for s, _ in lens]
    tgts = [torch.randint(2, VOCAB, (t,), generator=gen).tolist() for _, t in lens]
    src, src_mask = pad_sequences(srcs)
    tgt, tgt_mask = pad_sequences(tgts)
    return src, src_mask, tgt, tgt_mask
