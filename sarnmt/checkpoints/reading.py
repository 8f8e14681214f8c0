"""Reading sarnmt checkpoints without unpickling arbitrary objects (``torch.load(weights_only=True)``), and
rebuilding their models.

What a checkpoint holds is :mod:`.writing`'s to say (the ``"sarnmt"`` entry, the ``net.`` weights). The model is
rebuilt from the stored ``model`` and ``decoder`` configs by the model factory
(:func:`sarnmt.models.factory.build_model`; ``_target_`` is the registry), so loading never needs to know the model
or the decoder variant. A checkpoint is data: its stored config is read as today's (:mod:`.migration`), checked
against an allow-list of classes and for interpolations that read the environment or files before anything of it is
built (:mod:`.stored_config`), and the model is first built on the ``meta`` device, so that the sizes it claims are
compared with its tensors' shapes before any memory is allocated for them.
"""

from __future__ import annotations

import errno
import logging
import pickle
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.errors import HydraException
from torch import nn

from sarnmt.checkpoints.migration import current_targets
from sarnmt.checkpoints.stored_config import StoredConfigError, check_stored_config, plain_config
from sarnmt.checkpoints.writing import NET_PREFIX
from sarnmt.data.text.codec_state import codecs_from_state
from sarnmt.data.text.codecs import TextCodec
from sarnmt.errors import InputError, UserError
from sarnmt.models.factory import ModelConfigError, build_language_model, build_model, check_model

log = logging.getLogger("sarnmt")


class CheckpointError(UserError, ValueError):
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


def _unsafe_global(err: Exception) -> str:
    """The first object type named by a refused ``weights_only`` load, e.g. `` (posix.system)``, or ""."""
    found = re.search(r"GLOBAL ([\w.]+)", str(err))
    return f" ({found.group(1)})" if found else ""


def read_checkpoint(
    path: str | Path, task: str = "translation", mmap: bool = False, trust: Sequence[str] = ()
) -> dict[str, Any]:
    """The raw checkpoint dict, checked to be a sarnmt checkpoint. Loaded with ``torch.load(weights_only=True)``:
    tensors and plain containers only, so a file holding any other Python object (a pickle that would run code) is
    refused without running any of it.

    :param task: ``translation`` or ``lm`` (a language model of Table 6, :mod:`sarnmt.lm`): what the caller loads.
    :param mmap: map the file instead of reading it (the tensors are read when used): for a look at its entries.
    :param trust: modules whose classes its model config may name besides sarnmt's own (``trust_targets``).
    :raises CheckpointError: "does not exist", "is a folder", "is a symlink loop", "is corrupt or truncated", "is not
        a PyTorch checkpoint file", "is not a sarnmt checkpoint" (with the reason), holds the other task's model, or
        its model config names a class outside the allow-list or holds an interpolation that could read the
        environment or files (:mod:`.stored_config`, naming the key), or a translation model's stored model and
        decoder do not go together or hold a setting out of its range (:func:`check_stored_model`).
    """
    path = Path(path)
    try:
        path.stat()
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise CheckpointError(f"checkpoint {path} is a symlink loop (a link that leads back to itself)") from None
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a folder; give a .ckpt file (e.g. {path}/last.ckpt)")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap and zipfile.is_zipfile(path))
    except pickle.UnpicklingError as err:  # weights_only refused an object, or the file is no pickle at all
        if not zipfile.is_zipfile(path):
            raise CheckpointError(
                f"checkpoint {path} is not a PyTorch checkpoint file (another kind of file, or "
                "truncated); refused without running any of its content"
            ) from None
        raise CheckpointError(
            f"checkpoint {path} is not a sarnmt checkpoint: it holds Python objects"
            f"{_unsafe_global(err)} that sarnmt never loads, as loading them could run code; "
            "refused without running any of its content"
        ) from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(
            f"checkpoint {path} is corrupt or truncated ({first}); use another checkpoint, e.g. the run's last.ckpt"
        ) from err
    ours = isinstance(checkpoint, dict) and "sarnmt" in checkpoint and isinstance(checkpoint.get("state_dict"), dict)
    if not ours:
        keys = sorted(map(str, checkpoint))[:8] if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise CheckpointError(
            f"checkpoint {path} is not a sarnmt checkpoint (no 'sarnmt'/'state_dict' entry; found {keys})"
        )
    info = checkpoint["sarnmt"] if isinstance(checkpoint["sarnmt"], dict) else {}
    try:  # the plain copy that is checked below is the one that is built: nothing else of it reaches Hydra
        if "net_config" in info:
            info["net_config"] = plain_config(info["net_config"], f"checkpoint {path}", "sarnmt.net_config")
    except StoredConfigError as err:
        raise CheckpointError(str(err)) from None
    held = info.get("task", "translation")
    if held != task:
        what = {"lm": "a language model (python -m sarnmt lm)", "translation": "a translation model"}
        shown = what.get(held, repr(held)) if isinstance(held, str) else f"a {type(held).__name__} as its task"
        raise CheckpointError(f"checkpoint {path} holds {shown}, not {what.get(task, task)}")
    net_config = info.get("net_config")
    required = (
        ("model", "decoder", "src_vocab_size", "tgt_vocab_size") if task == "translation" else ("model", "vocab_size")
    )
    if (
        not isinstance(net_config, dict)
        or any(key not in net_config for key in required)
        or any(not isinstance(net_config[key], dict) for key in ("model", "decoder") if key in required)
    ):
        raise CheckpointError(f"checkpoint {path} is not a sarnmt checkpoint: 'sarnmt.net_config' lacks {required}")
    info["net_config"] = current_targets(net_config)  # written before a class it names moved: read as today's
    try:  # a checkpoint is data: its config names only the allowed classes, reads no environment or file
        own = check_stored_config(info["net_config"], f"checkpoint {path}", trust, key="sarnmt.net_config")
    except StoredConfigError as err:
        raise CheckpointError(str(err)) from None
    if own:  # a warning: translate's stderr is its log, the record of what it trusted to run
        log.warning("checkpoint %s: built with classes of your own, trusted (trust_targets): %s", path, ", ".join(own))
    if task == "translation":
        check_stored_model(info["net_config"], path)
    return checkpoint


