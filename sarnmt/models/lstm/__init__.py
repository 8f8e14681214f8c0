"""The LSTM translation systems of the seeds' tutorials (003: lecture notes; 004: the input-feeding tutorial)."""

from sarnmt.models.lstm.input_feeding import InputFeedingLSTM
from sarnmt.models.lstm.lecture import AttentionLSTM, FixedContextLSTM

__all__ = ["AttentionLSTM", "FixedContextLSTM", "InputFeedingLSTM"]
