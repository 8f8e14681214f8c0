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

from omegaconf import DictConfig

from sarnmt.sweep.code import describe
from sarnmt.utils.atomic import write_bytes
from sarnmt.utils.hash_view import hash_view

RECORD_VERSION = 1
REQUIRED = ("version", "job", "scale", "pair", "row", "seed", "config_hash", "tests", "finished")


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
