"""Shared fixtures: the real Hydra configs, composed and shrunk for tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import get_class
from omegaconf import DictConfig, open_dict

from sarnmt.models.factory import valid_decoders
from sarnmt.utils.compose import config_dir

os.environ.setdefault("WANDB_MODE", "disabled")

ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = config_dir()  # sarnmt/conf, the packaged configs
SHARED_DATA = ROOT.parent / "shared" / "data"
# the alternative forms of a decoder's switches
FORMS = {
    "memory_rnn": ["decoder.form=appendix"],
    "self_attentive_rnn": ["decoder.form=appendix"],
    "mean_residual": ["decoder.first_step=paper"],
}
# the model classes, by the model= options that name them (their sizes come from the tests)
MODELS = {
    "cgru": "sarnmt.models.seq2seq.Seq2Seq",
    "lstm_fixed_context": "sarnmt.models.lstm.FixedContextLSTM",
    "lstm_ff_attention": "sarnmt.models.lstm.AttentionLSTM",
    "lstm_input_feeding": "sarnmt.models.lstm.InputFeedingLSTM",
}
# the paper's cGRU decoders and every form of their switches
DECODERS = valid_decoders(get_class(MODELS["cgru"]))
DECODER_FORMS = [(name, override) for name in DECODERS for override in [None, *FORMS.get(name, [])]]
# every valid (model, decoder, switch) combination: the invariant tests run on each
SYSTEMS = [
    (model, name, override)
    for model, target in MODELS.items()
    for name in valid_decoders(get_class(target))
    for override in [None, *FORMS.get(name, [])]
]
SYSTEM_IDS = [f"{m}:{n}{'+' + o.split('=')[1] if o else ''}" for m, n, o in SYSTEMS]


def compose_train(overrides: list[str], output_dir: Path | None = None) -> DictConfig:
    """Compose ``sarnmt/conf/train.yaml`` as the command line would, with outputs in ``output_dir``."""
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
