"""The word-level recurrent language model of Table 6: one LSTM layer and a pluggable output layer.

    x_t = E w_t,   (h_t, c_t) = LSTM(x_t, (h_{t-1}, c_{t-1})),   f_t = head(h_≤t, memory),
    p(w_{t+1} | w_≤t) = softmax(W_o f_t + b_o)

The head (:mod:`.heads`, :mod:`.daniluk`) is what the five rows of Table 6 differ in. A text is read as one
continuous stream in segments (truncated back-propagation through time); :class:`LMState` carries the LSTM state
and the head's memory from one segment to the next (the caller detaches it), so two consecutive segments compute
exactly what one long segment computes whenever the head's memory holds what its window needs (the tests check it).

Initialisation follows the rest of the suite (:mod:`sarnmt.models.init`): embeddings and input matrices
``init_std``·N(0, 1), recurrent matrices orthogonal per gate, square projections orthogonal, biases zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.lm.heads import OutputHead
from sarnmt.models.init import init_linear_, init_recurrent_, normal_, normal_std


@dataclass(frozen=True)
class LMState:
    """What a segment hands to the next: ``hidden`` and ``cell``, shape (B, d); ``memory``, the head's last items
    (embeddings or outputs), shape (B, M, k)."""

    hidden: Tensor
    cell: Tensor
    memory: Tensor

    def detach(self) -> LMState:
        return LMState(self.hidden.detach(), self.cell.detach(), self.memory.detach())

    def to(self, device: torch.device) -> LMState:
        return LMState(self.hidden.to(device), self.cell.to(device), self.memory.to(device))


@dataclass(frozen=True)
class LMOutput:
    """``logits`` (B, T, V); ``state`` after the segment; ``attention`` (B, T, M + T) or None."""

    logits: Tensor
    state: LMState
    attention: Tensor | None


class RecurrentLM(nn.Module):
    """:param vocab_size: V.  :param emb_dim: e.  :param hidden_dim: d.
    :param head: builds the output layer (a ``head`` node as a partial; it gets e and d).
    :param dropout: dropout on the embeddings and on f_t (Zaremba et al.'s non-recurrent connections).
    :param init_std: the std of the Gaussian initialisation (:mod:`sarnmt.models.init`).
    """

    task: ClassVar[str] = "lm"  # checkpoints and the sweep tell language models from translation models by this

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        head: Callable[..., OutputHead],
        dropout: float = 0.0,
        init_std: float = 0.1,
    ) -> None:
        super().__init__()
        self.vocab_size, self.emb_dim, self.hidden_dim = vocab_size, emb_dim, hidden_dim
        with normal_std(init_std):
            self.embedding = nn.Embedding(vocab_size, emb_dim)
            self.lstm = nn.LSTM(emb_dim, hidden_dim, batch_first=True)
            self.head = head(emb_dim=emb_dim, hidden_dim=hidden_dim)
            self.output = init_linear_(nn.Linear(self.head.out_dim, vocab_size))
            normal_(self.embedding.weight)
            init_recurrent_(self.lstm)
        self.dropout = nn.Dropout(dropout)

    def initial_state(self, batch: int, like: Tensor) -> LMState:
        """The state at the start of a stream.  :param like: any floating tensor (dtype and device)."""
        zeros = like.new_zeros(batch, self.hidden_dim)
        width = self.emb_dim if self.head.memory_of == "embeddings" else self.hidden_dim
        return LMState(zeros, zeros, self.head.initial_memory(like.new_zeros(batch, width)))

    def forward(self, inputs: Tensor, state: LMState | None = None) -> LMOutput:
        """:param inputs: w_1 .. w_T, shape (B, T).  :param state: from the previous segment, or None at the start
        of a stream."""
        embeddings = self.dropout(self.embedding(inputs))
        if state is None:
            state = self.initial_state(inputs.size(0), embeddings)
        outputs, (hidden, cell) = self.lstm(embeddings, (state.hidden.unsqueeze(0), state.cell.unsqueeze(0)))
        fresh = embeddings if self.head.memory_of == "embeddings" else outputs
        items = torch.cat([state.memory, fresh], dim=1)
        features, attention = self.head(outputs, items)
        keep = self.head.memory_size
        memory = items[:, items.size(1) - keep :] if keep else items[:, :0]
        logits = self.output(self.dropout(features))
        return LMOutput(logits, LMState(hidden.squeeze(0), cell.squeeze(0), memory), attention)

    def nll(
        self, inputs: Tensor, targets: Tensor, mask: Tensor, state: LMState | None = None
    ) -> tuple[Tensor, LMState]:
        """−log p(target) at every position, shape (B, T), zero where ``mask`` (B, T) is False; and the state."""
        out = self.forward(inputs, state)
        logits = out.logits if out.logits.dtype == torch.float64 else out.logits.float()
        nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view_as(targets)
        return nll.masked_fill(~mask, 0.0), out.state
