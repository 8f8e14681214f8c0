"""Job records: one JSON file per finished job, written atomically and last, read back with every defect named.

A record holds the job's keys (scale, pair, row, seed), the resolved training config and its hash, the code
(:mod:`sarnmt.sweep.code`),
|Θ|, the hardware, wall time, steps and epochs, the selected checkpoint, and per test set every score with its
sacrebleu signature and the paths of the hypotheses. The per-sentence BLEU statistics the significance tests need
sit beside it in ``<job>.sentences.json.gz`` (n-gram counts, not text), so a table can be rendered and tested
without the corpus.

:func:`config_hash` hashes what decides a job's result: the resolved config without the keys that only say where
files go or how many devices run it (:func:`hash_view`).

**A record is data from elsewhere** (results folders are passed around): it is read with bounds
(:func:`sarnmt.utils.json_bounds.load_file`: at most :data:`MAX_RECORD_BYTES`, 64 levels deep, whole numbers of at
most 20 digits; its statistics decompressed up to :data:`MAX_SENTENCE_BYTES`) and checked against a schema
(:func:`schema_problem`) before anything uses it: the keys are strings, the seed a whole number, the file name
``<pair>.<row>.s<seed>.json`` is the record's own ``job`` (a copy under another seed's name is a duplicate seed),
``parameters``, ``steps`` and ``epochs`` whole numbers >= 0 (not booleans), wall times finite and >= 0, every score
finite. A record that fails is **broken**: named and counted in its cell, never averaged, never an error that stops
the table.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sarnmt.errors import InputError
from sarnmt.sweep.code import describe
from sarnmt.sweep.formats import record_text
from sarnmt.sweep.plan import job_id
from sarnmt.utils.atomic import write_bytes
from sarnmt.utils.hash_view import flatten, hash_view
from sarnmt.utils.json_bounds import load_file

RECORD_VERSION = 1
REQUIRED = ("version", "job", "scale", "pair", "row", "seed", "config_hash", "tests", "finished")
TEXT_KEYS = ("job", "scale", "pair", "row", "config_hash", "finished")
COUNT_KEYS = ("parameters", "steps", "epochs")  # whole numbers >= 0 where present (parameters may be null)
FLAG_KEYS = ("dirty", "allow_dirty", "stopped_early")
MAPPING_KEYS = ("wall_seconds", "hardware", "selected_checkpoint", "config")  # where present
MAX_RECORD_BYTES = 16 * 2**20  # a record is about 5 KB (its resolved config included)
MAX_SENTENCE_BYTES = 16 * 2**20  # decompressed: a full-size job's statistics are about 1 MB, parsed about 10x that


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
        record = load_file(path, MAX_RECORD_BYTES)
    except InputError as err:  # its message names the file
        return RecordStatus("broken", path, reason=f"record {err}")
    except OSError as err:
        return RecordStatus("broken", path, reason=f"record {path} cannot be read ({err})")
    problem = schema_problem(record, path.name)
    if problem is not None:
        return RecordStatus("broken", path, reason=f"record {path}: {problem}")
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


def config_difference(record: dict, expected: DictConfig | None) -> str:
    """What makes a record another config than the sweep's, in words: the hashed settings that differ, each with
    both values (``trainer.precision bf16-mixed, the sweep's 32-true``; at most three, and how many more); empty
    where the record keeps no config or none of them differs."""
    if expected is None or not isinstance(record.get("config"), dict):
        return ""
    try:
        theirs = flatten(hash_view(OmegaConf.create(record["config"])))
    except Exception:  # a record is data from elsewhere: a config that does not parse says nothing
        return ""
    ours = flatten(hash_view(expected))
    keys = [k for k in sorted(set(theirs) | set(ours)) if theirs.get(k) != ours.get(k)]
    shown = [f"{k} {record_text(str(theirs.get(k, 'unset')))}, the sweep's {ours.get(k, 'unset')}" for k in keys[:3]]
    more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
    return "; it differs in " + "; ".join(shown) + more if shown else ""


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def schema_problem(record: Any, file_name: str) -> str | None:
    """What makes ``record`` (parsed from the file ``file_name``) unusable, in words; None when it is a record.

    Checked: the :data:`REQUIRED` keys; :data:`TEXT_KEYS` strings; ``version`` and ``seed`` whole numbers (not
    booleans); ``job`` is ``<pair>.<row>.s<seed>`` of its own keys and ``file_name`` is ``<job>.json``;
    :data:`COUNT_KEYS` whole numbers >= 0 where present (``parameters`` may be null); :data:`FLAG_KEYS` booleans
    (``dirty`` may be null: a record made outside a git checkout, from an installed wheel, cannot know);
    ``commit`` and ``source_hash`` strings or null; :data:`MAPPING_KEYS` (and ``config.model``) mappings where
    present; ``wall_seconds`` of finite numbers >= 0; ``tests`` a mapping of mappings whose ``scores`` map each
    metric to a finite number or null (or to ``{"score": <finite number or null>, ...}``).
    """
    if not isinstance(record, dict):
        return f"holds a {type(record).__name__}, not a record (a mapping)"
    missing = [key for key in REQUIRED if key not in record]
    if missing:
        return f"lacks {missing}"
    wrong = [key for key in TEXT_KEYS if not isinstance(record[key], str)]
    if wrong:
        return f"{wrong} are not text"
    for key in ("version", "seed"):
        if not _whole(record[key]):
            return f"its {key} {record[key]!r} is not a whole number"
    own = job_id(record["pair"], record["row"], record["seed"])
    if record["job"] != own:
        return f"its job {record['job']!r} is not its pair, row and seed ({own!r})"
    if file_name != f"{own}.json":
        return (
            f"its content is job {own!r} (pair {record['pair']!r}, row {record['row']!r}, seed {record['seed']}), "
            "not the job its file name says: a copy under another name (a duplicate seed, or another row's record)"
        )
    for key in COUNT_KEYS:
        if key not in record or (key == "parameters" and record[key] is None):
            continue
        if not _whole(record[key]) or record[key] < 0:
            return f"its {key} {record[key]!r} is not a whole number >= 0"
    wrong = [key for key in FLAG_KEYS if key in record and not isinstance(record[key], bool)]
    if wrong == ["dirty"] and record["dirty"] is None:  # made outside a git checkout (an installed wheel): unknown
        wrong = []
    if wrong:
        return f"{wrong} are not true or false" + (
            " (dirty may be null: not from a git checkout)" if "dirty" in wrong else ""
        )
    wrong = [key for key in ("commit", "source_hash") if not isinstance(record.get(key), str | None)]
    if wrong:
        return f"{wrong} are not text"
    wrong = [key for key in MAPPING_KEYS if not isinstance(record.get(key, {}), dict)]
    if "config" in record and not wrong and not isinstance(record["config"].get("model", {}), dict):
        wrong = ["config.model"]
    if wrong:
        return f"{wrong} are not mappings"
    bad = {k: v for k, v in record.get("wall_seconds", {}).items() if not (_finite(v) and v >= 0)}
    if bad:
        return f"its wall times {bad} are not finite numbers >= 0"
    tests = record["tests"]
    if not isinstance(tests, dict) or not all(isinstance(t, dict) for t in tests.values()):
        return "'tests' is not a mapping of test sets"
    for name, test in tests.items():
        scores = test.get("scores", {})
        if not isinstance(scores, dict):
            return f"the scores of test set {name!r} are not a mapping"
        for metric, score in scores.items():
            value = score.get("score") if isinstance(score, dict) else score
            if value is not None and not _finite(value):
                return f"its {metric} score on test set {name!r} is {value!r}, not a finite number"
    return None


def read_sentence_stats(record_path: Path) -> dict[str, dict[str, list[list[int]]]]:
    """``{test: {metric: per-sentence BLEU statistics}}`` of a record (see :mod:`sarnmt.sweep.stats`), read with
    the bounds of :func:`sarnmt.utils.json_bounds.load_file` (decompressed up to :data:`MAX_SENTENCE_BYTES`).

    :raises ValueError: naming the file, when it cannot be read or passes a bound.
    """
    path = record_path.with_name(record_path.name.removesuffix(".json") + ".sentences.json.gz")
    try:
        return load_file(path, MAX_SENTENCE_BYTES)
    except InputError as err:  # its message names the file
        raise ValueError(str(err)) from err
    except OSError as err:
        raise ValueError(f"{path}: cannot be read ({err})") from err


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
