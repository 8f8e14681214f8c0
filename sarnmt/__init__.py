"""sarnmt: self-attentive residual decoders for recurrent NMT."""

__version__ = "0.1.0"
