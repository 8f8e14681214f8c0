"""The training objective (paper eq. 1; reference note §2.7).

``sentence`` (the paper's and dl4mt's): the negative log-likelihood summed over each sentence's target tokens (EOS
included), averaged over the sentences of the batch. ``token``: averaged over target tokens instead.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor


def token_nll(logits: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """:param logits: shape (B, T, V), or (N, V) at the N real positions of ``mask`` (row-major, as
        ``Seq2Seq(..., positions=mask)`` gives them).  :param target: shape (B, T).  :param mask: shape (B, T).
    :returns: −log p(y_t) per position, zero on padding, shape (B, T)."""
    if logits.dim() == 2:
        picked = F.cross_entropy(logits.float(), target[mask], reduction="none")
        return torch.zeros(target.shape, dtype=picked.dtype, device=picked.device).masked_scatter(mask, picked)
    nll = F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), reduction="none").view_as(target)
    return nll * mask


def translation_loss(nll: Tensor, mask: Tensor, normalization: Literal["sentence", "token"]) -> Tensor:
    """:param nll: from :func:`token_nll`, shape (B, T).  :param mask: shape (B, T)."""
    if normalization == "sentence":
        return nll.sum() / nll.size(0)
    if normalization == "token":
        return nll.sum() / mask.sum()
    raise ValueError(f"loss normalization must be 'sentence' or 'token', got {normalization!r}")
