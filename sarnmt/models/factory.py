"""The one place that builds models: training, checkpoint loading, ``params``, ``bench`` and the tests call
:func:`build_model` with a ``model=`` node and a ``decoder=`` node (``_target_`` is the registry), and
:func:`build_language_model` with an ``lm_model=`` node (Table 6's language models).

A model declares the decoder-variant hooks it offers and those a variant must fill (``hooks`` and
``required_hooks``: the cGRU offers ``readout`` and ``recurrence`` and needs ``readout``; the lecture notes' LSTMs
offer and need ``readout``; the tutorial's input-feeding LSTM neither); a variant declares the hooks it uses. A pair
is valid when ``required_hooks ⊆ variant.hooks ⊆ hooks``. :func:`check_combination` says so before any data is read,
naming the ``decoder=`` options that do fit the model.

A pair and its settings are checked once, where they enter (:func:`check_model`): a command's composed config
(``train``, ``params``, ``bench``) or a checkpoint's stored one (:func:`sarnmt.checkpoints.reading.read_checkpoint`);
:func:`build_model` builds what passed; a language model's settings likewise (:func:`check_language_model`: ``lm``,
``params lm_model=``), before :func:`build_language_model`.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from sarnmt.errors import InputError, UserError, check_one_of, check_range
from sarnmt.utils.compose import config_dir

PAPER_MODEL = "sarnmt.models.seq2seq.Seq2Seq"  # the paper's cGRU: counted by Table 1, reimplemented by the bench
LEGACY_DECODER_KEYS = ("emb_dim", "hidden_dim")  # early checkpoints stored the variant's config resolved


class ModelConfigError(UserError, ValueError):
    """A ``model=`` / ``decoder=`` config that names no class, or a pair that does not go together."""


def _plain(node: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)


def _class(node: Mapping[str, Any], group: str) -> type:
    target = node.get("_target_") if isinstance(node, Mapping) else None
    if not target:
        raise ModelConfigError(f"{group}: the config has no _target_ (got {node!r})")
    try:
        cls = get_class(target)
    except Exception as err:  # Hydra wraps import errors in its own types
        reason = str(err).strip().splitlines()[-1]
        raise ModelConfigError(f"{group}: _target_ {target!r} is not a class this installation has ({reason})") from err
    declared = ("hooks", "required_hooks") if group == "model" else ("hooks",)
    if not all(isinstance(getattr(cls, name, None), frozenset) for name in declared):
        kind = "model" if group == "model" else "decoder variant"
        says = "the hooks it offers and needs" if group == "model" else "its hooks"
        raise ModelConfigError(f"{group}: _target_ {target!r} is not a sarnmt {kind} (it does not declare {says})")
    return cls


def check_model(model: Mapping[str, Any] | DictConfig, decoder: Mapping[str, Any] | DictConfig) -> None:
    """The one check of a ``model=`` / ``decoder=`` pair and of their own settings, where they enter (see the
    module docstring): the pair (:func:`check_combination`), the model's sizes, rates and spread
    (:func:`check_model_settings`), and each setting the variant's constructor takes as one of a few names (a
    ``Literal``: ``decoder.scorer``, ``decoder.form``, ``decoder.first_step``), one of those names.

    :raises ModelConfigError: for a pair that does not go together, or a node that names no sarnmt model or variant.
    :raises InputError: ``model.<key>=<value>: must be ...`` (:func:`~sarnmt.errors.check_range`), or
        ``decoder.<key>=<value> is not a choice: ...`` (:func:`~sarnmt.errors.check_one_of`)."""
    check_combination(model, decoder)
    check_model_settings(model)
    decoder = _plain(decoder)
    for key, choices in literal_choices(_class(decoder, "decoder")).items():
        if key in decoder:
            check_one_of(f"decoder.{key}", decoder[key], choices)


def check_model_settings(model: Mapping[str, Any] | DictConfig) -> None:
    """A model's own settings (a ``model=`` or an ``lm_model=`` node): every ``dropout*`` a number in [0, 1] (NaN
    passed ``nn.Dropout`` and failed at the first forward step), every ``*_dim`` a whole number >= 1 and ``init_std``,
    the std of the Gaussian initial weights (:mod:`sarnmt.models.init`), a finite number above 0.

    :raises InputError: ``model.<key>=<value>: must be ...`` (:func:`~sarnmt.errors.check_range`)."""
    for key, value in _plain(model).items():
        if isinstance(key, str) and key.startswith("dropout"):
            check_range(f"model.{key}", value, 0, 1, "a dropout rate")
        elif isinstance(key, str) and key.endswith("_dim"):
            check_range(f"model.{key}", value, 1, whole=True)
        elif key == "init_std":
            check_range("model.init_std", value, 0)
            if value == 0:
                raise InputError("model.init_std=0: must be more than 0 (the spread of the initial weights)")


def literal_choices(cls: type) -> dict[str, tuple[str, ...]]:
    """The constructor parameters of ``cls`` annotated as one of a few names (``Literal["content", ...]``), with
    their names: where a variant declares its choices. A class whose annotations do not resolve declares none."""
    try:
        hints = typing.get_type_hints(cls.__init__)
    except (NameError, TypeError, AttributeError):  # a class of one's own, annotated with names not importable here
        return {}
    return {
        key: tuple(str(choice) for choice in typing.get_args(hint))
        for key, hint in hints.items()
        if typing.get_origin(hint) is typing.Literal
    }


def decoder_options() -> dict[str, str]:
    """The ``decoder=`` options of ``sarnmt/conf/decoder``: name → ``_target_``."""
    return {
        path.stem: str(OmegaConf.load(path).get("_target_"))
        for path in sorted((config_dir() / "decoder").glob("*.yaml"))
    }


def fits(model_cls: type, variant_cls: type) -> bool:
    """Whether a variant class goes with a model class (see the module docstring)."""
    hooks = getattr(variant_cls, "hooks", None)
    return hooks is not None and model_cls.required_hooks <= hooks <= model_cls.hooks


def valid_decoders(model_cls: type) -> list[str]:
    """The ``decoder=`` options that fit ``model_cls``."""
    return [name for name, target in decoder_options().items() if fits(model_cls, get_class(target))]


def check_combination(model: Mapping[str, Any] | DictConfig, decoder: Mapping[str, Any] | DictConfig) -> None:
    """:raises ModelConfigError: naming both classes, what the model offers and the decoders that fit it."""
    model_cls, variant_cls = _class(_plain(model), "model"), _class(_plain(decoder), "decoder")
    if fits(model_cls, variant_cls):
        return
    offers = ", ".join(sorted(model_cls.hooks)) or "no hook"
    needs = ", ".join(sorted(model_cls.required_hooks)) or "nothing"
    uses = ", ".join(sorted(variant_cls.hooks)) or "none"
    raise ModelConfigError(
        f"decoder {variant_cls.__name__} (hooks: {uses}) does not go with model {model_cls.__name__} (offers: "
        f"{offers}; needs: {needs}); valid decoder= options for this model: {', '.join(valid_decoders(model_cls))}"
    )


def build_model(
    model: Mapping[str, Any] | DictConfig,
    decoder: Mapping[str, Any] | DictConfig,
    src_vocab_size: int,
    tgt_vocab_size: int,
    kernels: str = "auto",
) -> nn.Module:
    """A freshly initialised model (on the current default device: ``torch.device("meta")`` counts parameters), of a
    pair that passed :func:`check_model` where it entered.

    :param model: a ``model=`` node.  :param decoder: a ``decoder=`` node; always built as a partial that the model
        completes with its own sizes (early checkpoints stored it without ``_partial_`` and with e and d).
    :param kernels: ``auto``, ``fused`` or ``plain`` (:mod:`sarnmt.kernels`): the tool's choice, not the
        model's config (the same weights compute the same function either way).
    """
    model, decoder = _plain(model), _plain(decoder)
    decoder = {key: value for key, value in decoder.items() if key not in LEGACY_DECODER_KEYS}
    variant = instantiate({**decoder, "_partial_": True})
    return instantiate(
        model, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, variant=variant, kernels=kernels
    )


def check_language_model(model: Mapping[str, Any] | DictConfig) -> None:
    """The one check of an ``lm_model=`` node where it enters (``lm``, ``params lm_model=``): a language model, with
    its settings in range (:func:`check_model_settings`).

    :raises ModelConfigError: when the node is not a language model (a translation ``model=`` node, say).
    :raises InputError: ``model.<key>=<value>: must be ...`` (:func:`~sarnmt.errors.check_range`)."""
    _language_model_class(_plain(model))
    check_model_settings(model)


def _language_model_class(model: Mapping[str, Any]) -> type:
    target = model.get("_target_", "")
    try:
        cls = get_class(target)
    except Exception as err:  # Hydra wraps import errors in its own types
        raise ModelConfigError(f"model: _target_ {target!r} is not a class this installation has") from err
    if getattr(cls, "task", None) != "lm":
        options = sorted(path.stem for path in (config_dir() / "lm_model").glob("*.yaml"))
        raise ModelConfigError(f"model: {target} is not a language model; lm_model= options: {', '.join(options)}")
    return cls


def build_language_model(model: Mapping[str, Any] | DictConfig, vocab_size: int) -> nn.Module:
    """A freshly initialised language model (Table 6; an ``lm_model=`` node, :mod:`sarnmt.lm`), whose settings passed
    :func:`check_language_model` where they entered.

    :raises ModelConfigError: when the node is not a language model (a translation ``model=`` node, say).
    """
    model = _plain(model)
    _language_model_class(model)
    return instantiate(model, vocab_size=vocab_size)


def count_parameters(module: nn.Module) -> int:
    """Number of trainable parameters (works on the ``meta`` device too)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def plain_config(node: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    """A config node as plain, resolved Python data (what checkpoints store)."""
    return _plain(node)


def net_config(
    model: Mapping[str, Any] | DictConfig,
    decoder: Mapping[str, Any] | DictConfig,
    src_vocab_size: int,
    tgt_vocab_size: int,
) -> dict[str, Any]:
    """What a checkpoint stores to rebuild the model with :func:`build_model`."""
    return {
        "model": _plain(model),
        "decoder": _plain(decoder),
        "src_vocab_size": src_vocab_size,
        "tgt_vocab_size": tgt_vocab_size,
    }
