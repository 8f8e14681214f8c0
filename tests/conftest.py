"""Shared fixtures: the real Hydra configs, composed and shrunk for tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict

os.environ.setdefault("WANDB_MODE", "disabled")

ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = ROOT / "conf"
SHARED_DATA = ROOT.parent / "shared" / "data"
DECODERS = sorted(path.stem for path in (CONF_DIR / "decoder").glob("*.yaml"))
# every decoder config with the alternative forms of its switches
DECODER_FORMS = [
    (name, override)
    for name in DECODERS
    for override in [None]
    + {
        "memory_rnn": ["decoder.form=appendix"],
        "self_attentive_rnn": ["decoder.form=appendix"],
        "mean_residual": ["decoder.first_step=paper"],
    }.get(name, [])
]


def compose_train(overrides: list[str], output_dir: Path | None = None) -> DictConfig:
    """Compose ``conf/train.yaml`` as the command line would, with outputs in ``output_dir``."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides, return_hydra_config=False)
    if output_dir is not None:
        with open_dict(cfg):
            cfg.paths.output_dir = str(output_dir)
    return cfg


def decoder_cfg(name: str, override: str | None = None) -> DictConfig:
    """The ``decoder`` node of a composed config."""
    return compose_train([f"decoder={name}"] + ([override] if override else [])).decoder


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent")
    return SHARED_DATA
