"""What a sarnmt checkpoint holds, and how one is written: the ``"sarnmt"`` entry that the Lightning modules add to
every checkpoint they save (:func:`translation_entry`, :func:`language_model_entry`), the hash by which a checkpoint
names its vocabularies (:func:`sha256`), and the atomic write (:func:`write_checkpoint`). What is written here is read
by :mod:`.reading`::

    checkpoint["sarnmt"] = {"net_config": {"model": {...}, "decoder": {...}, "src_vocab_size": int,
                                           "tgt_vocab_size": int},
                            "codecs": {"src": ..., "tgt": ..., "joint": bool} | None,
                            "parameters": int,
                            "identity": {...}}            # a training run's, when it has one
    checkpoint["state_dict"] = {"net.<parameter name>": tensor, ...}

A language model's (:mod:`sarnmt.lm`) holds ``"task": "lm"``, its ``net_config`` (``model``, ``vocab_size``) and its
word list (``"vocab"``) instead of the codecs. A checkpoint a run can go on from also holds :data:`TRAINING_STATE`;
an averaged one (:mod:`.averaging`) does not.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import torch

from sarnmt.utils.atomic import atomic_open

NET_PREFIX = "net."  # the model's weights in the Lightning state dict: "net.<parameter name>"
# what a checkpoint holds beyond the weights when a run can go on from it (averaged checkpoints have none of these)
TRAINING_STATE = ("optimizer_states", "loops")


def translation_entry(
    net_config: dict[str, Any] | None,
    codecs: dict[str, Any] | None,
    parameters: int,
    identity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A translation model's ``checkpoint["sarnmt"]``.  :param codecs: the datamodule's codec state (None without
    one).  :param identity: the run's (:mod:`sarnmt.training.identity`), stored when given."""
    entry = {"net_config": net_config, "codecs": codecs, "parameters": parameters}
    if identity is not None:
        entry["identity"] = identity
    return entry


def language_model_entry(
    net_config: dict[str, Any] | None,
    vocab: list[str] | None,
    parameters: int,
    identity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A language model's ``checkpoint["sarnmt"]``.  :param vocab: its word list (None without a datamodule)."""
    entry = {"task": "lm", "net_config": net_config, "vocab": vocab, "parameters": parameters}
    if identity is not None:
        entry["identity"] = identity
    return entry


def sha256(obj: Any) -> str:
    """``sha256:<hex>`` of ``obj`` as canonical JSON (bytes, and a numpy array of any shape: of its raw bytes, so
    the same values in another shape or dtype hash otherwise): how a checkpoint names its vocabularies (a codec's
    whole state) and data in its run's identity."""
    if hasattr(obj, "tobytes"):
        data = obj.tobytes()
    elif isinstance(obj, bytes):
        data = obj
    else:
        data = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_checkpoint(checkpoint: dict[str, Any], path: str | os.PathLike) -> None:
    """``torch.save`` into ``.<name>.tmp-<pid>`` beside ``path``, flushed to disk, then renamed over it
    (:func:`sarnmt.utils.atomic.atomic_open`): complete or not at all. ``checkpoint``: the module docstring's layout,
    its ``state_dict`` name → tensor at each parameter's shape, saved as they are (device, dtype).

    :raises ~sarnmt.errors.WriteError: naming the file when the device refuses the write (a full disk); the previous
        file is left as it was."""
    with atomic_open(path, "wb") as handle:
        torch.save(checkpoint, handle)
