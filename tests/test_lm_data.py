"""Word-level LM data: reading corpus folders (errors named), the vocabulary and <unk> counts, the cached preparation
(reuse, damage, concurrent preparers), stream batching (every token once in evaluation, consecutive training
columns, mid-epoch resume), the Hydra configs, and the mini corpus from ../shared/data."""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from lightning.fabric.utilities.apply_func import move_data_to_device

from sarnmt.errors import InputError
from sarnmt.lm import corpus as lm_text
from sarnmt.lm import mini as lm_mini
from sarnmt.lm.corpus import load_prepared, prepare_folder
from sarnmt.lm.datamodule import LanguageModelDataModule
from sarnmt.lm.segments import LMBatch, Segments, eval_columns, training_columns
from sarnmt.lm.vocab import LMCorpusError, VocabSettings
from tests.conftest import CONF_DIR, SHARED_DATA

TRAIN = "the cat sat on the mat\n\nthe dog sat\n<unk> ran\n"
VALID = "the cat ran far\n\nzebra <unk>\n"
TEST = "a dog sat on the cat\n"


def _corpus(
    folder: Path,
    train: str = TRAIN,
    valid: str = VALID,
    test: str = TEST,
    names: tuple[str, str, str] = ("train.txt", "valid.txt", "test.txt"),
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in zip(names, (train, valid, test), strict=True):
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _module(tmp_path: Path, folder: Path, **overrides) -> LanguageModelDataModule:
    keys = dict(
        corpus="folder", path=str(folder), cache_dir=str(tmp_path / "cache"), batch_size=2, bptt=3, eval_batch_size=3
    )
    dm = LanguageModelDataModule(**{**keys, **overrides})
    dm.prepare_data()
    dm.setup("fit")
    return dm


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
    with pytest.raises(InputError, match="data.path is required with data.corpus=folder"):
        LanguageModelDataModule(corpus="folder", cache_dir="c", batch_size=1, bptt=1, eval_batch_size=1)
    with pytest.raises(InputError, match=r"^data.corpus='wiki' is not a choice: use one of folder, mini"):
        LanguageModelDataModule(corpus="wiki", cache_dir="c", batch_size=1, bptt=1, eval_batch_size=1)
    mini = {"corpus": "mini", "root": "r", "cache_dir": "c", "batch_size": 1, "bptt": 1, "eval_batch_size": 1}
    for key, value, says in (
        ("bptt", 0, "data.bptt=0: must be 1 or more"),
        ("batch_size", 2.5, "data.batch_size=2.5: must be a whole number, 1 or more"),
        ("num_workers", -1, "data.num_workers=-1: must be 0 or more"),
        (
            "vocab_max_size",
            1,
            "data.vocab_max_size=1: must be 2 or more (it counts <eos> and <unk>; null for no limit)",
        ),
        ("vocab_min_count", 0, "data.vocab_min_count=0: must be 1 or more"),
    ):
        with pytest.raises(InputError, match=f"^{re.escape(says)}$"):
            LanguageModelDataModule(**{**mini, key: value})


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
    assert report["vocab"] == {
        "size": 9,
        "train_types": 7,
        "dropped_types": 0,
        "dropped_tokens": 0,
        "max_size": None,
        "min_count": None,
    }


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
    threads = [
        threading.Thread(target=lambda: reports.append(prepare_folder(folder, tmp_path / "cache", VocabSettings())))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and sorted(r["cached"] for r in reports) == [False, True, True]
    assert len({r["cache"] for r in reports}) == 1
    assert load_prepared(reports[0]["cache"]).streams["test"].size == 7
    assert not list((tmp_path / "cache").glob(".tmp-*"))


# --- batching -------------------------------------------------------------------------------------------------------
def _rows(segments) -> tuple[list[list[int]], list[list[int]]]:
    """Every row's inputs and mask-True targets, over the segments in order."""
    inputs: list[list[int]] = []
    targets: list[list[int]] = []
    for batch in segments:
        if not inputs:
            inputs, targets = [[] for _ in range(len(batch.inputs))], [[] for _ in range(len(batch.inputs))]
        for r in range(len(batch.inputs)):
            inputs[r] += batch.inputs[r].tolist()
            targets[r] += batch.targets[r][batch.mask[r]].tolist()
    return inputs, targets


@pytest.mark.parametrize(("n", "rows", "bptt"), [(23, 4, 3), (24, 4, 6), (5, 7, 2), (1, 1, 1), (100, 10, 35)])
def test_evaluation_predicts_every_token_exactly_once(n, rows, bptt):
    stream = np.arange(2, n + 2, dtype=np.int32)
    segments = Segments(*eval_columns(stream, rows), bptt)
    batches = [segments[k] for k in range(len(segments))]
    assert sum(b.num_targets for b in batches) == n
    inputs, targets = _rows(batches)
    assert [t for row in targets for t in row] == stream.tolist()
    for b in batches:  # the input after a target is that target
        assert torch.equal(b.inputs[:, 1:][b.mask[:, 1:]], b.targets[:, :-1][b.mask[:, 1:]])
    assert batches[0].inputs[0, 0] == 0 and [b.first for b in batches] == [True] + [False] * (len(batches) - 1)
    assert all(
        b.inputs.shape[1] <= bptt and b.inputs.dtype == torch.long and b.mask.dtype == torch.bool for b in batches
    )


def test_training_columns_are_contiguous_and_consecutive_across_segments():
    stream = np.arange(2, 2 + 50, dtype=np.int32)  # 50 tokens, B = 4: columns of 12, 2 tokens left out
    inputs, targets, dropped = training_columns(stream, 4)
    assert inputs.shape == (4, 12) and dropped == 2
    segments = Segments(inputs, targets, None, 5)
    batches = [segments[k] for k in range(len(segments))]
    assert [b.inputs.shape[1] for b in batches] == [5, 5, 2] and all(b.mask.all() for b in batches)
    rows_in, rows_tgt = _rows(batches)
    x = [0, *stream.tolist()]
    for b in range(4):
        assert rows_in[b] == x[b * 12 : b * 12 + 12] and rows_tgt[b] == x[b * 12 + 1 : b * 12 + 13]
    assert [t for row in rows_tgt for t in row] == stream[:48].tolist()  # every kept token a target once
    for prev, nxt in zip(batches, batches[1:], strict=False):
        assert torch.equal(nxt.inputs[:, 0], prev.targets[:, -1])


def test_datamodule_loaders_vocab_report_and_device_transfer(tmp_path):
    dm = _module(tmp_path, _corpus(tmp_path / "c"))
    assert dm.vocab_size == 9 and dm.vocab[:2] == ["<eos>", "<unk>"] and dm.has_split("val")
    assert not dm.has_split("valid") and dm.report["splits"]["val"]["unk_oov"] == 2
    train = list(dm.train_dataloader())
    assert all(isinstance(b, LMBatch) for b in train) and [b.index for b in train] == [0, 1, 2]
    assert [tuple(b.inputs.shape) for b in train] == [(2, 3), (2, 3), (2, 1)]  # 14 tokens: 2 columns of 7
    for split in ("val", "test"):
        _, targets = _rows(dm.eval_dataloader(split))
        assert [t for row in targets for t in row] == dm.stream(split).tolist()
    moved = move_data_to_device(train[0], torch.device("cpu"))
    assert isinstance(moved, LMBatch) and torch.equal(moved.targets, train[0].targets) and moved.first


def test_resumed_loader_yields_exactly_the_remaining_segments(tmp_path):
    folder = _corpus(tmp_path / "c", train=" ".join(f"w{i % 13}" for i in range(200)) + "\n")
    dm = _module(tmp_path, folder, batch_size=3, bptt=4)
    full = list(dm.train_dataloader())
    assert len(full) == 17  # 201 tokens, 3 columns of 67, segments of 4
    dm.trainer = SimpleNamespace(
        current_epoch=0,
        world_size=1,
        global_rank=0,
        fit_loop=SimpleNamespace(
            epoch_loop=SimpleNamespace(batch_progress=SimpleNamespace(current=SimpleNamespace(processed=5)))
        ),
    )
    state = dm.state_dict()
    assert state == {"epoch": 0, "batches_done": 5}
    dm.load_state_dict(state)
    loader = dm.train_dataloader()
    resumed = list(loader)
    assert len(loader) == 17 and [b.index for b in resumed] == list(range(5, 17))
    assert all(
        torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
        for a, b in zip(full[5:], resumed, strict=True)
    )
    assert len(list(dm.train_dataloader())) == 17  # the skip is for the resumed epoch's loader only
    dm.load_state_dict({"epoch": 0, "batches_done": 17})  # a checkpoint of the epoch's end, and Lightning
    assert list(dm.train_dataloader()) == []  # finishes that epoch again: nothing is left in it
    dm.load_state_dict({"epoch": 0, "batches_done": 17})
    loader = dm.train_dataloader()
    dm.trainer.current_epoch = 1  # or it goes on with the next epoch: nothing is skipped there
    loader.sampler.set_epoch(1)
    assert len(list(loader)) == 17


class _Recorder(L.LightningModule):
    """Records (epoch, segment index) of every training batch; saves a checkpoint after update ``save_at``."""

    def __init__(self, path: Path | None = None, save_at: int = -1) -> None:
        super().__init__()
        self.emb, self.seen, self.path, self.save_at = torch.nn.Embedding(20, 1), [], path, save_at

    def training_step(self, batch: LMBatch, batch_idx: int) -> torch.Tensor:
        self.seen.append((self.current_epoch, batch.index))
        return self.emb(batch.inputs).mean()

    def validation_step(self, batch: LMBatch, batch_idx: int) -> None:
        """Nothing (the runs below validate on no batch)."""

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.global_step == self.save_at:
            self.trainer.save_checkpoint(self.path)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


# Lightning warns that the dataloader is not resumable: the DataModule's state_dict does the resuming
@pytest.mark.filterwarnings("ignore:You're resuming from a checkpoint that ended before the epoch ended")
def test_lightning_resumes_mid_epoch_at_the_next_segment(tmp_path):
    folder = _corpus(tmp_path / "c", train=" ".join(f"w{i % 13}" for i in range(200)) + "\n")
    keys = dict(
        corpus="folder", path=str(folder), cache_dir=str(tmp_path / "cache"), batch_size=3, bptt=10, eval_batch_size=2
    )
    trainer = dict(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        use_distributed_sampler=False,
        limit_val_batches=0,
        max_steps=12,
        default_root_dir=tmp_path,
    )
    whole = _Recorder(tmp_path / "mid.ckpt", save_at=10)  # 7 segments an epoch: saved after 3 of epoch 1
    L.Trainer(**trainer).fit(whole, datamodule=LanguageModelDataModule(**keys))
    assert whole.seen == [(0, k) for k in range(7)] + [(1, k) for k in range(5)]
    resumed = _Recorder()
    L.Trainer(**trainer).fit(resumed, datamodule=LanguageModelDataModule(**keys), ckpt_path=tmp_path / "mid.ckpt")
    assert resumed.seen == [(1, 3), (1, 4)]


def test_ddp_ranks_take_their_share_of_the_columns(tmp_path):
    folder = _corpus(tmp_path / "c", train=" ".join(f"w{i}" for i in range(39)) + "\n")  # 40 tokens
    dm = _module(tmp_path, folder, batch_size=4, bptt=10)
    single = next(iter(dm.train_dataloader()))
    shares = []
    for rank in (0, 1):
        dm.trainer = SimpleNamespace(current_epoch=0, world_size=2, global_rank=rank)
        shares.append(next(iter(dm.train_dataloader())))
    assert torch.equal(torch.cat([s.inputs for s in shares]), single.inputs)
    dm.trainer = SimpleNamespace(current_epoch=0, world_size=3, global_rank=0)
    with pytest.raises(InputError, match="data.batch_size=4 must be divisible by the 3 DDP ranks"):
        dm.train_dataloader()


# --- configs --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["folder", "mini"])
def test_configs_compose_at_data_and_instantiate(option, tmp_path):
    folder = _corpus(tmp_path / "c")
    overrides = [f"+lm_data={option}", "+paths=default", f"data.cache_dir={tmp_path / 'cache'}"]
    overrides += [f"data.path={folder}"] if option == "folder" else []
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(overrides=overrides)
    assert "lm_data" not in cfg and cfg.data.cache_dir == str(tmp_path / "cache")
    dm = instantiate(cfg.data)
    assert isinstance(dm, LanguageModelDataModule) and dm.corpus == option and (dm.bptt, dm.eval_batch_size) == (35, 10)


# --- the mini corpus from ../shared/data ----------------------------------------------------------------------------
@pytest.mark.slow  # 15-25 s on a busy 2-core machine: it tokenises 145k lines twice
@pytest.mark.skipif(not (SHARED_DATA / "en-de" / "newstest2010.en.gz").exists(), reason="needs ../shared/data")
def test_mini_corpus_leaves_out_every_evaluation_set(tmp_path):
    report = lm_mini.prepare_mini(SHARED_DATA, tmp_path / "cache", VocabSettings(max_size=10000))
    mini, cache = report["mini"], Path(report["cache"])
    train_paths = {s["path"] for s in mini["train_sources"]}
    assert not train_paths & {s.path for s in (*lm_mini.MINI_EVAL_SETS, *lm_mini.MINI_HELD_OUT_COPIES)}
    assert not train_paths & {*mini["valid_sources"], *mini["test_sources"]}
    assert all(f"newstest{y}" not in p for p in train_paths for y in (2010, 2011, 2012, 2013, 2014, 2015, 2016, 2019))
    assert not any(word in p for p in train_paths for word in ("tatoeba-test", "flores", "val.", "test_", "released"))
    assert mini["unused_files"] == [] and report["vocab"]["size"] == 10000
    train = set(lm_mini.read_lines(cache / "train.txt"))
    tokenize = lm_mini._Tokenizer()
    for source in (*lm_mini.MINI_VALID, *lm_mini.MINI_TEST, *lm_mini.MINI_EVAL_SETS):
        lines = {tokenize(line, "raw") for line in lm_mini.read_lines(SHARED_DATA / source.path)}
        assert not train & lines, source.path
    assert len(train) == report["splits"]["train"]["lines"]  # deduplicated
    for split in ("val", "test"):
        counts = report["splits"][split]
        assert counts["tokens"] > 50000 and 0 < counts["oov_rate"] < 0.15
    assert load_prepared(cache).streams["train"].size == report["splits"]["train"]["tokens"]
