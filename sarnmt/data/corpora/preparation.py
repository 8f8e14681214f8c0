"""Fetch, preprocess and cache a corpus once: :func:`prepare_corpus` (``python -m sarnmt prepare`` and
``CorpusDataModule.prepare_data`` both call it).

Steps: make sure every file of the corpus is under ``root`` (files already there are used as they are; missing ones are
downloaded and extracted, :mod:`sarnmt.data.corpora.fetch`), read every split (line counts checked against the corpus
description), learn the pipeline (truecasers, BPE) on the training split, tokenise and encode every split, and write the
cache folder ``<cache_dir>/<corpus>-<key>/``:

- ``pipeline.json``: the learned :class:`~sarnmt.data.text.pipeline.Pipeline` state;
- ``<split>.{src,tgt}.raw`` / ``.tok``: raw and tokenised lines (UTF-8, one per line);
- ``<split>.ids.npz``: BPE ids of both sides (``src``/``tgt`` flat int32 arrays, ``src_off``/``tgt_off`` offsets);
- ``manifest.json``: the settings, per-split counts and origins, and the size and SHA-256 of every other file
  (written last; :mod:`sarnmt.data.corpora.manifest`), checked whenever the cache is used: a damaged cache is built
  again by ``prepare``, and refused by name when loaded.

``key`` hashes every setting that changes the data (corpus description, pipeline settings, vocabulary size, the
sizes of the input files). The folder is written under a temporary name and renamed, so a half-written cache is
never used; when it exists, nothing is redone. The training length filter (``max_len``) is not applied here: the
cache holds every pair, and the DataModule filters (:mod:`sarnmt.data.loading.translation`) and reports its counts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

import sarnmt.data.corpora.manifest as manifest_file
from sarnmt.data.corpora.catalog import Corpus, Download
from sarnmt.data.corpora.fetch import FetchError, download, extract
from sarnmt.data.corpora.prepared_cache import build_once, locked
from sarnmt.data.text.pipeline import Pipeline
from sarnmt.data.text.processor import SideSettings
from sarnmt.data.text.reading import read_lines
from sarnmt.data.text.sgml import read_pair
from sarnmt.errors import InputError

log = logging.getLogger(__name__)
CACHE_VERSION = 1
SIDES = ("src", "tgt")


def _paths(corpus: Corpus) -> list[str]:
    return [p for parts in corpus.splits.values() for part in parts for p in (part.src, part.tgt)]


def ensure_files(
    corpus: Corpus, root: Path, url_base: str | None = None, checksums: dict[str, str] | None = None
) -> list[str]:
    """Download and extract what is missing under ``root``. :returns: names of the files downloaded."""
    folders = [str(root / p) for p in _paths(corpus) if (root / p).is_dir()]
    if folders:
        raise InputError(f"{corpus.name}: {', '.join(folders)} is a folder, but a corpus file is expected there")
    fetched = []
    for dl in corpus.downloads:
        missing = [p for p in _paths(corpus) if p.split("/", 1)[0] == dl.folder and not (root / p).is_file()]
        if not missing:
            continue
        if dl.manual:
            raise FetchError(f"{corpus.name}: missing {', '.join(str(root / p) for p in missing)}. {dl.manual}")
        checksum = (checksums or {}).get(dl.folder, dl.checksum)
        archive = root / "downloads" / dl.name
        if download(_url(dl, url_base), archive, checksum):
            fetched.append(dl.name)
        if dl.extract:
            log.info("extracting %s into %s", archive, root / dl.folder)
            extract(archive, root / dl.folder)
        else:
            (root / dl.folder).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(archive, root / dl.folder / dl.name)
        still = [p for p in missing if not (root / p).is_file()]
        if still:
            raise FetchError(f"{archive} does not hold the expected files {still}; delete it and run again")
    absent = [str(root / p) for p in _paths(corpus) if not (root / p).is_file()]
    if absent:
        raise FileNotFoundError(f"{corpus.name}: missing corpus files {absent} (data.root={root})")
    return fetched


def _url(dl: Download, url_base: str | None) -> str:
    return dl.url if not url_base else url_base.rstrip("/") + "/" + urlparse(dl.url).path.lstrip("/")


def cache_key(corpus: Corpus, root: Path, src: SideSettings, tgt: SideSettings, vocab_size: int, joint: bool) -> str:
    spec = {
        "version": CACHE_VERSION,
        "corpus": {s: [asdict(p) for p in ps] for s, ps in corpus.splits.items()},
        "sizes": {p: (root / p).stat().st_size for p in _paths(corpus)},
        "src": asdict(src),
        "tgt": asdict(tgt),
        "vocab_size": vocab_size,
        "joint": joint,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def read_split(corpus: Corpus, root: Path, split: str) -> tuple[list[str], list[str], str]:
    """Both sides of a split (its parts concatenated) and a description of its files; counts checked."""
    src, tgt, origins = [], [], []
    for part in corpus.splits[split]:
        a, b = read_pair(root / part.src, root / part.tgt)
        if part.lines is not None and len(a) != part.lines:
            raise InputError(f"{root / part.src} / {root / part.tgt}: {len(a)} pairs, expected {part.lines}")
        src += part.select(a)
        tgt += part.select(b)
        origins.append(
            f"{part.src} / {part.tgt}" + (f" (lines i % {part.rows[0]} in {list(part.rows[1])})" if part.rows else "")
        )
    return src, tgt, f"{root}: " + "; ".join(origins)


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _save_ids(path: Path, ids: dict[str, list[list[int]]]) -> None:
    arrays = {}
    for side, seqs in ids.items():
        arrays[side] = np.fromiter((i for s in seqs for i in s), dtype=np.int32)
        arrays[f"{side}_off"] = np.cumsum([0] + [len(s) for s in seqs], dtype=np.int64)
    np.savez(path, **arrays)


class RaggedIds(Sequence[list[int]]):
    """Id sequences stored as one flat int32 array and offsets; item ``k`` is a ``list[int]`` made on access
    (far less memory than a list of lists for millions of sentences)."""

    def __init__(self, flat: np.ndarray, offsets: np.ndarray, index: np.ndarray | None = None) -> None:
        self.flat, self.offsets = flat, offsets
        self.index = np.arange(len(offsets) - 1) if index is None else index

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, k: int) -> list[int]:  # type: ignore[override]
        j = self.index[k]
        return self.flat[self.offsets[j] : self.offsets[j + 1]].tolist()

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)[self.index]

    def subset(self, index: Sequence[int]) -> RaggedIds:
        return RaggedIds(self.flat, self.offsets, self.index[np.asarray(index, dtype=np.int64)])


def load_ids(path: Path) -> dict[str, RaggedIds]:
    with np.load(path) as z:
        return {side: RaggedIds(z[side], z[f"{side}_off"]) for side in SIDES}


def prepare_corpus(
    corpus: Corpus,
    *,
    root: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str],
    src: SideSettings,
    tgt: SideSettings,
    vocab_size: int,
    joint_vocab: bool,
    url_base: str | None = None,
    checksums: dict[str, str] | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Fetch, preprocess and cache ``corpus`` unless its cache exists. :returns: a report (JSON-able) with
    ``cache`` (the folder), ``cached`` (True when nothing was redone), ``downloaded``, per-split ``splits`` counts
    and ``vocab`` sizes."""
    start = time.time()
    root, cache_dir = Path(root).expanduser(), Path(cache_dir).expanduser()
    cache_dir.mkdir(parents=True, exist_ok=True)
    with locked(cache_dir / f".{corpus.name}.lock"):  # one download at a time (e.g. DDP ranks); others wait
        downloaded = ensure_files(corpus, root, url_base, checksums)
    final = cache_dir / f"{corpus.name}-{cache_key(corpus, root, src, tgt, vocab_size, joint_vocab)}"
    cached = build_once(
        final, lambda tmp: _build(corpus, _read_splits(corpus, root), tmp, src, tgt, vocab_size, joint_vocab, workers)
    )
    manifest = manifest_file.read(final)
    return {
        "corpus": corpus.name,
        "cache": str(final),
        "cached": cached,
        "downloaded": downloaded,
        "splits": manifest["splits"],
        "vocab": manifest["vocab"],
        "seconds": round(time.time() - start, 1),
    }


