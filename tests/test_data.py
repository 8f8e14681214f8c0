"""Tests of the data layer: codecs, reading, the toy corpus, the batch sampler and the DataModules."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from sarnmt.data.corpora.toy import TOY_EXAMPLE, generate_toy_corpus
from sarnmt.data.corpora.toy_reading import SRC_VOCAB_SIZE, TGT_VOCAB_SIZE, check_agreement, translate
from sarnmt.data.loading.in_memory import FilesDataModule, ToyDataModule
from sarnmt.data.loading.sampler import TokenBatchSampler
from sarnmt.data.text.codec_state import codec_from_state, codecs_from_state
from sarnmt.data.text.codecs import EOS, UNK, WordCodec
from sarnmt.data.text.reading import read_lines, read_parallel
from sarnmt.data.text.subword import RawTextBPECodec

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
MULTI30K = SHARED_DATA / "multi30k-en-de"

SENTENCES = [
    "the cat sat on the mat .",
    "a dog runs in the park , happily .",
    "Zwei Männer stehen vor einem Gebäude.",
    "naïve café owners serve crème brûlée",
    "the the the cat",
]


def weights_only_roundtrip(obj):
    """Save with torch.save and load back with weights_only=True (as a checkpoint would be)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def write(path: Path, lines: list[str]) -> str:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return str(path)


# -- codecs


def test_word_codec_vocabulary_order_specials_and_roundtrip():
    codec = WordCodec.train(["b a c a", "c a d"])
    assert codec.itos == ["</s>", "<unk>", "a", "c", "b", "d"]  # by count, then alphabetically
    assert codec.stoi["</s>"] == EOS == 0 and codec.stoi["<unk>"] == UNK == 1
    assert codec.encode("a d zzz") == [2, 5, UNK]
    assert codec.encode("a </s> b") == [2, UNK, 4]  # a literal "</s>" is not an end of sentence
    assert codec.decode(codec.encode("c  b\ta")) == "c b a"
    assert codec.tokens("c  b\ta") == ["c", "b", "a"]
    assert WordCodec.train(["b a c a", "c a d"], min_freq=2).itos == ["</s>", "<unk>", "a", "c"]
    assert WordCodec.train(["b a c a", "c a d"], max_size=3).vocab_size == 3
    with pytest.raises(ValueError, match="outside the vocabulary"):
        codec.decode([6])


def test_word_codec_state_survives_weights_only_checkpoint():
    codec = WordCodec.train(SENTENCES)
    state = weights_only_roundtrip(codec.to_state())
    json.dumps(state)  # plain types only
    again = codec_from_state(state)
    assert isinstance(again, WordCodec) and again.itos == codec.itos
    assert [again.encode(s) for s in SENTENCES] == [codec.encode(s) for s in SENTENCES]


def test_bpe_codec_specials_roundtrip_state_and_determinism():
    lines = SENTENCES * 3
    codec = RawTextBPECodec.train(iter(lines), vocab_size=120)
    tok = codec.tokenizer
    assert tok.token_to_id("</s>") == EOS and tok.token_to_id("<unk>") == UNK
    for line in SENTENCES:
        ids = codec.encode(line)
        assert EOS not in ids and UNK not in ids
        assert codec.decode(ids) == line
        assert len(codec.tokens(line)) == len(ids)
    assert codec.encode_batch(SENTENCES) == [codec.encode(s) for s in SENTENCES]
    assert UNK in codec.encode("€")  # a character never seen in training
    state = weights_only_roundtrip(codec.to_state())
    assert isinstance(state["tokenizer"], str)
    again = codec_from_state(state)
    assert [again.encode(s) for s in SENTENCES] == [codec.encode(s) for s in SENTENCES]
    assert RawTextBPECodec.train(iter(lines), vocab_size=120).to_state() == codec.to_state()
    with pytest.raises(ValueError, match="outside the vocabulary"):
        codec.decode([codec.vocab_size])
    with pytest.raises(ValueError, match="unknown codec type"):
        codec_from_state({"type": "sentencepiece"})


# -- reading


