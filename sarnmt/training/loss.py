"""The training objective (paper eq. 1; docs/models.md §Training objective).

``sentence`` (the paper's and dl4mt's): the negative log-likelihood summed over each sentence's target tokens (EOS
included), averaged over the sentences of the batch. ``token``: averaged over target tokens instead.

Training takes −log p(y_t) from the model's ``nll`` (the ``output_nll`` hot spot: by default the output layer and
the cross-entropy as one operation, :func:`sarnmt.kernels.output.linear_nll`); the logits themselves
(:func:`token_nll`) are for the reference implementation and for tests.
"""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor

from sarnmt.models.positions import scatter_positions


def token_nll(logits: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """:param logits: shape (B, T, V), or (N, V) at the N real positions of ``mask`` (row-major, as
        ``Seq2Seq(..., positions=mask)`` gives them).  :param target: shape (B, T).  :param mask: shape (B, T).
    :returns: −log p(y_t) per position, zero on padding, shape (B, T)."""
    if logits.dim() == 2:
        return scatter_positions(F.cross_entropy(logits.float(), target[mask], reduction="none"), mask)
    nll = F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), reduction="none").view_as(target)
    return nll * mask


LOSS_NORMALIZATIONS = ("sentence", "token")  # train's loss=: per sentence (the paper, dl4mt) or per token


def translation_loss(nll: Tensor, mask: Tensor, normalization: Literal["sentence", "token"]) -> Tensor:
    """:param nll: −log p(y_t), zero on padding (:func:`token_nll`, ``Seq2Seq.nll``), shape (B, T).
    :param mask: shape (B, T)."""
    if normalization == "sentence":
        return nll.sum() / nll.size(0)
    assert normalization == "token", normalization  # one of LOSS_NORMALIZATIONS, checked where it enters (loss=)
    return nll.sum() / mask.sum()
