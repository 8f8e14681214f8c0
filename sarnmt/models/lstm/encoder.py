"""LSTM encoders of the lecture notes (seed 003) and the tutorial (seed 004).

Unidirectional (seed 003, the fixed-context model)::

    h(t) = lstm(x(t), h(t-1); θ_f),  h(0) = 0            → the context h(n), the state after the last real token

Bidirectional (seed 003's attention model; seed 004)::

    h(t) = lstm(x(t), h(t-1); θ_f)   η(t) = lstm(x(t), η(t+1); θ_b)   u(t) = [h(t); η(t)]

with zero initial states (the notes' "some initial values"; the tutorial's code). Running it is the ``lstm_encoder``
hot spot: PyTorch's LSTM over packed sequences runs both directions, so each direction starts and ends at a
sentence's real tokens (:func:`~sarnmt.models.hot_spots.packed_lstm`; its lengths are read on the host); a captured
training step runs :func:`~sarnmt.kernels.masked_lstm.masked_lstm`, the same over the padded positions with the
state held at padding. The source keeps its EOS, as for the GRU encoder. Initialisation as the rest of the suite
(dl4mt's, docs/models.md §Initialisation): input weights std·N(0, 1), recurrent weights orthogonal per gate block,
biases zero; PyTorch's two bias vectors (input and hidden side) are kept, as the tutorial's code has them.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from sarnmt.models.hot_spots import packed_lstm
from sarnmt.models.init import init_recurrent_, normal_


class LSTMEncoder(nn.Module):
    """Source embeddings and a one-layer LSTM, uni- or bidirectional.

    :param vocab_size: V_src.  :param emb_dim: e.  :param hidden_dim: d per direction.
    :param bidirectional: run θ_b as well (annotations of size 2d).  :param dropout_embeddings: on the embeddings.
    """

    def __init__(
        self, vocab_size: int, emb_dim: int, hidden_dim: int, bidirectional: bool, dropout_embeddings: float
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.rnn = nn.LSTM(emb_dim, hidden_dim, batch_first=True, bidirectional=bidirectional)
        self.dropout_embeddings = nn.Dropout(dropout_embeddings)
        normal_(self.embedding.weight)
        init_recurrent_(self.rnn)

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor,
        lstm_encoder: Callable[[nn.LSTM, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]] = packed_lstm,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """:param src: shape (B, S), EOS included.  :param src_mask: shape (B, S), True on real positions.
        :param lstm_encoder: the ``lstm_encoder`` hot spot (the call's :class:`~sarnmt.models.hot_spots.HotSpots`).
        :returns: the annotations, shape (B, S, k·d) with k directions, zero at padding; the final hidden and memory
            cell states, each shape (k, B, d): row 0 is the forward direction after the last real token (h(n)),
            row 1 the backward direction after the first one (η(1))."""
        emb = self.dropout_embeddings(self.embedding(src))
        return lstm_encoder(self.rnn, emb, src_mask)
