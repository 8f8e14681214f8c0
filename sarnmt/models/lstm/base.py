"""What the LSTM translation systems share: the target side, on the decoder skeleton.

A subclass defines :meth:`LSTMTranslator.encode`, the skeleton's :meth:`~LSTMTranslator.recurrence` (one decoder
step up to the output layer's inputs, reading the source through :meth:`LSTMTranslator.source_context`) and the
output layer (:meth:`LSTMTranslator.scores`); the skeleton (:class:`~sarnmt.models.skeleton.RecurrentDecoder`) runs
them as it runs the cGRU, and this class gives them the interface the cGRU model
(:class:`~sarnmt.models.seq2seq.Seq2Seq`) has, so search, the LightningModule and the CLIs run every model alike:
``encode``, ``step``, ``forward`` (teacher-forced logits) and ``nll``.

Where the output layer has a term for the previous word (the lecture notes' l(j) = V·[γ(j); y_{j-1}; c(j)] + b), the
decoder variant computes it (``hooks = {"readout"}``), so the paper's residual connections replace y_{j-1} by d_j;
where it has none (the tutorial's P_t = softmax(W_vocab o_t)) no variant is called.

The first target step reads a start symbol: the notes' y_0 and the tutorial's start token. Its embedding is a learned
vector (``start``), so the target vocabulary needs no extra entry (the cGRU reads a zero vector there instead).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from sarnmt.models.hot_spots import HotSpots, kernel_choice
from sarnmt.models.init import normal_
from sarnmt.models.skeleton import DecoderOutput, RecurrentDecoder, StepOutput
from sarnmt.models.state import DecoderState, SourceMemory

SourceContext = Callable[[Tensor], tuple[Tensor, Tensor | None]]


class LSTMTranslator(RecurrentDecoder):
    """:param tgt_vocab_size: V.  :param emb_dim: e.  :param hidden_dim: d.
    :param variant: builds the decoder variant (``decoder=`` group) with R_t of width V.
    :param dropout_embeddings: dropout on the target embeddings.
    :param kernels: ``auto``, ``fused`` or ``plain`` (:mod:`sarnmt.kernels`): the ``output_nll`` and
        ``attention_scores`` hot spots, where a system has them; resolved once per call.
    """

    hooks: ClassVar[frozenset[str]] = frozenset({"readout"})  # the variant hooks this decoder offers
    required_hooks: ClassVar[frozenset[str]] = frozenset({"readout"})  # and those a variant must fill

    def __init__(
        self,
        tgt_vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        variant: Callable[..., nn.Module],
        dropout_embeddings: float,
        kernels: str = "auto",
    ) -> None:
        super().__init__()
        self.kernels = kernel_choice(kernels)
        self.emb_dim, self.hidden_dim = emb_dim, hidden_dim
        self.embedding = nn.Embedding(tgt_vocab_size, emb_dim)
        self.start = nn.Parameter(torch.empty(emb_dim))  # the embedding of y_0, the start symbol
        self.variant = variant(emb_dim=emb_dim, hidden_dim=hidden_dim, out_dim=tgt_vocab_size)
        self.dropout_embeddings = nn.Dropout(dropout_embeddings)
        normal_(self.embedding.weight)
        normal_(self.start)

    # --- what a system defines ---
    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[SourceMemory, DecoderState]:
        """:param src: shape (B, S).  :param src_mask: shape (B, S).  :returns: the source memory and the state
        before step 1."""
        raise NotImplementedError

    def source_context(self, memory: SourceMemory, spots: HotSpots) -> SourceContext:
        """The map a step reads the source through: its query (B·g, ·) ↦ the context (B·g, ·) and the attention
        (B·g, S), or None (no attention); with the call's hot spots bound."""
        raise NotImplementedError

    def scores(self, features: Tensor, target_context: Tensor | None) -> Tensor:
        """The output layer.  :param features: shape (..., f).  :param target_context: the variant's R_t, shape
        (..., V), or None.  :returns: logits, shape (..., V)."""
        raise NotImplementedError

    # --- the skeleton's system methods ---
    def first_embedding(self, like: Tensor) -> Tensor:
        """y_0, the start symbol's learned embedding.  :param like: any (B, ·) tensor.  :returns: shape (B, e)."""
        return self.start.to(like.dtype).expand(like.size(0), -1)

    def step_maps(self, memory: SourceMemory, spots: HotSpots) -> SourceContext:
        return self.source_context(memory, spots)

    def readout_inputs(self, hiddens: Tensor, outputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """The output layer's features (``outputs`` is (features,))."""
        return outputs

    def logits(self, inputs: tuple[Tensor, ...], target_context: Tensor | None) -> Tensor:
        return self.scores(inputs[0], target_context)

    # --- the interface the cGRU model has ---
    def step(self, prev_tokens: Tensor | None, state: DecoderState, memory: SourceMemory) -> StepOutput:
        """One decoding step, as search calls it.  :param prev_tokens: shape (B,), or None at the first step."""
        return self.decode_step(prev_tokens, state, memory, self.kernels(state.hidden))

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor, positions: Tensor | None = None) -> DecoderOutput:
        """Teacher-forced logits (B, T, V), or (N, V) at ``positions`` (B, T) when given (as the cGRU's)."""
        memory, state = self.encode(src, src_mask)
        return self.decode_logits(tgt, memory, state, positions, self.kernels(src))

    def nll(self, src: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
        """−log p(y_t | y_<t, x) of the gold targets, shape (B, T), zero on padding."""
        memory, state = self.encode(src, src_mask)
        return self.decode_nll(tgt, memory, state, tgt_mask, self.kernels(src))