def _read_splits(corpus: Corpus, root: Path) -> dict[str, tuple[list[str], list[str], str]]:
    """Every split of ``corpus`` (source lines, target lines, origin), read and checked."""
    splits = {name: read_split(corpus, root, name) for name in corpus.splits}
    empty = [f"{name} ({origin})" for name, (src_lines, _, origin) in splits.items() if not src_lines]
    if empty:
        raise InputError(f"corpus {corpus.name}: no lines in split {', '.join(empty)}; check the files")
    for required in ("train", "val"):
        if required not in splits:
            raise ValueError(f"corpus {corpus.name}: no {required!r} split")
    return splits


def _build(
    corpus: Corpus,
    splits: dict[str, tuple[list[str], list[str], str]],
    tmp: Path,
    src: SideSettings,
    tgt: SideSettings,
    vocab_size: int,
    joint_vocab: bool,
    workers: int,
) -> None:
    """Fill the empty folder ``tmp`` with the prepared corpus, the manifest last (:func:`build_once` renames it)."""
    pipeline = Pipeline(src, tgt, vocab_size, joint_vocab)
    log.info("%s: learning the pipeline on %d training pairs", corpus.name, len(splits["train"][0]))
    train_tok = pipeline.fit(splits["train"][0], splits["train"][1], workers=workers)
    pipeline.save(tmp / "pipeline.json")
    manifest: dict[str, Any] = {
        "corpus": corpus.name,
        "splits": {},
        "settings": {"src": asdict(src), "tgt": asdict(tgt), "vocab_size": vocab_size, "joint_vocab": joint_vocab},
    }
    for name, (src_raw, tgt_raw, origin) in splits.items():
        tok, ids = {}, {}
        for side, raw in zip(SIDES, (src_raw, tgt_raw), strict=True):
            lang = pipeline.codec(side).processor.settings.lang
            tok[side] = (
                train_tok[side]
                if name == "train"
                else pipeline.tokenize_lines(side, raw, workers, desc=f"tokenize {name}.{lang}")
            )
            ids[side] = pipeline.codec(side).encode_tokenized(tok[side])
            _write_lines(tmp / f"{name}.{side}.raw", raw)
            _write_lines(tmp / f"{name}.{side}.tok", tok[side])
        _save_ids(tmp / f"{name}.ids.npz", ids)
        manifest["splits"][name] = {"pairs": len(src_raw), "origin": origin}
    manifest["vocab"] = {side: pipeline.codec(side).vocab_size for side in SIDES}
    manifest_file.write(tmp, manifest)  # last, with the size and SHA-256 of every file


def load_cache(folder: str | os.PathLike[str]) -> tuple[Pipeline, dict[str, dict[str, Any]]]:
    """The pipeline and ``{split: {"raw": (src, tgt), "tok": (src, tgt), "ids": (src, tgt), "origin": str}}``.

    :raises InputError: when a file does not match the manifest's size and SHA-256, naming it."""
    folder = Path(folder)
    manifest = manifest_file.read(folder)
    manifest_file.check(folder, manifest)
    pipeline = Pipeline.load(folder / "pipeline.json")
    splits = {}
    for name, info in manifest["splits"].items():
        ids = load_ids(folder / f"{name}.ids.npz")
        splits[name] = {
            "raw": tuple(read_lines(folder / f"{name}.{side}.raw") for side in SIDES),
            "tok": tuple(read_lines(folder / f"{name}.{side}.tok") for side in SIDES),
            "ids": (ids["src"], ids["tgt"]),
            "origin": info["origin"],
        }
    return pipeline, splits
