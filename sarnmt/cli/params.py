"""Parameter counts of the paper's models: ``python -m sarnmt params model=paper decoder=<name>|all``, and of Table 6's
language models: ``python -m sarnmt params lm_model=<name>|all``.

The model is built on PyTorch's ``meta`` device, so counting a 110M-parameter model allocates no weights.
``decoder=all`` prints every variant (both forms of the Memory RNN and the self-attentive RNN) beside Table 1.

Not a Hydra application: ``decoder=all`` and ``lm_model=all`` are not options of a config group but one composition
per option (:func:`compose_params`), which one ``@hydra.main`` run cannot do; each composition goes through Hydra's
``compose`` with the same overrides and errors, and every error is one ``error:`` line
(:func:`~sarnmt.errors.reported`).
"""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra.utils import get_class
from omegaconf import DictConfig

from sarnmt.errors import reported
from sarnmt.utils.compose import check_user_configs, config_dir

# Table 1's |Θ| column, by decoder config (the paper reports millions truncated to one decimal).
TABLE1 = {
    "baseline": "108.7M",
    "memory_rnn": "109.7M",
    "self_attentive_rnn": "110.2M",
    "mean_residual": "108.7M",
    "self_attentive_content": "108.9M",
    "self_attentive_content_scope": "– (Table 4 only)",
}

USAGE = """usage: {prog} [model=<name>] [decoder=<name>|all] [key=value ...]

Prints the number of trainable parameters of a model without allocating its weights.
  model=paper|small|tiny the paper's cGRU at three sizes (default: paper)
  model=lstm_fixed_context|lstm_ff_attention|lstm_input_feeding[_small|_tiny]  the tutorials' LSTM systems
  decoder=all            a table of every decoder that fits the model, beside the paper's Table 1 for the cGRU
  src_vocab_size=50000   source vocabulary (Table 1: 50,000)
  tgt_vocab_size=50000   target vocabulary (Table 1: 50,000)
  decoder.form=appendix  Memory RNN / self-attentive RNN with the appendix's scorer instead of the count-consistent one
  lm_model=<name>|all    Table 6's language models instead (vocab_size=77000, Daniluk et al.'s, gives 47M);
                         model.hidden_dim=... sets a size
Decoders: {decoders}
Models: {models}
Language models: {lm_models}

Examples:
  sarnmt params model=paper decoder=all          (Table 1's counts, every decoder)
  sarnmt params lm_model=all                     (Table 6's language models)
"""
# Table 6's d and |Θ| (47M for every row), by lm_model config
TABLE6 = {
    "lstm": 300,
    "attention_lstm": 296,
    "ngram_lstm": 968,
    "mean_residual_lstm": 296,
    "self_attentive_residual_lstm": 296,
}


def decoder_names() -> list[str]:
    """The options of the ``decoder`` config group."""
    return sorted(path.stem for path in (config_dir() / "decoder").glob("*.yaml"))


def count(cfg: DictConfig) -> int:
    """Trainable parameters of the model that ``cfg`` (``model``, ``decoder``, vocabulary sizes) describes, its
    pair and settings checked first (:func:`~sarnmt.models.factory.check_model`)."""
    import torch

    from sarnmt.models.factory import build_model, check_model, count_parameters

    check_model(cfg.model, cfg.decoder)
    with torch.device("meta"):
        return count_parameters(build_model(cfg.model, cfg.decoder, cfg.src_vocab_size, cfg.tgt_vocab_size))


def compose_params(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose(config_name="params", overrides=overrides)


def table(overrides: list[str]) -> str:
    """A Markdown table of every decoder that fits the model (and both scorer forms where a decoder has them),
    beside Table 1 for the paper's model."""
    from sarnmt.models.factory import PAPER_MODEL, valid_decoders  # torch: imported to count, not for --help

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


def lm_table(argv: list[str]) -> str:
    """Table 6's language models (``lm_model=all``, or one) beside the paper's d and 47M."""
    import torch

    from sarnmt.models.factory import build_language_model, check_language_model, count_parameters

    vocab = [a for a in argv if a.startswith("vocab_size=")]
    vocab_size = int(vocab[-1].split("=", 1)[1]) if vocab else 77_000
    rest = [a for a in argv if not a.startswith(("vocab_size=", "lm_model="))]
    chosen = [a.split("=", 1)[1] for a in argv if a.startswith("lm_model=")][-1]
    names = sorted(TABLE6, key=list(TABLE6).index) if chosen == "all" else [chosen]
    rows, base = [], None
    for name in names:
        cfg = compose_lm([f"lm_model={name}", *rest])
        check_language_model(cfg.model)
        with torch.device("meta"):
            n = count_parameters(build_language_model(cfg.model, vocab_size))
        base = n if base is None else base
        paper = f"d = {TABLE6[name]}, 47M" if name in TABLE6 else "–"
        rows.append(f"| {name} | {cfg.model.emb_dim} | {cfg.model.hidden_dim} | {n:,} | {n - base:+,} | {paper} |")
    head = (
        f"language models (Table 6), V = {vocab_size:,}\n\n"
        f"| lm_model | e | d | parameters | vs {names[0]} | Table 6 |\n|---|---:|---:|---:|---:|---|"
    )
    return "\n".join([head, *rows])


def compose_lm(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose(config_name="lm", overrides=overrides)


def main(argv: list[str], prog: str = "sarnmt params") -> int:
    """``prog``: how the command was run, for its usage line."""
    with reported():  # Hydra's message names the valid choices; so does ours
        return _run(argv, prog)


def _run(argv: list[str], prog: str) -> int:
    check_user_configs(argv)  # hydra.searchpath=[file://DIR]: configs of your own, beside the packaged ones
    if any(arg in ("-h", "--help") for arg in argv):
        models = ", ".join(sorted(path.stem for path in (config_dir() / "model").glob("*.yaml")))
        lm_models = ", ".join(sorted(path.stem for path in (config_dir() / "lm_model").glob("*.yaml")))
        print(USAGE.format(prog=prog, decoders=", ".join(decoder_names()), models=models, lm_models=lm_models))
        return 0
    if any(arg.startswith("lm_model=") for arg in argv):
        print(lm_table(argv))
        return 0
    if "decoder=all" in argv:
        print(table([arg for arg in argv if arg != "decoder=all"]))
        return 0
    cfg = compose_params(argv)
    print(f"{count(cfg):,}")
    return 0
