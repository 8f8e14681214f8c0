"""The mini English corpus of the language models (Table 6 at scale mini), built from the shared data folder and
prepared as a corpus folder (:mod:`sarnmt.lm.corpus`).

**Mini corpus** (:func:`prepare_mini`): the English sides under ``root``, Moses-tokenised (sacremoses, ``escape=False``,
no aggressive dash splitting, no punctuation normalisation) and lowercased, PTB style (numbers are kept, not
replaced by ``N``). Valid = the English of newstest2010, test = the English of newstest2011 (contiguous news
articles, file order); train = :data:`MINI_TRAIN` in that order, lines in file order, one continuous stream. Left
out of train (read only to keep their lines out of it): every set the translation configs evaluate on
(:data:`MINI_EVAL_SETS`: newstest2012-2016 and 2019, the Multi30K val/test sets, the three Tatoeba test sets,
FLORES-101); ``released-outputs/`` is not read at all. A train line (compared after tokenisation and
lowercasing) is removed, and counted per source, when it is empty, when it occurs in valid/test
(``in_valid_test``), when it occurs in a translation evaluation set (``in_eval_sets``), or when it already occurred
earlier in train (``duplicate``: the WMT news sets of 2008-2009 are in both ``es-en/`` and ``en-de/``, byte for
byte, so their second copies go entirely). ``*.en.gz`` files under ``root`` in none of these lists are reported as
``unused_files`` (with a warning). The wmt-sample is already Moses-tokenised with ``&apos;``-style escapes: it is
unescaped and detokenised before tokenising. With the default ``vocab_max_size=10000`` (PTB-like), from
``../shared/data`` (about 15 s to build)::

    split  lines   tokens     words      unk_oov  oov_rate
    train  69,899  1,182,903  1,113,004  46,979   3.97%
    val     2,489     64,394     61,905   5,766   8.95%
    test    3,003     77,756     74,753   7,357   9.46%

    vocabulary 10,000 of 38,704 training types (28,706 types, 46,979 training tokens, below the cut)
    train: 69,899 of 76,583 lines kept; removed: duplicate 5,575 (5,075 of them the es-en copies of the 2008-2009
    news sets), in_eval_sets 1,108 (1,097 of them Anki sentences that are in the es-en/en-de Tatoeba test sets),
    in_valid_test 0, empty 1 (wmt-sample line 5)
"""

from __future__ import annotations

import html
import logging
import os
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from sacremoses import MosesDetokenizer, MosesTokenizer

from sarnmt.data.text.reading import read_lines
from sarnmt.lm.corpus import (
    SPLITS,
    build_prepared,
    cache_key,
    file_stamp,
    prepared_report,
)
from sarnmt.lm.vocab import LMCorpusError, VocabSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Source:
    """An English file under the data root; ``form``: ``raw`` text, or ``moses``: already Moses-tokenised with
    ``&apos;``-style escapes (unescaped and detokenised first)."""

    path: str
    form: str = "raw"


MINI_VALID = (Source("en-de/newstest2010.en.gz"),)
MINI_TEST = (Source("en-de/newstest2011.en.gz"),)
MINI_TRAIN = (
    *(
        Source(f"{pair}/{name}.en.gz")
        for pair in ("en-de", "es-en")
        for name in ("news-test2008", "newssyscomb2009", "newstest2009")
    ),  # es-en: the same files (duplicates)
    Source("en-zh/newstest2017.en.gz"),
    Source("en-zh/newstest2018.en.gz"),
    Source("es-en/europarl-sample-train.en.gz"),
    Source("es-en/europarl-sample-dev.en.gz"),  # training data in every translation config, as is -test
    Source("es-en/europarl-sample-test.en.gz"),
    Source("en-de/wmt-sample-opennmt.tok.en.gz", "moses"),
    Source("multi30k-en-de/train.en.gz"),
    Source("en-zh/anki-tatoeba-cmn.en.gz"),
)
# the es-en copies of valid and test (byte-identical to the en-de ones): their lines are kept out of train too
MINI_HELD_OUT_COPIES = (Source("es-en/newstest2010.en.gz"), Source("es-en/newstest2011.en.gz"))
# every set a translation config (sarnmt/conf/data/*.yaml, sarnmt/data/corpora.py) validates or tests on, or the
# paper does
MINI_EVAL_SETS = tuple(
    Source(p)
    for p in (
        "es-en/newstest2012.en.gz",
        "es-en/newstest2013.en.gz",
        "es-en/tatoeba-test-v2021-08-07.en.gz",
        *(f"en-de/newstest{year}.en.gz" for year in range(2012, 2017)),
        "en-de/tatoeba-test-v2021-08-07.en.gz",
        "en-zh/newstest2019.en.gz",
        "en-zh/flores101-devtest.en.gz",
        "en-zh/tatoeba-test-v2021-08-07.en.gz",
        "multi30k-en-de/val.en.gz",
        "multi30k-en-de/test_2016_flickr.en.gz",
        "multi30k-en-de/test_2017_flickr.en.gz",
        "multi30k-en-de/test_2018_flickr.en.gz",
        "multi30k-en-de/test_2017_mscoco.en.gz",
    )
)
MINI_SKIPPED_FOLDERS = ("released-outputs",)  # the paper's tokenised test sets and outputs: never read
MINI_SOURCES = (*MINI_VALID, *MINI_TEST, *MINI_TRAIN, *MINI_HELD_OUT_COPIES, *MINI_EVAL_SETS)
REMOVALS = ("empty", "in_valid_test", "in_eval_sets", "duplicate")


