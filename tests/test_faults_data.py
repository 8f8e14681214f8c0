"""Hostile input to ``prepare`` and ``tables``, and damaged prepared caches: corpus files that are not UTF-8, of
different lengths, empty, folders, CRLF, with control characters or a 10,000-token line; cache files changed after
they were written; job records that are not UTF-8, truncated, empty, folders or of the wrong shape. Each is handled
as documented or refused in one line naming the file."""

from __future__ import annotations

import dataclasses
import gzip
import json
import logging
from pathlib import Path

import pytest

import sarnmt.data.corpora.manifest as manifest
from sarnmt.data.corpora.catalog import CORPORA
from sarnmt.data.corpora.preparation import load_cache
from sarnmt.errors import InputError
from sarnmt.sweep.job import JobSettings, job_config
from sarnmt.sweep.plan import plan_jobs
from sarnmt.sweep.records import gzip_bytes
from sarnmt.sweep.spec import load_scale, load_table
from sarnmt.sweep.stats import METRIC_SETTINGS, sentence_statistics
from tests.cli_helpers import one_error, run_cli

pytestmark = pytest.mark.faults
EN = ["the house is new .", "they said it is fine .", "a vote , not what they said ."]
ZH = ["房子 是 新 的 。", "他们 说 没 问题 。", "投票 , 不是 他们 说 的 。"]


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    """The En-Zh corpus description (a manual download) with no expected line counts, its files under
    ``tmp_path/root/un-en-zh``; returns a writer of those files."""
    spec = CORPORA["en_zh"]
    splits = {s: tuple(dataclasses.replace(p, lines=None) for p in parts) for s, parts in spec.splits.items()}
    monkeypatch.setitem(CORPORA, "en_zh", dataclasses.replace(spec, splits=splits))
    folder = tmp_path / "root" / "un-en-zh"
    folder.mkdir(parents=True)

    def write(train_en: bytes | None = None, train_zh: bytes | None = None) -> Path:
        for split in ("train", "dev", "test"):
            (folder / f"{split}.en").write_text("\n".join(EN) + "\n")
            (folder / f"{split}.zh").write_text("\n".join(ZH) + "\n")
        if train_en is not None:
            (folder / "train.en").write_bytes(train_en)
        if train_zh is not None:
            (folder / "train.zh").write_bytes(train_zh)
        return folder

    return write


def _cache(cache_dir: Path) -> Path:
    (folder,) = [p.parent for p in cache_dir.rglob(manifest.NAME)]
    return folder


