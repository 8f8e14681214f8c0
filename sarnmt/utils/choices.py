"""Which option of a config group was chosen (``logger=wandb`` → ``"wandb"``)."""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


def group_choice(cfg: DictConfig, group: str) -> str:
    """The option of ``group`` in ``cfg``: from the running Hydra app, or from ``cfg.hydra`` when the config was
    composed with ``return_hydra_config=True``."""
    if "hydra" in cfg and cfg.hydra.get("runtime") is not None:
        return str(cfg.hydra.runtime.choices[group])
    if HydraConfig.initialized():
        return str(HydraConfig.get().runtime.choices[group])
    raise ValueError(f"cannot tell which {group}= option was chosen: compose the config with return_hydra_config")
