"""The sequence-to-sequence model: bi-GRU encoder, Bahdanau attention, cGRU decoder with a pluggable variant
(paper §3-5, appendix A). A plain ``nn.Module``: usable, testable and decodable without Lightning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from torch import Tensor, nn

from sarnmt.models.decoder import ConditionalGRUDecoder
from sarnmt.models.encoder import BiGRUEncoder
from sarnmt.models.hot_spots import HotSpots, kernel_choice
from sarnmt.models.init import PAPER_STD, normal_std
from sarnmt.models.skeleton import DecoderOutput, StepOutput
from sarnmt.models.state import DecoderState, SourceMemory
from sarnmt.models.variants.base import DecoderVariant


class Seq2Seq(nn.Module):
    """:param src_vocab_size: V_src.  :param tgt_vocab_size: V_tgt.  :param emb_dim: e.  :param hidden_dim: d.
    :param variant: builds the decoder variant from ``emb_dim`` and ``hidden_dim`` (the ``decoder=`` group, a partial).
    :param dropout_readout: dropout on the readout layer, the released code's only dropout site (0.5 there).
    :param dropout_embeddings: dropout on source and target embeddings (paper text: "after each layer").
    :param dropout_hidden: dropout on encoder annotations and on s_t, c_t before the readout (paper text).
    :param init_std: the scale of the Gaussian initialisation (paper: 0.01).
    :param kernels: ``auto``, ``fused`` or ``plain``: which implementations run (:mod:`sarnmt.kernels`; the
        same equations either way). Not part of the model's config: the tools pass their own ``kernels=``.
    Each call (``encode``, ``step``, ``forward``, ``nll``) resolves the choice once into the
    :class:`~sarnmt.models.hot_spots.HotSpots` it passes down.
    """

    hooks: ClassVar[frozenset[str]] = ConditionalGRUDecoder.hooks  # the variant hooks the cGRU offers
    required_hooks: ClassVar[frozenset[str]] = ConditionalGRUDecoder.required_hooks  # and those it needs filled

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        variant: Callable[..., DecoderVariant],
        dropout_readout: float = 0.0,
        dropout_embeddings: float = 0.0,
        dropout_hidden: float = 0.0,
        init_std: float = PAPER_STD,
        kernels: str = "auto",
    ) -> None:
        super().__init__()
        self.kernels = kernel_choice(kernels)
        with normal_std(init_std):
            self.encoder = BiGRUEncoder(src_vocab_size, emb_dim, hidden_dim, dropout_embeddings, dropout_hidden)
            self.decoder = ConditionalGRUDecoder(
                tgt_vocab_size,
                emb_dim,
                hidden_dim,
                variant(emb_dim=emb_dim, hidden_dim=hidden_dim),
                dropout_embeddings,
                dropout_hidden,
                dropout_readout,
            )

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[SourceMemory, DecoderState]:
        """:param src: shape (B, S).  :param src_mask: shape (B, S).  :returns: the source memory (keys projected
        once) and the decoder state before step 1."""
        return self._encode(src, src_mask, self.kernels(src))

    def _encode(self, src: Tensor, src_mask: Tensor, spots: HotSpots) -> tuple[SourceMemory, DecoderState]:
        annotations, initial_hidden = self.encoder(src, src_mask, spots.bigru)
        keys = self.decoder.attention.project_keys(annotations)
        memory = SourceMemory(annotations=annotations, keys=keys, mask=src_mask)
        return memory, self.decoder.init_state(initial_hidden)

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor, positions: Tensor | None = None) -> DecoderOutput:
        """Teacher-forced logits.  :param tgt: gold targets with EOS, shape (B, T).
        :param positions: shape (B, T), bool: logits only there, shape (N, V) (training passes the target mask)."""
        spots = self.kernels(src)
        memory, state = self._encode(src, src_mask, spots)
        return self.decoder.decode_logits(tgt, memory, state, positions, spots)

    def nll(self, src: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
        """−log p(y_t | y_<t, x) of gold targets, shape (B, T), zero on padding: the training objective's terms
        (see :meth:`~sarnmt.models.skeleton.RecurrentDecoder.decode_nll`; no logits are formed).
        :param tgt_mask: shape (B, T)."""
        spots = self.kernels(src)
        memory, state = self._encode(src, src_mask, spots)
        return self.decoder.decode_nll(tgt, memory, state, tgt_mask, spots)

    def static_state(self, state: DecoderState, capacity: int) -> DecoderState:
        """The state for a step whose shapes stay fixed (see
        :meth:`~sarnmt.models.skeleton.RecurrentDecoder.static_state`)."""
        return self.decoder.static_state(state, capacity)

    def step(self, prev_tokens: Tensor | None, state: DecoderState, memory: SourceMemory) -> StepOutput:
        """One decoding step (see :meth:`~sarnmt.models.skeleton.RecurrentDecoder.decode_step`)."""
        return self.decoder.decode_step(prev_tokens, state, memory, self.kernels(state.hidden))
