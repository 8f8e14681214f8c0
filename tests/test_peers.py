"""The side-by-side with fairseq: sarnmt's driver (benchmarks/peers/driver.py) and the script's reading of fairseq's
logs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from benchmarks.peers.driver import build_vocab, fairseq_batches, main

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("side_by_side", ROOT / "benchmarks/peers/side_by_side.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_batches_and_vocabulary_are_fairseqs():
    pairs = [([1] * (i % 5 + 1), [2] * (i % 7 + 1)) for i in range(20)]
    batches = fairseq_batches(pairs, 6, seed=3)
    assert sorted(i for b in batches for i in b) == list(range(20)) and [len(b) for b in batches] == [6, 6, 6, 2]
    keys = [(len(pairs[i][1]), len(pairs[i][0])) for b in batches for i in b]
    assert keys == sorted(keys)  # by target, then source length
    assert build_vocab(["a b b c", "b c"], 4) == {"b": 2, "c": 3}  # 0 EOS, 1 UNK


@pytest.mark.parametrize("impl", ["sarnmt", "plain"])
def test_driver_trains_and_decodes_on_the_same_batches(tmp_path, capsys, impl):
    data = tmp_path / "data"
    data.mkdir()
    for name, count in (("train", 40), ("test", 5)):
        (data / f"{name}.src").write_text("".join(f"a{i % 7} b{i % 3} c{i % 5}\n" for i in range(count)))
        (data / f"{name}.tgt").write_text("".join(f"x{i % 7} y{i % 5}\n" for i in range(count)))
    run = tmp_path / "run"
    tiny = ["model=tiny", "model.emb_dim=8", "model.hidden_dim=12", "decoder=self_attentive_content"]
    assert (
        main(
            [
                "train",
                "--impl",
                impl,
                "--data",
                str(data),
                "--out",
                str(run),
                "--steps",
                "3",
                "--warmup",
                "1",
                "--batch-size",
                "8",
                "--vocab",
                "20",
                "--threads",
                "1",
                *tiny,
            ]
        )
        == 0
    )
    trained = json.loads(capsys.readouterr().out)
    assert trained["system"] == f"sarnmt-{impl}" and trained["steps"] == 3
    assert trained["sentences_s"] > 0 and trained["tgt_tokens_s"] > trained["sentences_s"] and trained["parameters"] > 0
    assert (
        main(
            [
                "decode",
                "--impl",
                impl,
                "--data",
                str(data),
                "--ckpt",
                str(run / "model.pt"),
                "--beam",
                "3",
                "--max-len",
                "4",
                "--threads",
                "1",
            ]
        )
        == 0
    )
    decoded = json.loads(capsys.readouterr().out)
    assert decoded["sentences"] == 5 and 1 <= decoded["mean_output_len"] <= 4
    assert len((run / f"test.{impl}.beam3.txt").read_text().splitlines()) == 5
    # equal work (make peers): no EOS before 3 words, at most 4 tokens: every output 3 words and EOS (or 4 words cut
    # at the limit): 4 beam steps and 4 output tokens per sentence
    common = ["--data", str(data), "--ckpt", str(run / "model.pt"), "--beam", "3", "--threads", "1"]
    assert main(["decode", "--impl", impl, *common, "--min-len", "3", "--max-len", "4"]) == 0
    decoded = json.loads(capsys.readouterr().out)
    assert decoded["mean_output_len"] == 4 and (decoded["min_len"], decoded["max_len"]) == (3, 4)
    lengths = {len(line.split()) for line in (run / f"test.{impl}.beam3.txt").read_text().splitlines()}
    assert lengths <= {3, 4} and len(lengths) >= 1
    assert main(["decode", "--data", str(tmp_path / "none"), "--ckpt", str(run / "model.pt")]) == 2
    assert "error:" in capsys.readouterr().err


def test_side_by_side_reads_fairseq_logs_and_tabulates(tmp_path, monkeypatch):
    script = _script()
    train_log = "\n".join(
        f"2026-11-23 | INFO | train_inner | epoch 001:  {n} / 313 loss=9.1, wps={wps}, ups=1.2, wpb=1100, "
        f"bsz={bsz}, num_updates={n}, lr=0.001, gnorm=1.2, clip=100, train_wall=40, wall={n}"
        for n, wps, bsz in ((50, 9999.9, 64), (100, 1375.0, 64), (150, 1100.0, 60), (200, 1375.0, 64))
    )
    monkeypatch.setattr(script, "run", lambda cmd, log, env: (train_log, 1650.0))
    args = type("A", (), {"warmup": 50, "steps": 150, "dropout": 0.2})
    got = script.fairseq_train(Path("v"), Path("b"), Path("c"), args, {}, tmp_path / "log")
    assert got["sentences_s"] == pytest.approx((64 + 60 + 64) * 50 / (40 + 50 + 40))  # update 50's line is warm-up
    monkeypatch.setattr(
        script,
        "run",
        lambda cmd, log, env: (
            "| INFO | fairseq_cli.generate | Translated 500 sentences (10,890 tokens) in 19.4s (25.77 sentences/s, "
            "561.23 tokens/s)",
            900.0,
        ),
    )
    decoded = script.fairseq_decode(Path("v"), Path("b"), Path("c"), 30, {}, tmp_path / "log")
    assert decoded == {
        "sentences_s": 25.77,
        "output_tokens_s": 561.23,
        "mean_output_len": 21.78,
        "peak_rss_mib": 900.0,
    }
    # equal work: fairseq forbids EOS before step N and forces it at step N (0-based); sarnmt forbids it before N
    # tokens and stops at N + 1 with EOS: N words and EOS, N + 1 beam steps, for every system
    fairseq, ours = script.length_args(30)
    assert fairseq == ["--min-len", "30", "--max-len-a", "0", "--max-len-b", "30"]
    assert ours == ["--min-len", "30", "--max-len", "31"]
    assert script.length_args(0) == (["--max-len-a", "0", "--max-len-b", "100"], ["--max-len", "101"])
    results = {
        "fairseq": {"train": [got], "decode": [decoded]},
        "sarnmt-baseline": {
            "train": [{"sentences_s": 2 * got["sentences_s"], "peak_rss_mib": 1000.0}],
            "decode": [{"sentences_s": 30.0, "output_tokens_s": 1122.46}],
        },
    }
    md = script.table(results, "toy", "2 CPUs", 30)
    assert "| train sentences/s | 72.3 | 144.6 |" in md and "every output 30 words and EOS" in md
    assert "| beam-5 sentences/s | 25.8 | 30.0 |" in md
    assert "sarnmt-baseline: trains 2.00× fairseq's sentences/s, decodes 1.16× its beam-5 sentences/s (at equal" in md