def _prepare(capsys, tmp_path: Path, cache: str = "cache"):
    return run_cli(
        capsys,
        "prepare",
        [
            "data=en_zh",
            f"data.root={tmp_path / 'root'}",
            "data.vocab_size=300",
            f"paths.cache_dir={tmp_path / cache}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
    )


@pytest.mark.parametrize(
    "en,zh,says",
    [
        pytest.param(
            None, "好\n".encode() + b"\xff\n" + "好\n".encode(), "train.zh:2: invalid UTF-8", id="non-UTF-8 bytes"
        ),
        pytest.param(
            None, "好\n好\n".encode(), "train.en has 3 lines, {f}/train.zh has 2 lines", id="different lengths"
        ),
        pytest.param(b"", b"", "no lines in split train", id="empty files"),
    ],
)
def test_prepare_refuses_bad_corpus_files_naming_them(capsys, tmp_path, corpus, en, zh, says):
    """prepare refuses non-UTF-8 bytes, files of different lengths and an empty split in one line naming the files,
    and caches nothing."""
    folder = corpus(en, zh)
    assert says.format(f=folder) in one_error(_prepare(capsys, tmp_path))
    assert not list((tmp_path / "cache").rglob(manifest.NAME))


def test_prepare_refuses_a_folder_where_a_corpus_file_belongs(capsys, tmp_path, corpus):
    """prepare refuses a folder where a corpus file is expected, instead of trying to download over it."""
    folder = corpus()
    (folder / "train.en").unlink()
    (folder / "train.en").mkdir()
    assert one_error(_prepare(capsys, tmp_path)) == (
        f"error: en_zh: {folder / 'train.en'} is a folder, but a corpus file is expected there"
    )


def test_prepare_reads_crlf_as_lf_and_keeps_odd_lines_aligned(capsys, tmp_path, corpus):
    """prepare caches CRLF files as the LF ones; control characters, empty lines and a 10,000-token line keep every
    pair aligned (the long pair and the empty one filtered and counted)."""
    folder = corpus()
    assert _prepare(capsys, tmp_path, "lf").code == 0
    corpus("\r\n".join(EN).encode() + b"\r\n", "\r\n".join(ZH).encode() + b"\r\n")
    assert _prepare(capsys, tmp_path, "crlf").code == 0
    lf, crlf = (_cache(tmp_path / c) for c in ("lf", "crlf"))
    for name in ("train.src.tok", "train.tgt.tok", "train.src.raw"):
        assert (lf / name).read_bytes() == (crlf / name).read_bytes(), name
    long = " ".join(["vote"] * 10_000)
    corpus(f"a\x00b \x1b[1mc\x0b\n\n{long}\n{EN[0]}\n".encode(), f"{ZH[0]}\n{ZH[1]}\n{ZH[2]}\n{ZH[0]}\n".encode())
    outcome = _prepare(capsys, tmp_path, "odd")
    assert outcome.code == 0, outcome.err
    assert "train: kept 2 of 4 pairs; filtered 1 with an empty side and 1 with a side of >= 50 subwords" in outcome.out
    odd = _cache(tmp_path / "odd")
    assert [len(load_cache(odd)[1]["train"][k][0]) for k in ("raw", "tok")] == [4, 4]
    assert folder.is_dir()


def test_a_damaged_cache_is_named_on_load_and_built_again_by_prepare(capsys, tmp_path, corpus, caplog):
    """A cache file changed after it was written: loading it names the file; prepare builds the cache again. A
    manifest written before the hashes gets them."""
    corpus()
    assert _prepare(capsys, tmp_path).code == 0
    folder = _cache(tmp_path / "cache")
    good = (folder / "train.tgt.tok").read_bytes()
    (folder / "train.tgt.tok").write_bytes(good[:-5])  # truncated, as by a full disk during a copy
    with pytest.raises(InputError, match=r"is damaged: train.tgt.tok has \d+ bytes, the manifest says \d+; delete"):
        load_cache(folder)
    caplog.set_level(logging.WARNING)
    outcome = _prepare(capsys, tmp_path)
    assert outcome.code == 0 and "prepared in" in outcome.out  # built again, not "cache found"
    assert any("is damaged: train.tgt.tok" in r.getMessage() for r in caplog.records)
    assert (folder / "train.tgt.tok").read_bytes() == good
    legacy = manifest.read(folder)
    (folder / manifest.NAME).write_text(json.dumps({k: v for k, v in legacy.items() if k != "files"}))
    assert "cache found" in _prepare(capsys, tmp_path).out
    assert manifest.read(folder)["files"] == legacy["files"]


# --- tables ---------------------------------------------------------------------------------------------------------
def _valid_record(job, digest: str) -> dict:
    return {
        "version": 1,
        "job": job.id,
        "scale": job.scale,
        "pair": job.pair,
        "row": job.row,
        "seed": job.seed,
        "config_hash": digest,
        "tests": {t: {} for t in job.tests},
        "finished": "now",
        "parameters": 1000,
        "wall_seconds": {"total": 1.0},
    }


def test_tables_counts_hostile_records_as_broken_and_renders_the_rest(capsys, tmp_path):
    """tables renders Table 1 from records that are not UTF-8, truncated, empty, a folder, of the wrong shape or
    with unusable sentence statistics: each is named and counted as broken, never averaged, and a good record
    still fills its cell."""
    scale, table = load_scale("smoke"), load_table(1)
    jobs = plan_jobs([table], scale)
    settings = JobSettings(runs_dir=Path("/nonexistent"), results_dir=tmp_path)
    records = tmp_path / "records"
    records.mkdir()
    digests = [job_config(job, settings)[1] for job in jobs[:8]]
    paths = [settings.record_path(job) for job in jobs[:8]]
    paths[0].write_bytes(b'{"version": 1, "job": "\xff"}')
    paths[1].write_text(json.dumps(_valid_record(jobs[1], digests[1]))[:40])
    paths[2].write_bytes(b"")
    paths[3].mkdir()
    paths[4].write_text("[1, 2, 3]")
    paths[5].write_text(json.dumps({**_valid_record(jobs[5], digests[5]), "tests": ["test"]}))
    for k in (6, 7):
        paths[k].write_text(json.dumps(_valid_record(jobs[k], digests[k])))
    sentences = [p.with_name(p.name[:-5] + ".sentences.json.gz") for p in paths]
    sentences[6].write_bytes(b"not gzip at all")
    perfect = ["a b c d e f"]
    stats = {t: {m: sentence_statistics(perfect, perfect, m) for m in METRIC_SETTINGS} for t in jobs[7].tests}
    sentences[7].write_bytes(gzip_bytes(json.dumps(stats).encode()))
    for k in (1, 5):
        sentences[k].write_bytes(gzip_bytes(json.dumps({t: {"bleu_tok": [[1, 2]]} for t in jobs[k].tests}).encode()))
    outcome = run_cli(capsys, "tables", ["table=1", "scale=smoke", f"results_dir={tmp_path}", "plot=false"])
    assert outcome.code == 0 and "Traceback" not in outcome.err, outcome.err
    not_counted = [line for line in outcome.out.splitlines() if line.startswith("- Not counted: ")]
    for k in range(7):
        assert any(str(paths[k]) in line for line in not_counted), k
    # the good record's cell, its hypothesis the reference; no source hash in the record: counted as unpinned
    assert "| 100.00 (1 of 2 seeds); 1 broken; 1 unpinned |" in outcome.out
    assert gzip.decompress(sentences[7].read_bytes())
    assert (tmp_path / "tables" / "table1.md").read_text() == outcome.out.split("written: ")[0].rstrip("\n") + "\n"


def test_tables_refuses_an_unknown_table_and_an_unwritable_results_folder(capsys, tmp_path):
    """tables refuses a table that does not exist, and a results folder that is a file, in one line each."""
    line = one_error(run_cli(capsys, "tables", ["table=9", "scale=smoke"]))
    assert line.startswith("error: unknown table '9'; valid tables: [1, 2, 3, 4, 6] (the table files in /")
    assert line.endswith("/sarnmt/sweep/specs/tables)")
    (tmp_path / "results").write_text("not a folder")
    line = one_error(
        run_cli(capsys, "tables", ["table=1", "scale=smoke", f"results_dir={tmp_path / 'results'}", "plot=false"])
    )
    assert str(tmp_path / "results") in line
