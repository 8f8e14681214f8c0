"""Loading sarnmt checkpoints without unpickling arbitrary objects (``torch.load(weights_only=True)``).

A sarnmt checkpoint is a Lightning checkpoint whose ``"sarnmt"`` entry (written by
:meth:`sarnmt.lit_module.TranslationModule.on_save_checkpoint`) holds what is needed to rebuild the model and its
text codecs::

    checkpoint["sarnmt"] = {"net_config": {"model": {...}, "decoder": {...}, "src_vocab_size": int,
                                           "tgt_vocab_size": int},
                            "codecs": {"src": ..., "tgt": ..., "joint": bool} | None,
                            "parameters": int}
    checkpoint["state_dict"] = {"net.<parameter name>": tensor, ...}

The model is rebuilt from the stored ``model`` and ``decoder`` configs by the model factory
(:func:`sarnmt.models.factory.build_model`; ``_target_`` is the registry), so loading never needs to know the model
or the decoder variant.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sarnmt.data.codecs import TextCodec
from sarnmt.data.datamodule import codecs_from_state
from sarnmt.models.factory import ModelConfigError, build_model

NET_PREFIX = "net."


class CheckpointError(ValueError):
    """A checkpoint that is missing, not a sarnmt checkpoint, or corrupt; the message says which."""


@dataclass
class LoadedModel:
    """:param net: the model in eval mode.  :param src_codec: / :param tgt_codec: the text codecs (None when the
    checkpoint was written without a datamodule).  :param path: where it came from.  :param parameters: the count.
    :param net_config: the stored model/decoder configs.  :param global_step: the training step it was saved at."""

    net: nn.Module
    src_codec: TextCodec | None
    tgt_codec: TextCodec | None
    path: str
    parameters: int
    net_config: dict[str, Any]
    global_step: int | None


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The raw checkpoint dict, checked to be a sarnmt checkpoint.

    :raises CheckpointError: "does not exist", "is corrupt or not a PyTorch checkpoint", or "is not a sarnmt
        checkpoint" (with the reason).
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:  # weights_only refused an object: written by something else
        raise CheckpointError(f"checkpoint {path} is not a sarnmt checkpoint (it holds objects that "
                              f"weights_only loading refuses: {str(err).splitlines()[0]})") from err  # fmt: skip
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as err:
        raise CheckpointError(f"checkpoint {path} is corrupt or not a PyTorch checkpoint: {err}") from err
    if not isinstance(checkpoint, dict) or "sarnmt" not in checkpoint or "state_dict" not in checkpoint:
        keys = sorted(checkpoint)[:8] if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise CheckpointError(f"checkpoint {path} is not a sarnmt checkpoint (no 'sarnmt'/'state_dict' entry; "
                              f"found {keys})")  # fmt: skip
    net_config = checkpoint["sarnmt"].get("net_config") if isinstance(checkpoint["sarnmt"], dict) else None
    required = ("model", "decoder", "src_vocab_size", "tgt_vocab_size")
    if not isinstance(net_config, dict) or any(key not in net_config for key in required):
        raise CheckpointError(f"checkpoint {path} is not a sarnmt checkpoint: 'sarnmt.net_config' lacks {required}")
    return checkpoint


def build_net(net_config: dict[str, Any], path: str | Path = "<checkpoint>", kernels: str = "auto") -> nn.Module:
    """A freshly initialised model from a stored ``net_config`` (:func:`~sarnmt.models.factory.build_model`).

    :raises CheckpointError: naming the checkpoint and the model it holds, when this installation has no such model
        or the stored model and decoder do not go together."""
    try:
        return build_model(net_config["model"], net_config["decoder"], net_config["src_vocab_size"],
                           net_config["tgt_vocab_size"], kernels)  # fmt: skip
    except ModelConfigError as err:
        held = f"model {net_config['model'].get('_target_')!r} with decoder {net_config['decoder'].get('_target_')!r}"
        raise CheckpointError(f"checkpoint {path} holds {held}, which cannot be built: {err}") from err


def net_state_dict(checkpoint: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The model's weights (the ``net.`` entries of the Lightning state dict, prefix removed)."""
    return {k[len(NET_PREFIX) :]: v for k, v in checkpoint["state_dict"].items() if k.startswith(NET_PREFIX)}


def load_model(path: str | Path, device: str | torch.device = "cpu", kernels: str = "auto") -> LoadedModel:
    """Rebuild the model (eval mode, on ``device``, with the ``kernels`` choice of :mod:`sarnmt.models.kernels`) and
    the codecs of a sarnmt checkpoint.

    :raises CheckpointError: see :func:`read_checkpoint`; also when the weights do not fit the stored config.
    """
    checkpoint = read_checkpoint(path)
    info = checkpoint["sarnmt"]
    net = build_net(info["net_config"], path, kernels)
    try:
        net.load_state_dict(net_state_dict(checkpoint), strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint {path} is corrupt: its weights do not fit its model config: {err}") from err
    codecs = codecs_from_state(info["codecs"]) if info.get("codecs") is not None else (None, None)
    return LoadedModel(
        net=net.to(device).eval(), src_codec=codecs[0], tgt_codec=codecs[1], path=str(path),
        parameters=int(info.get("parameters", sum(p.numel() for p in net.parameters()))),
        net_config=info["net_config"], global_step=checkpoint.get("global_step"),
    )  # fmt: skip
