"""What the LSTM translation systems share: the target side, the step that search calls and the teacher-forced loop.

A subclass defines :meth:`LSTMTranslator.encode` and :meth:`LSTMTranslator.recurrence` (one decoder step up to the
output layer's inputs) and the output layer (:meth:`LSTMTranslator.scores`); this class turns them into the interface
the cGRU model (:class:`~sarnmt.models.seq2seq.Seq2Seq`) has, so search, the LightningModule and the CLIs run every
model alike: ``encode``, ``step``, ``forward`` (teacher-forced logits) and ``nll``.

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
import torch.nn.functional as F
from torch import Tensor, nn

from sarnmt.models.decoder import DecoderOutput, StepOutput
from sarnmt.models.hot_spots import kernel_choice
from sarnmt.models.init import normal_
from sarnmt.models.positions import scatter_positions
from sarnmt.models.state import DecoderState, SourceMemory


class LSTMTranslator(nn.Module):
    """:param tgt_vocab_size: V.  :param emb_dim: e.  :param hidden_dim: d.
    :param variant: builds the decoder variant (``decoder=`` group) with R_t of width V.
    :param dropout_embeddings: dropout on the target embeddings.
    :param kernels: ``auto``, ``fused`` or ``plain`` (:mod:`sarnmt.kernels`): the ``output_nll`` and
        ``attention_scores`` hot spots, where a system has them.
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

    def recurrence(
        self, prev_emb: Tensor, state: DecoderState, memory: SourceMemory
    ) -> tuple[Tensor, dict[str, Tensor], Tensor, Tensor | None]:
        """One step up to the output layer.  :param prev_emb: y_{t-1}'s embedding, shape (B, e).
        :returns: the new hidden state (B, d); the new ``state.recurrent``; the output layer's input (B, f); the
            source attention (B, S) or None (no attention)."""
        raise NotImplementedError

    def scores(self, features: Tensor, target_context: Tensor | None) -> Tensor:
        """The output layer.  :param features: shape (..., f).  :param target_context: the variant's R_t, shape
        (..., V), or None.  :returns: logits, shape (..., V)."""
        raise NotImplementedError

    def output_nll(self, features: Tensor, target_context: Tensor | None, target: Tensor) -> Tensor:
        """−log p(target) from the output layer's inputs, shape (N,), float32 (float64 for a float64 model); a
        system may fuse the two."""
        logits = self.scores(features, target_context)
        return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), target, reduction="none")

    # --- the shared interface ---
    @property
    def target_context(self) -> bool:
        """Whether the output layer has a target-context term (the variant's hook 2)."""
        return "readout" in self.required_hooks

    def embed_previous(self, prev_tokens: Tensor | None, like: Tensor) -> Tensor:
        """:param prev_tokens: shape (B,), or None at the first step.  :param like: any (B, ·) tensor.
        :returns: shape (B, e)."""
        if prev_tokens is None:
            return self.dropout_embeddings(self.start.to(like.dtype).expand(like.size(0), -1))
        return self.dropout_embeddings(self.embedding(prev_tokens))

    def step(self, prev_tokens: Tensor | None, state: DecoderState, memory: SourceMemory) -> StepOutput:
        """One decoding step, as search calls it.  :param prev_tokens: shape (B,), or None at the first step."""
        prev_emb = self.embed_previous(prev_tokens, state.hidden)
        hidden, recurrent, features, src_weights = self.recurrence(prev_emb, state, memory)
        target_context, vstate, tgt_weights = None, state.variant, None
        if self.target_context:
            target_context, vstate, tgt_weights = self.variant.readout_step(
                prev_emb, state.hidden, hidden, state.variant, state.steps
            )
        return StepOutput(
            logits=self.scores(features, target_context),
            state=DecoderState(hidden=hidden, variant=vstate, steps=state.steps + 1, recurrent=recurrent),
            src_attention=src_weights,
            tgt_attention=tgt_weights,
        )

    def teacher_forced(
        self, src: Tensor, src_mask: Tensor, tgt: Tensor, rows: Tensor | None
    ) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
        """The decoder over gold targets: the output layer's inputs at ``rows`` (indices into the flattened (B·T)
        grid, or all), R_t there or None, the source attention (B, T, S) or None, the variant's (B, T, T) or None."""
        memory, state = self.encode(src, src_mask)
        batch, steps = tgt.shape
        start = self.start.to(memory.annotations.dtype).expand(batch, 1, -1)
        prev_embs = self.dropout_embeddings(torch.cat([start, self.embedding(tgt[:, :-1])], dim=1))
        initial = state.hidden
        hiddens, features, src_weights = [], [], []
        for prev_emb in prev_embs.unbind(1):
            hidden, recurrent, feature, alpha = self.recurrence(prev_emb, state, memory)
            state = DecoderState(hidden=hidden, steps=state.steps + 1, recurrent=recurrent)
            hiddens.append(hidden)
            features.append(feature)
            src_weights.append(alpha)
        outputs = [torch.stack(features, dim=1)]
        tgt_attention = None
        if self.target_context:
            hiddens_all = torch.stack(hiddens, dim=1)
            prev_hiddens = torch.cat([initial.unsqueeze(1), hiddens_all[:, :-1]], dim=1)
            target_context, tgt_attention = self.variant.readout_all(prev_embs, prev_hiddens, hiddens_all)
            outputs.append(target_context)
        if rows is not None:
            outputs = [x.flatten(0, 1).index_select(0, rows) for x in outputs]
        src_attention = None if src_weights[0] is None else torch.stack(src_weights, dim=1)
        return outputs[0], outputs[1] if len(outputs) > 1 else None, src_attention, tgt_attention

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor, positions: Tensor | None = None) -> DecoderOutput:
        """Teacher-forced logits (B, T, V), or (N, V) at ``positions`` (B, T) when given (as the cGRU's)."""
        rows = None if positions is None else positions.flatten().nonzero().squeeze(1)
        features, target_context, src_attention, tgt_attention = self.teacher_forced(src, src_mask, tgt, rows)
        return DecoderOutput(
            logits=self.scores(features, target_context), src_attention=src_attention, tgt_attention=tgt_attention
        )

    def nll(self, src: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
        """−log p(y_t | y_<t, x) of the gold targets, shape (B, T), zero on padding."""
        rows = tgt_mask.flatten().nonzero().squeeze(1)
        features, target_context, _, _ = self.teacher_forced(src, src_mask, tgt, rows)
        return scatter_positions(
            self.output_nll(features, target_context, tgt.flatten().index_select(0, rows)), tgt_mask
        )
