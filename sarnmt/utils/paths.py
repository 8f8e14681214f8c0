"""Paths given in a config, read relative to the directory the user launched the program from."""

from __future__ import annotations

from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.utils import to_absolute_path


def resolve_path(path: str) -> str:
    """``path`` relative to the directory the user launched from (Hydra may change the working directory)."""
    return to_absolute_path(path) if HydraConfig.initialized() else str(Path(path))