def test_read_lines_plain_and_gz_strip_only_the_line_terminator(tmp_path):
    text = "first line \r\nsecond\u2028still second\n\n  fourth\tline"  # no final newline
    plain, gz = tmp_path / "a.txt", tmp_path / "a.txt.gz"
    plain.write_bytes(text.encode("utf-8"))
    gz.write_bytes(gzip.compress(text.encode("utf-8")))
    expected = ["first line ", "second\u2028still second", "", "  fourth\tline"]
    assert read_lines(plain) == expected
    assert read_lines(gz) == expected


def test_read_lines_bad_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.de"
    path.write_bytes(b"ok\nalso ok\ncaf\xe9\nfine\n")
    with pytest.raises(ValueError, match=r"bad\.de:3: invalid UTF-8"):
        read_lines(path)
    gz = tmp_path / "bad.de.gz"
    gz.write_bytes(gzip.compress(b"\xff\n"))
    with pytest.raises(ValueError, match=r"bad\.de\.gz:1:"):
        read_lines(gz)


def test_read_parallel_mismatch_and_missing_files(tmp_path):
    src = write(tmp_path / "train.en", ["a", "b", "c"])
    tgt = write(tmp_path / "train.de.gz", ["x", "y"])
    with pytest.raises(ValueError) as err:
        read_parallel(src, tgt)
    msg = str(err.value)
    assert "train.en" in msg and "train.de.gz" in msg and "3 lines" in msg and "2 lines" in msg
    with pytest.raises(FileNotFoundError, match="nowhere.en"):
        read_parallel(str(tmp_path / "nowhere.en"), tgt)


# -- toy corpus


def test_toy_corpus_is_deterministic_and_pinned():
    a = generate_toy_corpus(7, 50, 10, 10)
    assert a == generate_toy_corpus(7, 50, 10, 10)
    assert a != generate_toy_corpus(8, 50, 10, 10)
    # byte-identical across runs and machines: a change to the grammar or sampling must update this hash
    digest = hashlib.sha256(json.dumps(a, sort_keys=True).encode()).hexdigest()
    assert digest == "8204c42f4c4b451f8b3112c809630c923b8a53672bdb369a81f244612447aba3"


@pytest.fixture(scope="module")
def toy_corpus():
    return generate_toy_corpus(1234, 20000, 500, 500)


def test_toy_corpus_splits_disjoint_sizes_lengths_and_vocabulary(toy_corpus):
    sources = [set(toy_corpus[split][0]) for split in ("train", "dev", "test")]
    assert [len(s) for s in sources] == [20000, 500, 500]  # no duplicates inside a split
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    src, tgt = toy_corpus["train"]
    lengths = [len(line.split()) for line in src + tgt]
    assert 4 <= min(lengths) and max(lengths) <= 25
    assert 8 <= sum(lengths) / len(lengths) <= 14
    src_types = {w for line in src for w in line.split()}
    tgt_types = {w for line in tgt for w in line.split()}
    assert 100 <= len(src_types) == SRC_VOCAB_SIZE <= 250
    assert 100 <= len(tgt_types) == TGT_VOCAB_SIZE <= 250
    assert not src_types & tgt_types  # two different made-up languages


def test_toy_agreement_holds_on_every_pair(toy_corpus):
    for split in ("train", "dev", "test"):
        for s, t in zip(*toy_corpus[split], strict=True):
            assert check_agreement(s, t), (s, t)
            assert translate(s) == t  # the target is a function of the source text


def test_check_agreement_detects_violations(toy_corpus):
    s, t = next((s, t) for s, t in zip(*toy_corpus["train"], strict=True) if t.split()[-1].endswith("ta"))
    words = t.split()
    assert not check_agreement(s, " ".join(words[:-1] + [words[-1][:-2] + "ko"]))  # main verb class
    assert not check_agreement(s, " ".join(words[:-1] + [words[-1] + "n"]))  # main verb number
    assert not check_agreement(s, " ".join(words[-1:] + words[:-1]))  # verb not last
    other_s = next(x for x in toy_corpus["train"][0] if x.split()[2] != s.split()[2] and x != s)
    assert not check_agreement(other_s, t)  # target does not translate the source


