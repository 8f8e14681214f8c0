"""A run is one run: what fixes the meaning of a training run's checkpoints is stored in them, and a run resumed from
one with any of it different is refused before it trains.

The **identity** of a run (``checkpoint["sarnmt"]["identity"]``, written by the modules' ``on_save_checkpoint``)::

    {"version": 1,
     "config": {"data.seed": 1234, "model.hidden_dim": 256, "decoder._target_": "...", "optim.lr": ..., ...},
     "data": {"vocabulary.src": "sha256:...", "vocabulary.tgt": "sha256:...", "corpus": "sha256:..."}}

- ``config``: the resolved settings that decide what a run trains, one dotted key per value: the keys the table
  sweeps hash (:data:`sarnmt.utils.hash_view.HASHED`, read through :func:`~sarnmt.utils.hash_view.hash_view`: the
  model, decoder, data, optimiser, loss, seed, clipping, validation schedule and selection rule), less the
  :data:`MAY_CHANGE_ON_RESUME` and the data settings that only say where the files are or how fast they are read
  (:data:`~sarnmt.utils.hash_view.DATA_VOLATILE`; the paths of text files, :data:`DATA_PATHS`, whose content is hashed
  instead).
- ``data``: the SHA-256 of each vocabulary (the codec's whole state: word list, BPE codes, truecaser; one
  ``vocabulary`` for a language model) and of the text the run trains and selects on (``corpus``: the training and
  dev lines, or a language model's training and valid streams).

``python -m sarnmt.train ckpt_path=...`` (and ``sarnmt.lm``) compares the checkpoint's identity with its own: the
config before any data is read, the vocabularies and corpus once they are, and refuses with one line naming every
differing key and both values (:class:`RunMismatch`). Checkpoints written before identities were stored resume with
a warning; their model, decoder and vocabularies (which every sarnmt checkpoint holds) are still compared.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from sarnmt.checkpoints.reading import CheckpointError, read_checkpoint
from sarnmt.checkpoints.stored_config import run_trust
from sarnmt.checkpoints.writing import TRAINING_STATE, sha256
from sarnmt.utils.hash_view import flatten, hash_view

log = logging.getLogger("sarnmt")
IDENTITY_VERSION = 1
# What a resumed run may change: when it stops (epochs, steps, time, patience), the final test's search and averaging
# (after training), and the precision that comes with moving to other hardware. Every setting outside HASHED may
# change too: paths, loggers, devices, accelerator, strategy and nodes, progress bars, log and checkpoint intervals,
# preemption signals, kernels (the same equations), val_bleu, test.
MAY_CHANGE_ON_RESUME = (
    "trainer.max_epochs",
    "trainer.min_epochs",
    "trainer.max_steps",
    "trainer.max_time",
    "trainer.precision",
    "callbacks.early_stopping.patience",
    "callbacks.early_stopping.min_delta",
    "decoding",
    "average_last",
)
# data settings naming text files or folders: where the text is, not what it is (its content is hashed instead)
DATA_PATHS = ("train_src", "train_tgt", "dev_src", "dev_tgt", "test_src", "test_tgt", "path")


class RunMismatch(CheckpointError):
    """A run resumed from a checkpoint of another run (another config, vocabulary or corpus); the message names every
    differing key with both values."""


def _resumable(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in MAY_CHANGE_ON_RESUME)


def config_identity(cfg: DictConfig) -> dict[str, Any]:
    """The dotted settings of ``cfg`` that fix a run's meaning (see the module docstring)."""
    flat = flatten(hash_view(cfg))
    return {
        key: value
        for key, value in sorted(flat.items())
        if not _resumable(key) and not (key.startswith("data.") and key[5:] in DATA_PATHS)
    }


def _lines_hash(sides: Iterable[list[str]]) -> str:
    digest = hashlib.sha256()
    for lines in sides:
        digest.update(f"{len(lines)}\n".encode())
        for start in range(0, len(lines), 65536):  # a few large updates: millions of lines in seconds
            digest.update(("\n".join(lines[start : start + 65536]) + "\n").encode("utf-8", "surrogatepass"))
    return "sha256:" + digest.hexdigest()


def data_identity(datamodule: Any) -> dict[str, str]:
    """The hashes of the vocabularies and of the text a set-up DataModule trains and selects on."""
    if hasattr(datamodule, "codec_state"):  # translation: source and target codecs, training and dev pairs
        state = datamodule.codec_state()
        splits = ("train", "val")
        return {
            "vocabulary.src": sha256(state["src"]),
            "vocabulary.tgt": sha256(state["tgt"]),
            "corpus": _lines_hash(
                side for split in splits for side in (datamodule.sources(split), datamodule.references(split))
            ),
        }
    digest = hashlib.sha256()  # a language model: one vocabulary, the training and valid streams
    for split in ("train", "val"):
        stream = datamodule.stream(split)
        digest.update(f"{split} {stream.dtype} {len(stream)}\n".encode())
        digest.update(stream.tobytes())
    return {"vocabulary": sha256(list(datamodule.vocab)), "corpus": "sha256:" + digest.hexdigest()}