def check_stored_model(net_config: dict[str, Any], path: str | Path) -> None:
    """A stored model and decoder checked where they enter, as a command's composed ones are
    (:func:`~sarnmt.models.factory.check_model`: the pair, the model's settings in their ranges).

    :raises CheckpointError: ``checkpoint <path> holds model ... with decoder ..., which cannot be built: <why>``."""
    try:
        check_model(net_config["model"], net_config["decoder"])
    except (ModelConfigError, InputError) as err:
        held = f"model {net_config['model'].get('_target_')!r} with decoder {net_config['decoder'].get('_target_')!r}"
        raise CheckpointError(f"checkpoint {path} holds {held}, which cannot be built: {err}") from err


def saved_progress(path: str | Path) -> tuple[int, int]:
    """How far the run that wrote a checkpoint had come: its ``global_step`` and the number of epochs begun
    (``epoch`` + 1), read with ``torch.load(weights_only=True)`` and not checked further (the caller's own run's
    ``last.ckpt``)."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    return checkpoint["global_step"], checkpoint["epoch"] + 1


def build_net(net_config: dict[str, Any], path: str | Path = "<checkpoint>", kernels: str = "auto") -> nn.Module:
    """A freshly initialised model from a stored ``net_config`` that :func:`read_checkpoint` checked
    (:func:`~sarnmt.models.factory.build_model`), on the current default device (``torch.device("meta")`` allocates
    nothing).

    :raises CheckpointError: naming the checkpoint, when its settings cannot build a model nonetheless."""
    try:
        return build_model(
            net_config["model"],
            net_config["decoder"],
            net_config["src_vocab_size"],
            net_config["tgt_vocab_size"],
            kernels,
        )
    except (HydraException, TypeError, ValueError, RuntimeError, OverflowError) as err:
        raise CheckpointError(
            f"checkpoint {path} is corrupt: its model config cannot build a model ({_first(err)})"
        ) from err


def _first(err: BaseException) -> str:
    """The last line of an error's message (Hydra wraps the constructor's error), at most 200 characters."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return (lines[-1] if lines else type(err).__name__)[:200]


