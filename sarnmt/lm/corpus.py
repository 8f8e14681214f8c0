"""Corpora for word-level language models: a corpus folder (WikiText, PTB), the mini English corpus
(:mod:`sarnmt.lm.mini`) or the toy corpus, turned into token-id streams and cached.

**Folder layout.** A folder holds three already-tokenised UTF-8 text files, one per split; the accepted names are, per
split (exactly one of them must be present): ``train``: ``wiki.train.tokens``, ``ptb.train.txt``, ``train.txt``;
``val``: ``wiki.valid.tokens``, ``ptb.valid.txt``, ``valid.txt``; ``test``: ``wiki.test.tokens``, ``ptb.test.txt``,
``test.txt`` (:data:`FILE_NAMES`). Lines are split on ``\\n`` only
(:func:`sarnmt.data.text.reading.read_lines`), words on
whitespace (``str.split()``); every non-empty line ends with ``<eos>``; empty lines (WikiText has blank lines) are
skipped and counted. Errors, one line each (:class:`LMCorpusError`, an :class:`~sarnmt.errors.InputError`): a missing
split names the folder, the split and the file names looked for; an empty split names its file; bytes that are not
UTF-8 name the file and the line (:mod:`sarnmt.data.text.reading`).

**Vocabulary and streams**: :mod:`sarnmt.lm.vocab` (built from the training split only).

**Mini corpus**: :mod:`sarnmt.lm.mini` builds an English corpus from ``../shared/data`` and
prepares it here. **Toy corpus** (:func:`prepare_toy`): the toy translation corpus's target side.

Cache: ``<cache_dir>/lm-<name>-<key>/`` (``name``: ``mini``, or the folder's name), ``key`` a hash of the settings
and of the input files' paths, sizes and modification times. It holds ``{train,val,test}.npy`` (the streams),
``vocab.txt`` (one word per line, id order), ``report.json``, for the mini corpus ``{train,valid,test}.txt`` (its
tokenised text), and ``manifest.json`` (settings, per-split counts, size and SHA-256 of every file), built once
under a lock and checked whenever used (:func:`sarnmt.data.corpora.prepared_cache.build_once`): a damaged cache is built
again, a half-written one is never seen.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sarnmt.data.corpora import manifest as manifest_file
from sarnmt.data.corpora.prepared_cache import build_once
from sarnmt.data.corpora.toy import generate_toy_corpus
from sarnmt.data.text.reading import read_lines
from sarnmt.lm.vocab import LMCorpusError, VocabSettings, build_vocab, encode_lines, word_counts
from sarnmt.utils.atomic import write_text
from sarnmt.utils.json_bounds import load_file

log = logging.getLogger(__name__)

CACHE_VERSION = 1
SPLITS = ("train", "val", "test")
FILE_NAMES: dict[str, tuple[str, ...]] = {
    "train": ("wiki.train.tokens", "ptb.train.txt", "train.txt"),
    "val": ("wiki.valid.tokens", "ptb.valid.txt", "valid.txt"),
    "test": ("wiki.test.tokens", "ptb.test.txt", "test.txt"),
}


# --- reading a folder -----------------------------------------------------------------------------------------------
def find_split_files(folder: str | os.PathLike[str]) -> dict[str, Path]:
    """``{split: file}`` of a corpus folder (:data:`FILE_NAMES`).

    :raises LMCorpusError: when the folder is missing, or a split has none (or more than one) of its file names.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise LMCorpusError(f"{folder}: no such folder (a language-model corpus folder is expected)")
    found = {}
    for split, names in FILE_NAMES.items():
        present = [folder / name for name in names if (folder / name).is_file()]
        if not present:
            raise LMCorpusError(f"{folder}: no {split} split; looked for {', '.join(names)}")
        if len(present) > 1:
            raise LMCorpusError(
                f"{folder}: {len(present)} files for the {split} split ({', '.join(p.name for p in present)}); keep one"
            )
        found[split] = present[0]
    return found


# --- the prepared folder --------------------------------------------------------------------------------------------
@dataclass
class PreparedCorpus:
    """A loaded cache: ``vocab`` (words in id order), ``streams`` (``{split: int32 array (N,)}``), ``report``."""

    folder: Path
    vocab: list[str]
    streams: dict[str, np.ndarray]
    report: dict[str, Any]


