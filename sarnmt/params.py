"""Parameter counts of the paper's models: ``python -m sarnmt.params model=paper decoder=<name>|all``.

The model is built on PyTorch's ``meta`` device, so counting a 110M-parameter model allocates no weights.
``decoder=all`` prints every variant (both forms of the Memory RNN and the self-attentive RNN) beside Table 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import get_class
from omegaconf import DictConfig

from sarnmt.errors import reported
from sarnmt.lit_module import count_parameters
from sarnmt.models.factory import PAPER_MODEL, build_model, valid_decoders

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"

# Table 1's |Θ| column, by decoder config (the paper reports millions truncated to one decimal).
TABLE1 = {
    "baseline": "108.7M",
    "memory_rnn": "109.7M",
    "self_attentive_rnn": "110.2M",
    "mean_residual": "108.7M",
    "self_attentive_content": "108.9M",
    "self_attentive_content_scope": "– (Table 4 only)",
}

USAGE = """usage: python -m sarnmt.params [model=<name>] [decoder=<name>|all] [key=value ...]

Prints the number of trainable parameters of a model without allocating its weights.
  model=paper|small|tiny the paper's cGRU at three sizes (default: paper)
  model=lstm_fixed_context|lstm_ff_attention|lstm_input_feeding[_small|_tiny]  the tutorials' LSTM systems
  decoder=all            a table of every decoder that fits the model, beside the paper's Table 1 for the cGRU
  src_vocab_size=50000   source vocabulary (Table 1: 50,000)
  tgt_vocab_size=50000   target vocabulary (Table 1: 50,000)
  decoder.form=appendix  Memory RNN / self-attentive RNN with the appendix's scorer instead of the count-consistent one
Decoders: {decoders}
Models: {models}
"""


def decoder_names() -> list[str]:
    """The options of the ``decoder`` config group."""
    return sorted(path.stem for path in (CONF_DIR / "decoder").glob("*.yaml"))


def count(cfg: DictConfig) -> int:
    """Trainable parameters of the model that ``cfg`` (``model``, ``decoder``, vocabulary sizes) describes."""
    with torch.device("meta"):
        return count_parameters(build_model(cfg.model, cfg.decoder, cfg.src_vocab_size, cfg.tgt_vocab_size))


def compose_params(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="params", overrides=overrides)


def table(overrides: list[str]) -> str:
    """A Markdown table of every decoder that fits the model (and both scorer forms where a decoder has them),
    beside Table 1 for the paper's model."""
    rows = []
    cfg = compose_params(overrides)
    names = valid_decoders(get_class(cfg.model._target_))
    reference = "baseline" if "baseline" in names else names[0]
    paper_model = cfg.model._target_ == PAPER_MODEL
    base = count(compose_params([*overrides, f"decoder={reference}"]))
    for name in names:
        cfg = compose_params([*overrides, f"decoder={name}"])
        forms = ["count_consistent", "appendix"] if "form" in cfg.decoder else [None]
        for form in forms:
            form_cfg = compose_params([*overrides, f"decoder={name}", f"decoder.form={form}"]) if form else cfg
            n = count(form_cfg)
            paper = TABLE1.get(name, "") if paper_model and form in (None, "count_consistent") else "–"
            rows.append(f"| {name} | {form or ''} | {n:,} | {n - base:+,} | {paper} |")
    head = (
        f"model: {cfg.model._target_.rsplit('.', 1)[1]}, e={cfg.model.emb_dim}, d={cfg.model.hidden_dim}; "
        f"V_src={cfg.src_vocab_size:,}, V_tgt={cfg.tgt_vocab_size:,}\n\n"
        f"| decoder | form | parameters | vs {reference} | Table 1 |\n|---|---|---:|---:|---|"
    )
    return "\n".join([head, *rows])


def main(argv: list[str]) -> int:
    with reported():  # Hydra's message names the valid choices; so does ours
        return _run(argv)


def _run(argv: list[str]) -> int:
    if any(arg in ("-h", "--help") for arg in argv):
        models = ", ".join(sorted(path.stem for path in (CONF_DIR / "model").glob("*.yaml")))
        print(USAGE.format(decoders=", ".join(decoder_names()), models=models))
        return 0
    if "decoder=all" in argv:
        print(table([arg for arg in argv if arg != "decoder=all"]))
        return 0
    cfg = compose_params(argv)
    print(f"{count(cfg):,}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