def run_identity(cfg: DictConfig, datamodule: Any) -> dict[str, Any]:
    """What a checkpoint of this run stores (``checkpoint["sarnmt"]["identity"]``)."""
    return {"version": IDENTITY_VERSION, "config": config_identity(cfg), "data": data_identity(datamodule)}


_ABSENT = object()


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "absent"
    if isinstance(value, str) and value.startswith("sha256:"):
        return value[:19]  # sha256: and 12 hex digits
    return json.dumps(value, ensure_ascii=False)


def differences(stored: dict[str, Any], now: dict[str, Any], only_stored: bool = False) -> list[str]:
    """``"key: X in the checkpoint, Y now"`` for every key whose values differ (a key missing on one side is
    ``absent``); ``only_stored``: compare only the keys the checkpoint has."""
    keys = sorted(stored) if only_stored else sorted(set(stored) | set(now))
    return [
        f"{key}: {_show(stored.get(key, _ABSENT))} in the checkpoint, {_show(now.get(key, _ABSENT))} now"
        for key in keys
        if stored.get(key, _ABSENT) != now.get(key, _ABSENT)
    ]


@dataclass
class ResumePoint:
    """The checkpoint a run resumes from, read and checked before any data is: ``info`` is its ``"sarnmt"`` entry."""

    path: str
    info: dict[str, Any]

    @property
    def identity(self) -> dict[str, Any] | None:
        identity = self.info.get("identity")
        return identity if isinstance(identity, dict) else None

    def refuse(self, found: list[str]) -> None:
        if found:
            allowed = ", ".join(MAY_CHANGE_ON_RESUME)
            raise RunMismatch(
                f"checkpoint {self.path} belongs to another run: {'; '.join(found)}. Resume it with its own settings, "
                f"or start a new run in another folder (what may change on resume: {allowed}, and paths, loggers, "
                "devices, progress bars)"
            )

    def check_data(self, identity: dict[str, Any], net_config: dict[str, Any]) -> None:
        """Compare the vocabularies and corpus (and, for a checkpoint without an identity, the model's stored config
        and vocabularies) with this run's. :raises RunMismatch: naming every difference."""
        stored = self.identity
        if stored is not None:
            self.refuse(differences(stored.get("data", {}), identity["data"]))
            return
        log.warning(
            "checkpoint %s was written before sarnmt stored a run's identity in its checkpoints: only its model, "
            "decoder and vocabularies are compared with this run's; a changed seed, corpus or optimiser cannot be "
            "detected",
            self.path,
        )
        found = differences(flatten(self.info["net_config"]), flatten(net_config), only_stored=True)
        codecs = self.info.get("codecs")
        if isinstance(codecs, dict) and "vocabulary.src" in identity["data"]:
            vocab = {"vocabulary.src": sha256(codecs.get("src")), "vocabulary.tgt": sha256(codecs.get("tgt"))}
            found += differences(vocab, {k: identity["data"][k] for k in vocab})
        elif isinstance(self.info.get("vocab"), list) and "vocabulary" in identity["data"]:
            found += differences(
                {"vocabulary": sha256(self.info["vocab"])}, {"vocabulary": identity["data"]["vocabulary"]}
            )
        self.refuse(found)


def resume_point(path: str | Path, cfg: DictConfig, task: str = "translation") -> ResumePoint:
    """Read the checkpoint a run is asked to resume from and compare its config with ``cfg``'s, before any data is
    read.

    :raises CheckpointError: when it cannot be read, holds the other task's model (:func:`read_checkpoint`) or no
        training state (an averaged checkpoint).
    :raises RunMismatch: naming every setting of its identity that ``cfg`` gives another value.
    """
    checkpoint = read_checkpoint(path, task, mmap=True, trust=run_trust(cfg))  # entries only: Lightning reads tensors
    missing = [key for key in TRAINING_STATE if key not in checkpoint]
    if missing:
        averaged = " (an averaged checkpoint, for decoding)" if "averaged_from" in checkpoint["sarnmt"] else ""
        raise CheckpointError(
            f"checkpoint {path} holds weights only{averaged}, no {' or '.join(missing)} to resume a run from; resume "
            "from the run's checkpoints/last.ckpt, or decode with this one (translate, evaluate)"
        )
    point = ResumePoint(str(path), checkpoint["sarnmt"])
    stored = point.identity
    if stored is not None:
        point.refuse(differences(stored.get("config", {}), config_identity(cfg)))
    return point