def check_sizes(skeleton: nn.Module, state: dict[str, torch.Tensor], path: str | Path) -> None:
    """Compare the parameter and buffer shapes of a model built on the ``meta`` device from a checkpoint's config
    with the checkpoint's tensors, before the real model is allocated: a small checkpoint whose config claims
    ``hidden_dim=6000`` is refused without allocating gigabytes.

    :param skeleton: the model built on the ``meta`` device: its ``state_dict()`` gives each name the shape the
        config implies (an embedding's ``(V, e)``, a GRU weight's ``(3d, e)``), with no storage behind it.
    :param state: the checkpoint's weights, name → tensor (:func:`net_state_dict`), each expected at that shape.

    :raises CheckpointError: naming the first missing, unexpected or differently shaped tensor."""
    expected = {name: tuple(t.shape) for name, t in skeleton.state_dict().items()}
    found = {name: tuple(t.shape) for name, t in state.items()}
    missing, unexpected = sorted(expected.keys() - found.keys()), sorted(found.keys() - expected.keys())
    if missing:
        problem = f"its config's model has {missing[0]}, its weights do not"
    elif unexpected:
        problem = f"its weights have {unexpected[0]}, its config's model does not"
    else:
        wrong = [name for name, shape in expected.items() if found[name] != shape]
        problem = (
            f"its config gives {wrong[0]} the shape {expected[wrong[0]]}, its weights {found[wrong[0]]}"
            if wrong
            else ""
        )
    if problem:
        raise CheckpointError(f"checkpoint {path} is corrupt: its weights do not fit its model config ({problem})")


def net_state_dict(checkpoint: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The model's weights: the ``net.`` entries of the Lightning state dict, prefix removed, name → tensor of that
    parameter's or buffer's shape in the model (the tensors themselves, not copies)."""
    return {k[len(NET_PREFIX) :]: v for k, v in checkpoint["state_dict"].items() if k.startswith(NET_PREFIX)}


def load_model(
    path: str | Path, device: str | torch.device = "cpu", kernels: str = "auto", trust: Sequence[str] = ()
) -> LoadedModel:
    """Rebuild the model (eval mode, on ``device``, with the ``kernels`` choice of :mod:`sarnmt.kernels`) and
    the codecs of a sarnmt checkpoint: its config checked (:func:`read_checkpoint`), the model built on the ``meta``
    device and its shapes compared with the weights' (:func:`check_sizes`), then built for real and loaded
    (``load_state_dict(strict=True)``: every tensor at its parameter's shape, none missing or left over).

    :param trust: modules whose classes the checkpoint may name besides sarnmt's own (``trust_targets``).
    :raises CheckpointError: see :func:`read_checkpoint`; also when the weights do not fit the stored config.
    """
    checkpoint = read_checkpoint(path, trust=trust)
    info = checkpoint["sarnmt"]
    state = net_state_dict(checkpoint)
    with torch.device("meta"):
        check_sizes(build_net(info["net_config"], path, kernels), state, path)
    net = build_net(info["net_config"], path, kernels)
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint {path} is corrupt: its weights do not fit its model config: {err}") from err
    try:
        codecs = codecs_from_state(info["codecs"]) if info.get("codecs") is not None else (None, None)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise CheckpointError(f"checkpoint {path} is corrupt: its text codecs cannot be read ({err!r})") from err
    return LoadedModel(
        net=net.to(device).eval(),
        src_codec=codecs[0],
        tgt_codec=codecs[1],
        path=str(path),
        parameters=int(info.get("parameters", sum(p.numel() for p in net.parameters()))),
        net_config=info["net_config"],
        global_step=checkpoint.get("global_step"),
    )


def load_language_model(
    path: str | Path, device: str | torch.device = "cpu", trust: Sequence[str] = ()
) -> tuple[nn.Module, list[str] | None]:
    """A language model checkpoint (:mod:`sarnmt.lm`): the model (eval mode, on ``device``) and its vocabulary.

    :raises CheckpointError: see :func:`read_checkpoint`; also when the weights do not fit the stored config.
    """
    checkpoint = read_checkpoint(path, task="lm", trust=trust)
    info = checkpoint["sarnmt"]
    state = net_state_dict(checkpoint)
    model, vocab_size = info["net_config"]["model"], info["net_config"]["vocab_size"]

    def build() -> nn.Module:
        try:
            return build_language_model(model, vocab_size)
        except (ModelConfigError, HydraException, TypeError, ValueError, RuntimeError, OverflowError) as err:
            raise CheckpointError(
                f"checkpoint {path} holds a language model that cannot be rebuilt: {_first(err)}"
            ) from err

    with torch.device("meta"):  # the sizes it claims, before any allocation (see load_model)
        check_sizes(build(), state, path)
    net = build()
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint {path} is corrupt: its weights do not fit its model config: {err}") from err
    return net.to(device).eval(), info.get("vocab")
