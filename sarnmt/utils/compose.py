"""Composing a config of ``conf/`` from code, inside a Hydra app (the sweep job) or outside it (tests, tools)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose(config_name: str, overrides: Sequence[str] = (), return_hydra_config: bool = False) -> DictConfig:
    """``conf/<config_name>.yaml`` with ``overrides``, as ``python -m sarnmt.<name> <overrides>`` would see it.

    Inside a running Hydra app (whose search path is ``conf/``) the app's Hydra composes it; elsewhere a Hydra is
    initialised on ``conf/`` for the call.
    """
    if GlobalHydra.instance().is_initialized():
        return hydra_compose(config_name, overrides=list(overrides), return_hydra_config=return_hydra_config)
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name, overrides=list(overrides), return_hydra_config=return_hydra_config)
