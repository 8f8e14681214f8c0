"""Decoder variants, one small module each, selected by the ``decoder=`` Hydra group through ``_target_``."""

from sarnmt.models.variants.base import Baseline, DecoderVariant, NoTargetContext
from sarnmt.models.variants.mean_residual import MeanResidual
from sarnmt.models.variants.memory_rnn import MemoryRNN
from sarnmt.models.variants.self_attentive_residual import SelfAttentiveResidual
from sarnmt.models.variants.self_attentive_rnn import SelfAttentiveRNN

__all__ = [
    "Baseline",
    "DecoderVariant",
    "MeanResidual",
    "MemoryRNN",
    "NoTargetContext",
    "SelfAttentiveRNN",
    "SelfAttentiveResidual",
]
