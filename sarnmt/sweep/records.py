"""Job records: one JSON file per finished job, written atomically and last, read back with every defect named.

A record holds the job's keys (scale, pair, row, seed), the resolved training config and its hash, the code
(:mod:`sarnmt.sweep.code`),
|Θ|, the hardware, wall time, steps and epochs, the selected checkpoint, and per test set every score with its
sacrebleu signature and the paths of the hypotheses. The per-sentence BLEU statistics the significance tests need
sit beside it in ``<job>.sentences.json.gz`` (n-gram counts, not text), so a table can be rendered and tested
without the corpus.

:func:`config_hash` hashes what decides a job's result: the resolved config without the keys that only say where
files go or how many devices run it (:func:`hash_view`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sarnmt.sweep.code import describe
from sarnmt.utils.atomic import write_bytes

RECORD_VERSION = 1
HASHED = (
    "data",
    "model",
    "decoder",
    "optim",
    "loss",
    "seed",
    "decoding",
    "average_last",
    "trainer.max_epochs",
    "trainer.min_epochs",
    "trainer.max_steps",
    "trainer.max_time",
    "trainer.precision",
    "trainer.gradient_clip_val",
    "trainer.gradient_clip_algorithm",
    "trainer.val_check_interval",
    "trainer.check_val_every_n_epoch",
    "trainer.accumulate_grad_batches",
    "callbacks.model_checkpoint.monitor",
    "callbacks.model_checkpoint.mode",
    "callbacks.early_stopping.monitor",
    "callbacks.early_stopping.mode",
    "callbacks.early_stopping.patience",
    "callbacks.early_stopping.min_delta",
)
# keys added after records were first written, at the value that gives the behaviour from before they existed: left
# out of the hash at that value, so the records written before them stay current (any other value is hashed)
HASH_NEUTRAL = {("decoding", "min_len"): 0}
# classes that moved to another module after records were first written: new dotted path -> the path the records were
# hashed with. A moved class trains the same thing, so every ``_target_`` of the hash view is hashed under its first
# path and the records written before the move stay current; so do the run identities stored in checkpoints
# (sarnmt/training/identity.py), and checkpoints whose stored model config names a moved class are read with its new
# path (sarnmt/training/checkpoint.py). Add a row (never change one) whenever a class that a config names moves again.
MOVED_TARGETS = {
    # sarnmt.data split into text/, corpora/ and loading/ (issue 17)
    "sarnmt.data.loading.prepared_corpus.CorpusDataModule": "sarnmt.data.corpus_datamodule.CorpusDataModule",
    "sarnmt.data.loading.in_memory.ToyDataModule": "sarnmt.data.text_datamodules.ToyDataModule",
    "sarnmt.data.loading.in_memory.FilesDataModule": "sarnmt.data.text_datamodules.FilesDataModule",
    # the training side to sarnmt/training/, the language model to sarnmt/lm/ (issue 30)
    "sarnmt.training.optim.Adadelta": "sarnmt.optim.Adadelta",
    "sarnmt.lm.datamodule.LanguageModelDataModule": "sarnmt.data.loading.lm.LanguageModelDataModule",
    "sarnmt.lm.model.RecurrentLM": "sarnmt.models.lm.model.RecurrentLM",
    "sarnmt.lm.heads.PlainOutput": "sarnmt.models.lm.heads.PlainOutput",
    "sarnmt.lm.heads.ResidualOutput": "sarnmt.models.lm.heads.ResidualOutput",
    "sarnmt.lm.daniluk.AttentionOutput": "sarnmt.models.lm.daniluk.AttentionOutput",
    "sarnmt.lm.daniluk.NgramOutput": "sarnmt.models.lm.daniluk.NgramOutput",
}
# keys of `data` that say where files are or how fast they are read, not what is read
DATA_VOLATILE = ("root", "cache_dir", "workers", "num_workers", "url_base", "checksums", "eval_batch_size")
REQUIRED = ("version", "job", "scale", "pair", "row", "seed", "config_hash", "tests", "finished")


def hash_view(cfg: DictConfig) -> dict[str, Any]:
    """The resolved values of the :data:`HASHED` keys (those that decide what a job trains and how it is
    evaluated), ``data`` without :data:`DATA_VOLATILE`. Paths, loggers, devices, progress bars and checkpoint
    intervals are left out, so moving a sweep or resuming it on other hardware keeps its records current; a key at its
    :data:`HASH_NEUTRAL` value is left out and a moved class's ``_target_`` is read as its first path
    (:data:`MOVED_TARGETS`), so records written before either change keep their hash."""
    full = OmegaConf.to_container(cfg, resolve=True)
    view: dict[str, Any] = {}
    for dotted in HASHED:
        node: Any = full
        for key in dotted.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        view[dotted] = node
    if isinstance(view["data"], dict):
        view["data"] = {k: v for k, v in view["data"].items() if k not in DATA_VOLATILE}
    for (group, key), neutral in HASH_NEUTRAL.items():
        if isinstance(view.get(group), dict) and key in view[group] and view[group][key] == neutral:
            view[group] = {k: v for k, v in view[group].items() if k != key}
    return _first_targets(view)


def _first_targets(node: Any) -> Any:
    """``node`` with every ``_target_`` that names a moved class (:data:`MOVED_TARGETS`) set to its first path."""
    if isinstance(node, dict):
        return {
            k: MOVED_TARGETS.get(v, v) if k == "_target_" and isinstance(v, str) else _first_targets(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_first_targets(v) for v in node]
    return node


def config_hash(cfg: DictConfig, tests: dict[str, str]) -> str:
    """16 hex digits of the SHA-256 of the hash view and the job's test sets."""
    payload = json.dumps({"config": hash_view(cfg), "tests": tests}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, flush it to disk, rename it over ``path``
    (:func:`sarnmt.utils.atomic.write_bytes`)."""
    write_bytes(path, data)


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, (json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8"))


def gzip_bytes(data: bytes) -> bytes:
    """Deterministic gzip (no time stamp, no file name): the same text gives the same file."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as handle:
        handle.write(data)
    return buffer.getvalue()


def write_lines_gz(path: Path, lines: list[str]) -> None:
    write_atomic(path, gzip_bytes("".join(line + "\n" for line in lines).encode("utf-8")))


def read_lines_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as handle:
        return [line.rstrip("\n") for line in handle]


@dataclass
class RecordStatus:
    """What a record file says about its job: ``state`` is ``missing``, ``broken`` (truncated or unparsable),
    ``stale`` (another config hash), ``other_code`` (this config, run by other code: another source hash, or none)
    or ``complete``; ``reason`` says why in words."""

    state: str
    path: Path
    record: dict[str, Any] | None = None
    reason: str = ""


def read_record(path: Path, expected_hash: str | None = None, source: str | None = None) -> RecordStatus:
    """Read a record and judge it against ``expected_hash`` (None: any hash is current) and the ``source`` hash of
    the code that would run it now (:func:`sarnmt.sweep.code.source_hash`; None: any code is current)."""
    if path.is_dir():
        return RecordStatus("broken", path, reason=f"record {path} is a folder, not a file")
    if not path.is_file():
        return RecordStatus("missing", path, reason=f"no record {path}")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return RecordStatus("broken", path, reason=f"record {path} is truncated or unparsable ({err})")
    if not isinstance(record, dict) or any(key not in record for key in REQUIRED):
        missing = [k for k in REQUIRED if not isinstance(record, dict) or k not in record]
        return RecordStatus("broken", path, reason=f"record {path} lacks {missing}")
    tests = record["tests"]
    if not isinstance(tests, dict) or not all(isinstance(t, dict) for t in tests.values()):
        return RecordStatus("broken", path, reason=f"record {path}: 'tests' is not a mapping of test sets")
    if not isinstance(record.get("parameters"), int | None):
        return RecordStatus("broken", path, reason=f"record {path}: 'parameters' is not a number")
    wrong = [key for key in ("wall_seconds", "hardware") if not isinstance(record.get(key, {}), dict)]
    if wrong:
        return RecordStatus("broken", path, reason=f"record {path}: {wrong} are not mappings")
    sentences = path.with_name(path.name.removesuffix(".json") + ".sentences.json.gz")
    if not sentences.is_file():
        return RecordStatus("broken", path, record, f"record {path}: its sentence statistics {sentences} are missing")
    if expected_hash is not None and record["config_hash"] != expected_hash:
        return RecordStatus(
            "stale",
            path,
            record,
            f"record {path} has config hash {record['config_hash']}, the sweep's config gives {expected_hash}",
        )
    if source is not None and record.get("source_hash") != source:
        ran = describe(record) if record.get("source_hash") else "code from before records pinned it (unpinned)"
        return RecordStatus("other_code", path, record, f"record {path} ran on {ran}; this checkout is source {source}")
    return RecordStatus("complete", path, record)


def read_sentence_stats(record_path: Path) -> dict[str, dict[str, list[list[int]]]]:
    """``{test: {metric: per-sentence BLEU statistics}}`` of a record (see :mod:`sarnmt.sweep.stats`)."""
    path = record_path.with_name(record_path.name.removesuffix(".json") + ".sentences.json.gz")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, EOFError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: truncated or unparsable ({err})") from err


def hardware() -> dict[str, Any]:
    """CPU model and count, the GPU if one is used, torch's version."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "gpu": gpu,
        "gpu_count": torch.cuda.device_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