def test_toy_grammar_markdown_example():
    src, tgt = TOY_EXAMPLE
    assert check_agreement(src, tgt) and translate(src) == tgt
    page = (Path(__file__).resolve().parent.parent / "docs" / "data.md").read_text(encoding="utf-8")
    assert f"`{src}`" in page and f"`{tgt}`" in page  # the documented example (docs/data.md) is the generator's


# -- sampler


def random_lengths(n: int, seed: int = 0) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    return [rng.randint(0, 40) for _ in range(n)], [rng.randint(1, 45) for _ in range(n)]


def padded_size(batch, src, tgt) -> int:
    return len(batch) * (1 + max(max(src[i], tgt[i]) for i in batch))


@pytest.mark.parametrize("maxi_batch", [0, 3])
def test_sampler_covers_every_index_once_within_budget(maxi_batch):
    src, tgt = random_lengths(1000)
    src[17], tgt[17] = 300, 2  # longer than the budget on its own
    sampler = TokenBatchSampler(src, tgt, max_tokens=200, shuffle=True, seed=3, maxi_batch=maxi_batch)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for b in batches for i in b) == list(range(1000))
        assert [17] in batches
        assert all(padded_size(b, src, tgt) <= 200 for b in batches if b != [17])
        epochs.append(batches)
    assert epochs[0] != epochs[1] != epochs[2]
    sampler.set_epoch(1)
    assert list(sampler) == epochs[1]  # an epoch is reproducible
    again = TokenBatchSampler(src, tgt, max_tokens=200, shuffle=True, seed=3, maxi_batch=maxi_batch)
    assert list(again) == epochs[0]
    if maxi_batch == 0:
        assert len({len(e) for e in epochs}) == 1  # same number of batches every epoch


def test_sampler_shards_are_disjoint_and_equal_length():
    src, tgt = random_lengths(777, seed=1)
    for epoch in range(3):
        shards = []
        for rank in range(2):
            s = TokenBatchSampler(src, tgt, max_tokens=300, shuffle=True, seed=5, num_replicas=2, rank=rank)
            s.set_epoch(epoch)
            shards.append(list(s))
            assert len(s) == len(shards[-1])
        assert len(shards[0]) == len(shards[1]) > 0
        seen = [i for shard in shards for b in shard for i in b]
        assert len(seen) == len(set(seen))
        full = TokenBatchSampler(src, tgt, max_tokens=300, shuffle=True, seed=5)
        full.set_epoch(epoch)
        assert len(full) - len(shards[0]) * 2 in (0, 1)  # only the remainder batch is dropped


def test_sampler_eval_order_is_sorted_deterministic_and_unsharded():
    src, tgt = random_lengths(250, seed=2)
    sampler = TokenBatchSampler(src, tgt, max_tokens=None, max_sentences=32, shuffle=False)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 8
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(250)) and all(len(b) <= 32 for b in batches)
    keys = [max(src[i], tgt[i]) for i in flat]
    assert keys == sorted(keys, reverse=True)
    sampler.set_epoch(4)
    assert list(sampler) == batches
    with pytest.raises(ValueError, match="not sharded"):
        TokenBatchSampler(src, tgt, max_tokens=None, max_sentences=32, shuffle=False, num_replicas=2, rank=1)


# -- DataModules


@pytest.fixture(scope="module")
def toy_dm():
    dm = ToyDataModule(n_train=400, n_dev=30, n_test=20, max_tokens=256, eval_batch_size=8)
    dm.setup("fit")
    return dm


def check_batch(batch, dm, split):
    src_len, tgt_len = batch.src_mask.sum(1), batch.tgt_mask.sum(1)
    for b in range(batch.size):
        sides = ((batch.src, batch.src_mask, src_len[b]), (batch.tgt, batch.tgt_mask, tgt_len[b]))
        for ids, mask, n in sides:
            assert mask[b, :n].all() and not mask[b, n:].any()  # a prefix of real positions
            assert ids[b, n - 1] == EOS and (ids[b, : n - 1] != EOS).all() and (ids[b, n:] == 0).all()
        k = int(batch.ids[b])
        src_ids, tgt_ids = batch.src[b, : src_len[b] - 1], batch.tgt[b, : tgt_len[b] - 1]
        if UNK not in tgt_ids:  # unknown words (possible outside train) cannot come back
            assert dm.decode_target(tgt_ids.tolist()) == dm.references(split)[k]
        if UNK not in src_ids:
            assert dm.src_codec.decode(src_ids) == dm.sources(split)[k]


