"""The real (non-padding) positions of a batch of target sentences, row-major: a model that computes a value only at
those positions (``Seq2Seq(..., positions=mask)``, the N rows of ``nll``) scatters them back to the (B, T) grid."""

from __future__ import annotations

import torch
from torch import Tensor


def scatter_positions(values: Tensor, mask: Tensor) -> Tensor:
    """:param values: one value per real position, shape (N,), row-major.  :param mask: shape (B, T).
    :returns: shape (B, T), the values at the mask's positions and zero elsewhere."""
    return torch.zeros(mask.shape, dtype=values.dtype, device=values.device).masked_scatter(mask, values)