class _Tokenizer:
    """Moses (sacremoses, English, ``escape=False``) then lowercase; for ``moses``-form sources the escapes are
    undone and the text detokenised first."""

    def __init__(self) -> None:
        self._tok, self._detok = MosesTokenizer("en"), MosesDetokenizer("en")

    def __call__(self, line: str, form: str) -> str:
        if form == "moses":
            line = self._detok.detokenize(html.unescape(line).split())
        return self._tok.tokenize(line, escape=False, return_str=True).lower()


def _read_source(root: Path, source: Source, tokenize: _Tokenizer) -> list[str]:
    return [tokenize(line, source.form) for line in read_lines(root / source.path)]


def _check_mini_root(root: Path) -> list[str]:
    """:returns: the ``*.en.gz`` files under ``root`` that no list names.  :raises LMCorpusError: on missing files."""
    missing = [s.path for s in MINI_SOURCES if not (root / s.path).is_file()]
    if missing:
        raise LMCorpusError(
            f"mini LM corpus: {len(missing)} file(s) missing under root {root}: "
            f"{', '.join(missing)} (data.root must be the shared data folder)"
        )
    named = {s.path for s in MINI_SOURCES}
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.glob("*/*.en.gz")
        if p.parent.name not in MINI_SKIPPED_FOLDERS and p.relative_to(root).as_posix() not in named
    )


def _removal(line: str, held_out: set[str], eval_lines: set[str], seen: set[str]) -> str | None:
    """Why a training line is removed (the first of :data:`REMOVALS` that applies), or None when it is kept."""
    checks = (not line, line in held_out, line in eval_lines, line in seen)
    return next((reason for reason, hit in zip(REMOVALS, checks, strict=True) if hit), None)


def _filter_train(root: Path, tokenize: _Tokenizer, held_out: set[str], eval_lines: set[str]) -> tuple[list[str], list]:
    """The training lines of :data:`MINI_TRAIN` in order, and per source its counts."""
    kept, seen, per_source = [], set(), []
    for source in MINI_TRAIN:
        lines = _read_source(root, source, tokenize)
        counts = dict.fromkeys(("lines", "kept", *REMOVALS), 0)
        counts["lines"] = len(lines)
        for line in lines:
            reason = _removal(line, held_out, eval_lines, seen) or "kept"
            counts[reason] += 1
            if reason == "kept":
                kept.append(line)
                seen.add(line)
        per_source.append({"path": source.path, **counts})
    return kept, per_source


def build_mini_text(root: Path, folder: Path) -> dict[str, Any]:
    """Write the mini corpus's ``train.txt``, ``valid.txt`` and ``test.txt`` into ``folder``.

    :returns: its composition (for the report): the sources of each split, per-source counts, the removals."""
    unused = _check_mini_root(root)
    if unused:
        log.warning(
            "mini LM corpus: %d English file(s) under %s are in none of its lists and not used: %s",
            len(unused),
            root,
            ", ".join(unused),
        )
    tokenize = _Tokenizer()
    valid = [line for s in MINI_VALID for line in _read_source(root, s, tokenize)]
    test = [line for s in MINI_TEST for line in _read_source(root, s, tokenize)]
    held_out = set(valid) | set(test) | {line for s in MINI_HELD_OUT_COPIES for line in _read_source(root, s, tokenize)}
    eval_lines = {line for s in MINI_EVAL_SETS for line in _read_source(root, s, tokenize)}
    train, per_source = _filter_train(root, tokenize, held_out - {""}, eval_lines - {""})
    for name, lines in (("train", train), ("valid", valid), ("test", test)):
        (folder / f"{name}.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    removed = {reason: sum(s[reason] for s in per_source) for reason in REMOVALS}
    log.info(
        "mini LM corpus: train keeps %d of %d lines; removed %s",
        len(train),
        sum(s["lines"] for s in per_source),
        removed,
    )
    return {
        "train_sources": per_source,
        "valid_sources": [s.path for s in MINI_VALID],
        "test_sources": [s.path for s in MINI_TEST],
        "held_out_copies": [s.path for s in MINI_HELD_OUT_COPIES],
        "eval_sets_excluded": [s.path for s in MINI_EVAL_SETS],
        "skipped_folders": list(MINI_SKIPPED_FOLDERS),
        "train_removed": removed,
        "test_lines_in_valid": len(set(test) & set(valid) - {""}),
        "unused_files": unused,
        "tokenizer": _tokenizer_spec(),
    }


def _tokenizer_spec() -> dict[str, Any]:
    return {
        "sacremoses": version("sacremoses"),
        "lang": "en",
        "escape": False,
        "aggressive_dash_splits": False,
        "lowercase": True,
    }


def prepare_mini(
    root: str | os.PathLike[str], cache_dir: str | os.PathLike[str], settings: VocabSettings
) -> dict[str, Any]:
    """Prepare (once) the mini English corpus from ``root`` (the shared data folder) under ``cache_dir``.

    :returns: as :func:`prepare_folder`, the report with ``mini`` (the composition) too.
    """
    start, root = time.time(), Path(root).expanduser()
    _check_mini_root(root)
    spec = {
        "kind": "mini",
        "root": str(root.resolve()),
        "vocab": vars(settings),
        "tokenizer": _tokenizer_spec(),
        "sources": {s.path: [s.form, *file_stamp(root / s.path)] for s in MINI_SOURCES},
        "lists": [[s.path for s in group] for group in (MINI_VALID, MINI_TEST, MINI_TRAIN, MINI_HELD_OUT_COPIES)],
    }

    def build(tmp: Path) -> None:
        mini = build_mini_text(root, tmp)
        files = {split: tmp / name for split, name in zip(SPLITS, ("train.txt", "valid.txt", "test.txt"), strict=True)}
        build_prepared(tmp, files, settings, {"corpus": "mini", "source": str(root), "mini": mini})

    return prepared_report(Path(cache_dir).expanduser() / f"lm-mini-{cache_key(spec)}", build, start)