def test_toy_datamodule_end_to_end(toy_dm):
    dm = toy_dm
    codec = dm.src_codec
    dm.setup("validate")  # idempotent
    assert dm.src_codec is codec and dm.name == "toy"
    assert (dm.src_vocab_size, dm.tgt_vocab_size) == (dm.src_codec.vocab_size, dm.tgt_codec.vocab_size)
    assert dm.filter_stats["kept"] == 400 and dm.filter_stats["empty"] == dm.filter_stats["too_long"] == 0
    loader = dm.train_dataloader()
    batch = next(iter(loader))
    assert batch.src.shape == batch.src_mask.shape and batch.tgt.shape == batch.tgt_mask.shape
    assert batch.src.size(0) == batch.tgt.size(0) == batch.ids.numel() > 1
    assert batch.src.size(0) * max(batch.src.size(1), batch.tgt.size(1)) <= 256
    check_batch(batch, dm, "train")
    ids = torch.cat([b.ids for b in dm.val_dataloader()])
    assert sorted(ids.tolist()) == list(range(30))
    check_batch(next(iter(dm.test_dataloader())), dm, "test")
    state = weights_only_roundtrip(dm.codec_state())
    src, tgt = codecs_from_state(state)
    ref = dm.references("val")[0]
    assert state["joint"] is False and tgt.decode(tgt.encode(ref)) == ref


def test_toy_datamodule_takes_rank_and_epoch_from_the_trainer(toy_dm):
    def loader_ids(rank, epoch):
        toy_dm.trainer = SimpleNamespace(
            global_rank=rank, world_size=2, current_epoch=epoch, reload_dataloaders_every_n_epochs=0
        )
        try:
            return [b.ids.tolist() for b in toy_dm.train_dataloader()]
        finally:
            toy_dm.trainer = None

    r0, r1 = loader_ids(0, 0), loader_ids(1, 0)
    assert len(r0) == len(r1) and not {i for b in r0 for i in b} & {i for b in r1 for i in b}
    assert loader_ids(0, 1) != r0


