"""Word-level LM data: reading corpus folders (errors named), the vocabulary and <unk> counts, the cached preparation
(reuse, damage, concurrent preparers), and the mini corpus from ../shared/data."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from sarnmt.data import lm_text
from sarnmt.data.lm_text import LMCorpusError, VocabSettings, load_prepared, prepare_folder
from sarnmt.errors import InputError
from tests.conftest import SHARED_DATA

TRAIN = "the cat sat on the mat\n\nthe dog sat\n<unk> ran\n"
VALID = "the cat ran far\n\nzebra <unk>\n"
TEST = "a dog sat on the cat\n"


def _corpus(folder: Path, train: str = TRAIN, valid: str = VALID, test: str = TEST,
            names: tuple[str, str, str] = ("train.txt", "valid.txt", "test.txt")) -> Path:  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in zip(names, (train, valid, test), strict=True):
        (folder / name).write_text(text, encoding="utf-8")
    return folder


# --- reading folders: the errors ------------------------------------------------------------------------------------
def test_missing_split_names_the_folder_the_split_and_the_names_looked_for(tmp_path):
    folder = _corpus(tmp_path / "c")
    (folder / "test.txt").unlink()
    with pytest.raises(LMCorpusError) as err:
        prepare_folder(folder, tmp_path / "cache", VocabSettings())
    assert str(err.value) == f"{folder}: no test split; looked for wiki.test.tokens, ptb.test.txt, test.txt"
    assert isinstance(err.value, InputError)


def test_two_files_for_one_split_are_refused(tmp_path):
    folder = _corpus(tmp_path / "c")
    (folder / "ptb.valid.txt").write_text("x\n", encoding="utf-8")
    with pytest.raises(LMCorpusError, match=r"2 files for the val split \(ptb.valid.txt, valid.txt\)"):
        prepare_folder(folder, tmp_path / "cache", VocabSettings())


def test_empty_split_names_its_file(tmp_path):
    folder = _corpus(tmp_path / "c", valid="\n  \n\n")
    with pytest.raises(LMCorpusError, match=rf"^{folder / 'valid.txt'}: the val split is empty .*3 lines"):
        prepare_folder(folder, tmp_path / "cache", VocabSettings())
    assert not list((tmp_path / "cache").glob("lm-*")) and not list((tmp_path / "cache").glob(".tmp-*"))


def test_text_that_is_not_utf8_names_the_file_and_line(tmp_path):
    folder = _corpus(tmp_path / "c")
    (folder / "test.txt").write_bytes(b"a dog\nsat \xff on\n")
    with pytest.raises(InputError, match=rf"^{folder / 'test.txt'}:2: invalid UTF-8"):
        prepare_folder(folder, tmp_path / "cache", VocabSettings())


def test_missing_folder_and_bad_settings_are_named(tmp_path):
    with pytest.raises(LMCorpusError, match="no such folder"):
        prepare_folder(tmp_path / "nowhere", tmp_path / "cache", VocabSettings())
    with pytest.raises(LMCorpusError, match="vocab_max_size must be >= 2"):
        VocabSettings(max_size=1)
    with pytest.raises(LMCorpusError, match="vocab_min_count must be >= 1"):
        VocabSettings(min_count=0)


# --- vocabulary, streams, counts ------------------------------------------------------------------------------------
def test_wikitext_names_blank_lines_and_the_streams(tmp_path):
    folder = _corpus(tmp_path / "wikitext", names=("wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"))
    report = prepare_folder(folder, tmp_path / "cache", VocabSettings())
    corpus = load_prepared(report["cache"])
    # train counts: the 3, sat 2, then first appearance: cat on mat dog ran; literal <unk> is id 1
    assert corpus.vocab == ["<eos>", "<unk>", "the", "sat", "cat", "on", "mat", "dog", "ran"]
    ids = {w: i for i, w in enumerate(corpus.vocab)}
    want = [ids[w] for w in "the cat sat on the mat <eos> the dog sat <eos> <unk> ran <eos>".split()]
    assert corpus.streams["train"].tolist() == want and corpus.streams["train"].dtype == np.int32
    train, val = report["splits"]["train"], report["splits"]["val"]
    assert (train["lines"], train["empty_lines"], train["words"], train["tokens"]) == (4, 1, 11, 14)
    assert (train["unk_oov"], train["unk_literal"]) == (0, 1)
    # val: "far" and "zebra" are out of the vocabulary; one literal <unk>
    assert corpus.streams["val"].tolist() == [2, 4, 8, 1, 0, 1, 1, 0]
    assert (val["empty_lines"], val["tokens"], val["unk_oov"], val["unk_literal"]) == (1, 8, 2, 1)
    assert val["oov_rate"] == pytest.approx(2 / 8)
    assert report["splits"]["test"]["unk_oov"] == 1  # "a"
    assert report["vocab"] == {"size": 9, "train_types": 7, "dropped_types": 0, "dropped_tokens": 0,
                               "max_size": None, "min_count": None}  # fmt: skip


def test_vocabulary_cut_is_deterministic_and_counts_what_it_leaves_out(tmp_path):
    folder = _corpus(tmp_path / "c", train="d b a b a c d\n", valid="a c\n", test="e\n")
    cut = prepare_folder(folder, tmp_path / "cache", VocabSettings(max_size=4))
    assert load_prepared(cut["cache"]).vocab == ["<eos>", "<unk>", "d", "b"]  # d, b, a all twice: first appearance
    assert (cut["vocab"]["dropped_types"], cut["vocab"]["dropped_tokens"]) == (2, 3)
    assert (cut["splits"]["train"]["unk_oov"], cut["splits"]["val"]["unk_oov"]) == (3, 2)
    by_count = prepare_folder(folder, tmp_path / "cache", VocabSettings(min_count=2))
    assert by_count["cache"] != cut["cache"]
    assert load_prepared(by_count["cache"]).vocab == ["<eos>", "<unk>", "d", "b", "a"]
    again = prepare_folder(folder, tmp_path / "other-cache", VocabSettings(max_size=4))
    assert (Path(again["cache"]) / "vocab.txt").read_bytes() == (Path(cut["cache"]) / "vocab.txt").read_bytes()
    assert Path(again["cache"]).name == Path(cut["cache"]).name  # the key depends on the settings and inputs only


# --- the cache ------------------------------------------------------------------------------------------------------
def _counting_build(monkeypatch, delay: float = 0.0) -> list[int]:
    calls: list[int] = []
    real = lm_text.build_prepared

    def build(*args, **kwargs):
        calls.append(1)
        time.sleep(delay)
        return real(*args, **kwargs)

    monkeypatch.setattr(lm_text, "build_prepared", build)
    return calls


def test_second_preparation_reuses_the_cache(tmp_path, monkeypatch):
    folder = _corpus(tmp_path / "c")
    calls = _counting_build(monkeypatch)
    first = prepare_folder(folder, tmp_path / "cache", VocabSettings())
    second = prepare_folder(folder, tmp_path / "cache", VocabSettings())
    assert (first["cached"], second["cached"], len(calls)) == (False, True, 1)
    assert first["cache"] == second["cache"] and Path(first["cache"]).name.startswith("lm-c-")
    (folder / "test.txt").write_text(TEST + "one more line\n", encoding="utf-8")  # an input changed: a new cache
    third = prepare_folder(folder, tmp_path / "cache", VocabSettings())
    assert third["cache"] != first["cache"] and len(calls) == 2


def test_damaged_cache_is_detected_and_rebuilt(tmp_path, monkeypatch, caplog):
    folder = _corpus(tmp_path / "c")
    calls = _counting_build(monkeypatch)
    cache = Path(prepare_folder(folder, tmp_path / "cache", VocabSettings())["cache"])
    data = bytearray((cache / "val.npy").read_bytes())
    data[-1] ^= 0xFF
    (cache / "val.npy").write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"is damaged: val.npy has another SHA-256"):
        load_prepared(cache)
    with caplog.at_level(logging.WARNING):
        report = prepare_folder(folder, tmp_path / "cache", VocabSettings())
    assert not report["cached"] and len(calls) == 2 and "val.npy has another SHA-256" in caplog.text
    assert load_prepared(cache).streams["val"].tolist() == [2, 4, 8, 1, 0, 1, 1, 0]
    (cache / "manifest.json").unlink()  # a folder without its manifest (as if half-written) is never used
    assert not prepare_folder(folder, tmp_path / "cache", VocabSettings())["cached"] and len(calls) == 3


def test_concurrent_preparers_wait_for_one_build(tmp_path, monkeypatch):
    folder = _corpus(tmp_path / "c")
    calls = _counting_build(monkeypatch, delay=0.3)  # long enough for the other thread to reach the lock
    reports: list[dict] = []
    threads = [threading.Thread(target=lambda: reports.append(prepare_folder(folder, tmp_path / "cache",
                                                                             VocabSettings())))
               for _ in range(3)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and sorted(r["cached"] for r in reports) == [False, True, True]
    assert len({r["cache"] for r in reports}) == 1
    assert load_prepared(reports[0]["cache"]).streams["test"].size == 7
    assert not list((tmp_path / "cache").glob(".tmp-*"))


# --- the mini corpus from ../shared/data ----------------------------------------------------------------------------
@pytest.mark.slow  # 15-25 s on a busy 2-core machine: it tokenises 145k lines twice
@pytest.mark.skipif(not (SHARED_DATA / "en-de" / "newstest2010.en.gz").exists(), reason="needs ../shared/data")
def test_mini_corpus_leaves_out_every_evaluation_set(tmp_path):
    report = lm_text.prepare_mini(SHARED_DATA, tmp_path / "cache", VocabSettings(max_size=10000))
    mini, cache = report["mini"], Path(report["cache"])
    train_paths = {s["path"] for s in mini["train_sources"]}
    assert not train_paths & {s.path for s in (*lm_text.MINI_EVAL_SETS, *lm_text.MINI_HELD_OUT_COPIES)}
    assert not train_paths & {*mini["valid_sources"], *mini["test_sources"]}
    assert all(f"newstest{y}" not in p for p in train_paths for y in (2010, 2011, 2012, 2013, 2014, 2015, 2016, 2019))
    assert not any(word in p for p in train_paths for word in ("tatoeba-test", "flores", "val.", "test_", "released"))
    assert mini["unused_files"] == [] and report["vocab"]["size"] == 10000
    train = set(lm_text.read_lines(cache / "train.txt"))
    tokenize = lm_text._Tokenizer()
    for source in (*lm_text.MINI_VALID, *lm_text.MINI_TEST, *lm_text.MINI_EVAL_SETS):
        lines = {tokenize(line, "raw") for line in lm_text.read_lines(SHARED_DATA / source.path)}
        assert not train & lines, source.path
    assert len(train) == report["splits"]["train"]["lines"]  # deduplicated
    for split in ("val", "test"):
        counts = report["splits"][split]
        assert counts["tokens"] > 50000 and 0 < counts["oov_rate"] < 0.15
    assert load_prepared(cache).streams["train"].size == report["splits"]["train"]["tokens"]
