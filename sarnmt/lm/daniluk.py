"""Daniluk et al.'s two output layers, Table 6's baselines "LSTM + Attention" and "LSTM + 4-gram" (Daniluk,
Rocktäschel, Welbl and Riedel, "Frustratingly short attention spans in neural language modeling", ICLR 2017, §2.1
and §2.4). Both read the LSTM outputs h of the recent past, which they remember across segments of the stream; the
memory starts as zero vectors (a memory of fixed size, empty at the start of the text).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from sarnmt.errors import check_range
from sarnmt.lm.heads import ModelConfigError, OutputHead
from sarnmt.models.history import HistoryAttention
from sarnmt.models.init import init_linear_


class AttentionOutput(OutputHead):
    """Attention over the L previous outputs (Daniluk et al. §2.1)::

        Y_t = [h_{t-L} .. h_{t-1}],   M_t = tanh(W^Y Y_t + (W^h h_t) 1ᵀ),   α_t = softmax(wᵀ M_t),
        r_t = Y_t α_tᵀ,   f_t = h*_t = tanh(W^r r_t + W^x h_t)

    The scorer is the shared :class:`~sarnmt.models.history.HistoryAttention` with a query and no key bias.

    :param emb_dim: e (unused).  :param hidden_dim: d.  :param window: L.
    """

    def __init__(self, emb_dim: int, hidden_dim: int, window: int) -> None:
        super().__init__()
        check_range("model.head.window", window, 1, whole=True)
        self.window = self.memory_size = window
        self.out_dim = hidden_dim
        self.attention = HistoryAttention(hidden_dim, hidden_dim, key_bias=False)
        self.summary_proj = init_linear_(nn.Linear(hidden_dim, hidden_dim, bias=False))  # W^r
        self.output_proj = init_linear_(nn.Linear(hidden_dim, hidden_dim, bias=False))  # W^x

    def initial_memory(self, like: Tensor) -> Tensor:
        return like.new_zeros(like.size(0), self.window, like.size(1))

    def forward(self, outputs: Tensor, items: Tensor) -> tuple[Tensor, Tensor | None]:
        summary, weights = self.attention.attend_window(items, outputs, outputs.size(1), self.window, current=False)
        return torch.tanh(self.summary_proj(summary) + self.output_proj(outputs)), weights


class NgramOutput(OutputHead):
    """The N-gram RNN (Daniluk et al. §2.4): the output h_t is split into N − 1 parts h_t^1 .. h_t^{N-1} of d/(N−1)
    each, and the prediction reads one part of each of the last N − 1 outputs::

        f_t = h*_t = tanh(W^N [h_t^1; h_{t-1}^2; ...; h_{t-N+2}^{N-1}])     (W^N: d/(N−1) × d, no bias)

    :param emb_dim: e (unused).  :param hidden_dim: d, a multiple of N − 1.  :param order: N.
    """

    def __init__(self, emb_dim: int, hidden_dim: int, order: int) -> None:
        super().__init__()
        if order < 2 or hidden_dim % (order - 1):
            raise ModelConfigError(
                f"model.head.order={order} needs order >= 2 and model.hidden_dim ({hidden_dim}) a multiple of order - 1"
            )
        self.order = order
        self.part = hidden_dim // (order - 1)
        self.memory_size = order - 2
        self.out_dim = self.part
        self.combine = init_linear_(nn.Linear(hidden_dim, self.part, bias=False))  # W^N

    def initial_memory(self, like: Tensor) -> Tensor:
        return like.new_zeros(like.size(0), self.memory_size, like.size(1))

    def forward(self, outputs: Tensor, items: Tensor) -> tuple[Tensor, Tensor | None]:
        steps = outputs.size(1)
        end = items.size(1)
        # part j (0-based) comes from the output j steps back: items [end - steps - j, end - j)
        parts = [
            items[:, end - steps - j : end - j, j * self.part : (j + 1) * self.part] for j in range(self.order - 1)
        ]
        return torch.tanh(self.combine(torch.cat(parts, dim=-1))), None
