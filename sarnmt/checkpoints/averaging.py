"""Checkpoint averaging: the element-wise mean of several checkpoints' weights, written as a sarnmt checkpoint
(loadable by :func:`sarnmt.checkpoints.reading.load_model`, ``translate`` and ``evaluate``).

Its other entries come from the newest input, without optimizer, scheduler and loop states (it is for decoding, not
for resuming), and ``checkpoint["sarnmt"]["averaged_from"]`` lists the inputs. "Last N" is by the stored
``global_step`` (``last.ckpt`` is skipped, as it duplicates a numbered checkpoint). Inputs are read as every checkpoint
is (:func:`sarnmt.checkpoints.reading.read_checkpoint`: truncated files, other projects' checkpoints and pickles that
would run code are refused by name), and checkpoints with different vocabularies are refused, naming both; the output
is written atomically, so a failed write leaves the previous file, and never over a checkpoint a run resumes from
(``last.ckpt``, or any checkpoint holding an optimizer state). ``sarnmt average`` (:mod:`sarnmt.cli.average`) and
``average_last=N`` of a training run (:func:`sarnmt.training.run.evaluate_average`) call it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from sarnmt.checkpoints.reading import CheckpointError, read_checkpoint
from sarnmt.checkpoints.writing import TRAINING_STATE, sha256, write_checkpoint
from sarnmt.errors import InputError

DROPPED = ("optimizer_states", "lr_schedulers", "callbacks", "loops")


def average_checkpoints(paths: list[str | Path], output: str | Path, trust: Sequence[str] = ()) -> dict[str, Any]:
    """Write the average of ``paths`` to ``output``: for every floating-point tensor of the state dict, the element-wise

        θ̄ = (1/n) Σ_k θ_k,   k = 1..n,

    over the ``n`` checkpoints' tensors θ_k, of one shape in every checkpoint (any shape: an embedding's ``(V, e)``,
    a GRU weight's ``(3d, e)``, a bias's ``(3d,)``), summed in float64 and cast back to the tensor's dtype; integer
    tensors (counters, masks) are the newest checkpoint's.

    :param trust: modules whose classes the checkpoints' model config may name besides sarnmt's own.
    :returns: the written checkpoint.

    :raises CheckpointError: when a checkpoint cannot be read or the models or vocabularies differ.
    :raises InputError: when ``output`` is a checkpoint a run can resume from.
    """
    if not paths:
        raise InputError("average_checkpoints: no checkpoint to average")
    check_output(Path(output))
    checkpoints = [read_checkpoint(path, trust=trust) for path in paths]
    first = checkpoints[0]
    config = first["sarnmt"]["net_config"]
    sums: dict[str, torch.Tensor] = {}
    for path, checkpoint in zip(paths, checkpoints, strict=True):
        for side, name in (("src", "source"), ("tgt", "target")):
            ours, theirs = _vocabulary(checkpoint, side), _vocabulary(first, side)
            if ours is not None and theirs is not None and ours != theirs:
                raise CheckpointError(
                    f"cannot average {path} with {paths[0]}: their {name} vocabularies differ ({ours[:19]} and "
                    f"{theirs[:19]}): the same ids stand for other words; average checkpoints of one run"
                )
        if checkpoint["sarnmt"]["net_config"] != config:
            raise CheckpointError(f"cannot average {path} with {paths[0]}: their model configs differ")
        state = checkpoint["state_dict"]
        if set(state) != set(first["state_dict"]):
            raise CheckpointError(f"cannot average {path} with {paths[0]}: their parameter names differ")
        for name, value in state.items():
            if value.shape != first["state_dict"][name].shape:
                raise CheckpointError(
                    f"cannot average {path}: {name} has shape {tuple(value.shape)}, "
                    f"not {tuple(first['state_dict'][name].shape)}"
                )
            if value.is_floating_point():
                sums[name] = sums.get(name, torch.zeros_like(value, dtype=torch.float64)) + value.double()
    newest = max(checkpoints, key=lambda c: c.get("global_step", 0))
    averaged = {key: value for key, value in newest.items() if key not in DROPPED}
    averaged["state_dict"] = {
        name: (sums[name] / len(paths)).to(value.dtype) if name in sums else value
        for name, value in newest["state_dict"].items()
    }
    averaged["sarnmt"] = {**newest["sarnmt"], "averaged_from": [str(p) for p in paths]}
    write_checkpoint(averaged, output)  # complete or not at all: a failed write leaves the old file
    return averaged


def _vocabulary(checkpoint: dict[str, Any], side: str) -> str | None:
    """The SHA-256 of a checkpoint's ``side`` codec (None when it stores no codecs)."""
    codecs = checkpoint["sarnmt"].get("codecs")
    return sha256(codecs.get(side)) if isinstance(codecs, dict) else None


def check_output(output: Path) -> None:
    """:raises InputError: when ``output`` is a checkpoint holding a training state (``last.ckpt``, a selected
    checkpoint): a run resumes from it, and an average (weights only) written over it would end that."""
    if not output.is_file():
        return
    try:
        existing = torch.load(output, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # not a checkpoint (or not one this could read): written over as before
        return
    if isinstance(existing, dict) and any(key in existing for key in TRAINING_STATE):
        raise InputError(
            f"output={output} is a checkpoint a run resumes from (it holds the optimizer and loop state); an average "
            "holds weights only and would end that run's resumption: write it to another file"
        )


def last_checkpoints(
    directory: str | Path, count: int, exclude: Path | None = None, trust: Sequence[str] = ()
) -> list[Path]:
    """The ``count`` checkpoints of ``directory`` with the highest ``global_step`` (``last.ckpt`` excluded)."""
    if count < 1:
        raise InputError(f"last={count}: give the number of checkpoints to average, 1 or more")
    directory = Path(directory)
    if directory.is_file():
        raise InputError(f"dir={directory} is a file; give the folder that holds the checkpoints")
    if not directory.is_dir():
        raise FileNotFoundError(f"checkpoint directory {directory} does not exist")
    found = [
        p
        for p in sorted(directory.glob("*.ckpt"))
        if p.name != "last.ckpt" and (exclude is None or os.path.realpath(p) != os.path.realpath(exclude))
    ]
    if len(found) < count:
        raise InputError(
            f"asked for the last {count} checkpoints but {directory} has {len(found)}: {[p.name for p in found]}"
        )
    steps = {p: read_checkpoint(p, trust=trust).get("global_step", 0) for p in found}
    return sorted(found, key=lambda p: (steps[p], p.stat().st_mtime))[-count:]
