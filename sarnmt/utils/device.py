"""Which device a command runs on."""

from __future__ import annotations

import torch


def pick_device(name: str) -> torch.device:
    """``auto``: CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
