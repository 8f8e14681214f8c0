"""The real (non-padding) positions of a batch of target sentences, row-major: a model that computes a value only at
those positions (``Seq2Seq(..., positions=mask)``, the N rows of ``nll``) selects them (:func:`selected_rows`) and
scatters them back to the (B, T) grid (:func:`scatter_positions`). A captured step cannot select them (their number
is read on the host): under ``static_shapes`` the output layer reads every position
(:func:`sarnmt.kernels.output.every_position`)."""

from __future__ import annotations

import torch
from torch import Tensor


def scatter_positions(values: Tensor, mask: Tensor) -> Tensor:
    """:param values: one value per real position, shape (N,), row-major.  :param mask: shape (B, T).
    :returns: shape (B, T), the values at the mask's positions and zero elsewhere."""
    return torch.zeros(mask.shape, dtype=values.dtype, device=values.device).masked_scatter(mask, values)


def selected_rows(positions: Tensor) -> Tensor:
    """:param positions: shape (B, T), bool.  :returns: their indices in the flattened grid, row-major, shape (N,)
    (one host synchronisation on a GPU, taken once per batch)."""
    return positions.flatten().nonzero().squeeze(1)
