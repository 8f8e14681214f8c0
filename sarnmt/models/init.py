"""dl4mt's initialisation (docs/models.md §Initialisation).

``norm_weight``: a square matrix is a random orthogonal matrix, any other matrix is 0.01·N(0, 1); biases are 0.
Recurrent blocks are orthogonal block by block. Tensors on the ``meta`` device (parameter counting) are skipped.

The scale of the Gaussian (0.01, the paper's "standard normal scaled to a factor of 0.01") can be changed for the
construction of a model with :func:`normal_std`: small models sit on a long plateau at the unigram perplexity with
0.01 (docs/systems.md, where the paper and its released code differ).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor, nn

PAPER_STD = 0.01
_normal_std: ContextVar[float] = ContextVar("normal_std", default=PAPER_STD)


@contextmanager
def normal_std(std: float) -> Iterator[None]:
    """Modules built inside this context draw their Gaussian weights from std·N(0, 1)."""
    assert std > 0, std  # a model's init_std, checked where it enters (models/factory.py)
    token = _normal_std.set(std)
    try:
        yield
    finally:
        _normal_std.reset(token)


@torch.no_grad()
def normal_(weight: Tensor) -> Tensor:
    """std·N(0, 1), std = 0.01 (the paper) unless set by :func:`normal_std`."""
    if not weight.is_meta:
        weight.normal_(0.0, _normal_std.get())
    return weight


@torch.no_grad()
def orthogonal_(weight: Tensor) -> Tensor:
    """A random orthogonal square matrix."""
    if not weight.is_meta:
        nn.init.orthogonal_(weight)
    return weight


@torch.no_grad()
def norm_weight_(weight: Tensor) -> Tensor:
    """dl4mt's ``norm_weight``: orthogonal when square, else 0.01·N(0, 1)."""
    return orthogonal_(weight) if weight.dim() == 2 and weight.size(0) == weight.size(1) else normal_(weight)


@torch.no_grad()
def orthogonal_blocks_(weight: Tensor, block: int) -> Tensor:
    """Orthogonal square blocks of ``block`` rows each, stacked along dim 0 (weight shape (k·block, block))."""
    for chunk in weight.split(block, dim=0):
        orthogonal_(chunk)
    return weight


@torch.no_grad()
def zeros_(tensor: Tensor | None) -> None:
    if tensor is not None and not tensor.is_meta:
        tensor.zero_()


@torch.no_grad()
def init_recurrent_(rnn: nn.Module) -> None:
    """A PyTorch RNN's (GRU, LSTM, their cells) own weights: input matrices std·N(0, 1), recurrent matrices
    orthogonal gate block by gate block, biases zero."""
    for name, param in rnn.named_parameters(recurse=False):
        if name.startswith("weight_ih"):
            normal_(param)
        elif name.startswith("weight_hh"):
            orthogonal_blocks_(param, rnn.hidden_size)
        else:
            zeros_(param)


def init_linear_(layer: nn.Linear, orthogonal_if_square: bool = True) -> nn.Linear:
    """dl4mt ``param_init_fflayer``: ``norm_weight`` for W (or plain N when ``orthogonal_if_square`` is False,
    as for ``ff_logit_prev``) and a zero bias."""
    (norm_weight_ if orthogonal_if_square else normal_)(layer.weight)
    zeros_(layer.bias)
    return layer