def test_lightning_runs_the_train_sampler_unchanged_and_reshuffles(toy_dm):
    import lightning as L

    class Recorder(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.seen: dict[int, list[int]] = {}

        def training_step(self, batch, batch_idx):
            self.seen.setdefault(self.current_epoch, []).extend(batch.ids.tolist())
            return (self.w * batch.tgt_mask.float().mean()).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    model = Recorder()
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=1,
        use_distributed_sampler=False,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    trainer.fit(model, train_dataloaders=toy_dm.train_dataloader())
    kept = toy_dm.dataset("train").index
    assert sorted(model.seen[0]) == sorted(model.seen[1]) == sorted(kept)
    assert model.seen[0] != model.seen[1]


def test_max_len_rule_is_strict_on_both_sides():
    dm = ToyDataModule(n_train=300, n_dev=5, n_test=0, max_len=10, max_tokens=256, eval_batch_size=8)
    dm.setup()
    src, tgt = dm.sources("train"), dm.references("train")
    lengths = [(len(s.split()), len(t.split())) for s, t in zip(src, tgt, strict=True)]
    expected = [k for k, (a, b) in enumerate(lengths) if a < 10 and b < 10]
    assert any(a == 10 for a, _ in lengths) and any(a == 9 for a, _ in lengths)  # the boundary is exercised
    assert dm.dataset("train").index == expected
    assert dm.filter_stats["too_long"] == 300 - len(expected) and dm.filter_stats["kept"] == len(expected)
    assert not dm.has_split("test")


def test_files_datamodule_filters_train_only_and_logs(tmp_path, monkeypatch, caplog):
    words = "one two three four five six seven eight nine ten eleven twelve".split()
    train_src = ["a b c", "", "d e f", " ".join(words), "g h"] + [" ".join(words[:5])] * 5
    train_tgt = ["x y", "z", "", "u v", "w"] + [" ".join(words[5:9])] * 5
    val = (["a b", "", " ".join(words)], ["x", "y", "z"])
    write(tmp_path / "train.src", train_src)
    write(tmp_path / "train.tgt.gz", train_tgt)
    write(tmp_path / "dev.src", val[0])
    write(tmp_path / "dev.tgt", val[1])
    monkeypatch.chdir(tmp_path)  # relative paths are taken as given when Hydra is not running
    dm = FilesDataModule(
        train_src="train.src",
        train_tgt="train.tgt.gz",
        dev_src="dev.src",
        dev_tgt="dev.tgt",
        vocab_size=60,
        max_len=10,
        max_tokens=100,
        eval_batch_size=2,
        joint_vocab=True,
    )
    with caplog.at_level(logging.INFO, logger="sarnmt.data.loading.translation"):
        dm.setup()
    stats = dm.filter_stats
    assert (stats["total"], stats["kept"], stats["empty"], stats["too_long"]) == (10, 7, 2, 1)
    assert sorted(dm.dataset("train").index) == [0, 4, 5, 6, 7, 8, 9]
    assert any("train.src" in r.message and "kept 7 of 10" in r.message for r in caplog.records)
    assert not dm.has_split("test") and dm.has_split("val")
    assert dm.sources("val") == val[0] and dm.references("val") == val[1]  # unfiltered
    assert sorted(torch.cat([b.ids for b in dm.val_dataloader()]).tolist()) == [0, 1, 2]
    assert dm.src_codec is dm.tgt_codec and dm.codec_state()["joint"] is True
    src, tgt = codecs_from_state(weights_only_roundtrip(dm.codec_state()))
    assert src is tgt and src.encode("a b c") == dm.src_codec.encode("a b c")
    with pytest.raises(ValueError, match="no split 'test'"):
        dm.references("test")


def test_files_datamodule_line_count_mismatch_fails_in_setup(tmp_path):
    paths = {name: write(tmp_path / name, ["a b", "c d"]) for name in ("tr.en", "tr.de", "dev.en")}
    paths["dev.de"] = write(tmp_path / "dev.de", ["x"])
    dm = FilesDataModule(
        train_src=paths["tr.en"],
        train_tgt=paths["tr.de"],
        dev_src=paths["dev.en"],
        dev_tgt=paths["dev.de"],
        max_tokens=100,
        eval_batch_size=2,
    )
    with pytest.raises(ValueError, match=r"dev\.en has 2 lines, .*dev\.de has 1 lines"):
        dm.setup()
    with pytest.raises(RuntimeError, match="setup"):
        dm.src_vocab_size  # noqa: B018


# -- real data


@pytest.mark.skipif(not MULTI30K.is_dir(), reason=f"{MULTI30K} not present")
def test_bpe_roundtrip_on_multi30k():
    lines = {lang: read_lines(MULTI30K / f"train.{lang}.gz")[:2000] for lang in ("en", "de")}
    joint = RawTextBPECodec.train(lines["en"] + lines["de"], vocab_size=4000)
    separate = {lang: RawTextBPECodec.train(lines[lang], vocab_size=3000) for lang in lines}
    for lang, text in lines.items():
        for codec in (joint, separate[lang]):
            ids = codec.encode_batch(text)
            assert all(UNK not in x and EOS not in x for x in ids)
            assert [codec.decode(x) for x in ids] == text


@pytest.mark.skipif(not MULTI30K.is_dir(), reason=f"{MULTI30K} not present")
def test_files_datamodule_on_multi30k():
    dm = FilesDataModule(
        train_src=str(MULTI30K / "val.en.gz"),
        train_tgt=str(MULTI30K / "val.de.gz"),
        dev_src=str(MULTI30K / "test_2016_flickr.en.gz"),
        dev_tgt=str(MULTI30K / "test_2016_flickr.de.gz"),
        vocab_size=2000,
        max_tokens=1000,
        eval_batch_size=50,
    )
    dm.setup()
    assert dm.filter_stats["total"] == 1014 and len(dm.references("val")) == 1000
    assert dm.src_codec is not dm.tgt_codec and dm.tgt_vocab_size <= 2000
    check_batch(next(iter(dm.train_dataloader())), dm, "train")
    check_batch(next(iter(dm.val_dataloader())), dm, "val")
