"""The output layers of the word-level language models (Table 6): what W_o reads at each step.

Every head maps the LSTM's outputs h_t of a segment (and, for some, a memory of the words or outputs before them)
to the vector f_t that the softmax layer reads, p(w_{t+1} | w_≤t) = softmax(W_o f_t + b_o) (:mod:`.model`). A head
says what it remembers across segments of the stream (:attr:`OutputHead.memory_of`: the input embeddings or the
LSTM outputs), how many items (:attr:`OutputHead.memory_size`) and how its memory starts
(:meth:`OutputHead.initial_memory`); the model carries the memory, without gradients, from one segment to the next.

This module holds the LSTM's plain head and the paper's residual connections; Daniluk et al.'s attention and N-gram
heads are in :mod:`.daniluk`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

import torch
from torch import Tensor, nn

from sarnmt.errors import UserError, check_range
from sarnmt.models.init import init_linear_


class OutputHead(nn.Module):
    """The interface. :attr:`out_dim` is the size of f_t."""

    memory_of: ClassVar[Literal["embeddings", "outputs"]] = "outputs"
    memory_size: int = 0
    out_dim: int

    def initial_memory(self, like: Tensor) -> Tensor:
        """The memory at the start of a stream.  :param like: shape (B, k), k the size of a remembered item.
        :returns: shape (B, M₀, k); empty by default."""
        return like.new_zeros(like.size(0), 0, like.size(1))

    def forward(self, outputs: Tensor, items: Tensor) -> tuple[Tensor, Tensor | None]:
        """:param outputs: h_1 .. h_T, shape (B, T, d).
        :param items: the memory carried in (M items) followed by the segment's T items (embeddings or outputs,
            as :attr:`memory_of` says), shape (B, M + T, k).
        :returns: f_1 .. f_T, shape (B, T, out_dim), and attention weights, shape (B, T, M + T), or None."""
        raise NotImplementedError


class PlainOutput(OutputHead):
    """The LSTM language model (Daniluk et al. 2017, §2; Table 6 row "LSTM"): f_t = h_t.

    :param emb_dim: e (unused).  :param hidden_dim: d.
    """

    def __init__(self, emb_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.out_dim = hidden_dim

    def forward(self, outputs: Tensor, items: Tensor) -> tuple[Tensor, Tensor | None]:
        return outputs, None


class ModelConfigError(UserError, ValueError):
    """A language model's head built with a decoder variant that has no language-model form."""


class ResidualOutput(OutputHead):
    """Residual connections in a language model (paper §7.3; Table 6 rows "LSTM + mean / self-attentive residual
    connections"): the translation decoder's readout without its source context,

        f_t = tanh(W_h h_t + W_y d_t + b),   d_t = summary of the embeddings of the ``window`` words ending with w_t

    where d_t and W_y are the translation decoder's variant (``decoder=`` group: :class:`~sarnmt.models.variants.
    MeanResidual` eq. 9, :class:`~sarnmt.models.variants.SelfAttentiveResidual` eqs. 10-13), its
    :meth:`~sarnmt.models.variants.base.DecoderVariant.readout_window` form. With the baseline variant, d_t is the
    input word's embedding.

    :param emb_dim: e.  :param hidden_dim: d (also the size of f_t).
    :param variant: builds the decoder variant (a ``decoder=`` node as a partial; it gets e, d and out_dim = d).
    :param window: the words d_t covers, the input word included; the window − 1 before a segment are carried in.
    """

    memory_of = "embeddings"

    def __init__(self, emb_dim: int, hidden_dim: int, variant: Callable[..., nn.Module], window: int) -> None:
        super().__init__()
        check_range("model.head.window", window, 1, whole=True)
        self.variant = variant(emb_dim=emb_dim, hidden_dim=hidden_dim, out_dim=hidden_dim)
        if not getattr(self.variant, "streams", False):
            raise ModelConfigError(
                f"model.head.variant: {type(self.variant).__name__} has no language-model form (its history is not "
                "the previous words); use baseline, mean_residual, self_attentive_content or "
                "self_attentive_content_scope"
            )
        self.window = window
        self.memory_size = window - 1
        self.out_dim = hidden_dim
        self.hidden_proj = init_linear_(nn.Linear(hidden_dim, hidden_dim))

    def forward(self, outputs: Tensor, items: Tensor) -> tuple[Tensor, Tensor | None]:
        residual, weights = self.variant.readout_window(items, outputs, self.window)
        return torch.tanh(self.hidden_proj(outputs) + residual), weights