def _save_array(path: Path, array_: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.save(handle, array_, allow_pickle=False)


def build_prepared(folder: Path, files: dict[str, Path], settings: VocabSettings, info: dict[str, Any]) -> None:
    """Read the three split files, build the vocabulary on train, and write the streams, ``vocab.txt``,
    ``report.json`` and (last) ``manifest.json`` into ``folder``. ``info`` is merged into the report."""
    texts = {split: read_lines(files[split]) for split in SPLITS}  # every split read (and checked) first
    vocab, vocab_stats = build_vocab(word_counts(texts["train"]), settings)
    index = {w: i for i, w in enumerate(vocab)}
    splits = {}
    for split in SPLITS:
        stream, counts = encode_lines(texts[split], index)
        if not len(stream):
            raise LMCorpusError(
                f"{files[split]}: the {split} split is empty (no words on any of its {counts['lines']} lines)"
            )
        _save_array(folder / f"{split}.npy", stream)
        inside = files[split].parent == folder  # the mini corpus's text, written into the cache itself
        splits[split] = {"file": files[split].name if inside else str(files[split]), **counts}
    (folder / "vocab.txt").write_text("".join(w + "\n" for w in vocab), encoding="utf-8")
    vocab_stats.update(max_size=settings.max_size, min_count=settings.min_count)
    report = {**info, "vocab": vocab_stats, "splits": splits}
    write_text(folder / "report.json", json.dumps(report, indent=1))
    manifest_file.write(folder, {"kind": "lm", "version": CACHE_VERSION, "splits": splits, "vocab": vocab_stats})


def load_prepared(folder: str | os.PathLike[str]) -> PreparedCorpus:
    """A prepared cache, every file checked against the manifest.

    :raises InputError: naming each damaged file."""
    folder = Path(folder)
    manifest_file.check(folder, manifest_file.read(folder))
    vocab = read_lines(folder / "vocab.txt")
    streams = {split: np.load(folder / f"{split}.npy", allow_pickle=False) for split in SPLITS}
    report = load_file(folder / "report.json")
    return PreparedCorpus(folder, vocab, streams, report)


def file_stamp(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


def cache_key(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps({"version": CACHE_VERSION, **spec}, sort_keys=True).encode()).hexdigest()[:16]


def prepared_report(final: Path, build: Any, start: float) -> dict[str, Any]:
    cached = build_once(final, build)
    report = load_file(final / "report.json")
    return {**report, "cache": str(final), "cached": cached, "seconds": round(time.time() - start, 1)}


def prepare_folder(
    path: str | os.PathLike[str], cache_dir: str | os.PathLike[str], settings: VocabSettings
) -> dict[str, Any]:
    """Prepare (once) the corpus folder ``path`` under ``cache_dir``.

    :returns: its report (``corpus``, ``source``, ``vocab``, ``splits``) plus ``cache`` (the prepared folder),
        ``cached`` (True when nothing was built) and ``seconds``.
    """
    start, folder = time.time(), Path(path).expanduser()
    files = find_split_files(folder)
    key = cache_key(
        {
            "kind": "folder",
            "folder": str(folder.resolve()),
            "vocab": vars(settings),
            "files": {s: [p.name, *file_stamp(p)] for s, p in files.items()},
        }
    )
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", folder.resolve().name) or "corpus"
    info = {"corpus": "folder", "source": str(folder)}
    return prepared_report(
        Path(cache_dir).expanduser() / f"lm-{slug}-{key}", lambda tmp: build_prepared(tmp, files, settings, info), start
    )


# --- the toy corpus -------------------------------------------------------------------------------------------------
def prepare_toy(
    cache_dir: str | os.PathLike[str], settings: VocabSettings, seed: int, sizes: Sequence[int]
) -> dict[str, Any]:
    """Prepare (once) a language-model corpus of the toy translation corpus's target side
    (:mod:`sarnmt.data.corpora.toy`):
    seconds to build, no files needed (the smoke scale of Table 6 and the tests).

    :param sizes: lines of train, valid and test.  :returns: as :func:`prepare_folder`.
    """
    start = time.time()
    assert len(sizes) == 3 and all(n >= 1 for n in sizes), sizes  # checked where they enter (lm/datamodule.py)
    spec = {"kind": "toy", "seed": seed, "sizes": [int(n) for n in sizes], "vocab": vars(settings)}

    def build(tmp: Path) -> None:
        corpus = generate_toy_corpus(seed, *[int(n) for n in sizes])
        files = {}
        for split, part, name in zip(
            SPLITS, ("train", "dev", "test"), ("train.txt", "valid.txt", "test.txt"), strict=True
        ):
            files[split] = tmp / name
            files[split].write_text("".join(line + "\n" for line in corpus[part][1]), encoding="utf-8")
        build_prepared(tmp, files, settings, {"corpus": "toy", "source": f"sarnmt.data.corpora.toy, seed {seed}"})

    return prepared_report(Path(cache_dir).expanduser() / f"lm-toy-{cache_key(spec)}", build, start)


# --- the report -----------------------------------------------------------------------------------------------------
def format_report(report: dict[str, Any]) -> str:
    """The report of :func:`prepare_folder` / :func:`prepare_mini` as a few lines of text (for logs)."""
    vocab = report["vocab"]
    lines = [
        f"LM corpus {report['corpus']} from {report['source']} (cache {report.get('cache', '?')}"
        f"{', reused' if report.get('cached') else ''}): vocabulary {vocab['size']} words (max_size "
        f"{vocab['max_size']}, min_count {vocab['min_count']}; {vocab['dropped_types']} of "
        f"{vocab['train_types']} training types, {vocab['dropped_tokens']} training tokens, left out)"
    ]
    for split, c in report["splits"].items():
        lines.append(
            f"  {split}: {c['tokens']} tokens ({c['words']} words + <eos>) from {c['lines']} lines of "
            f"{c['file']} ({c['empty_lines']} empty, skipped); {c['unk_oov']} out-of-vocabulary words "
            f"as <unk> ({c['oov_rate']:.2%}), {c['unk_literal']} literal <unk>"
        )
    mini = report.get("mini")
    if mini:
        lines.append(
            f"  mini train: removed {mini['train_removed']} lines; valid {mini['valid_sources']}, test "
            f"{mini['test_sources']}; unused files: {mini['unused_files'] or 'none'}"
        )
    return "\n".join(lines)
