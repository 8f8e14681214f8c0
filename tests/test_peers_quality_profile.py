"""``python -m benchmarks.peers.quality profile`` (benchmarks/peers/quality/profile.py, profile_update.py): the batch
every system is profiled on, the columns built from a measurement (kinds of work, FLOPs, GFLOP/s), sarnmt's column on
a tiny batch, a missing peer's "not run" line, and each peer's script run by the peer's own python where its venv is
installed (``outputs/peers/<tool>``; skipped, saying why, where it is not)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.peers.quality import profile
from benchmarks.peers.quality.cli import main
from benchmarks.peers.quality.profile_update import PHASES
from benchmarks.peers.quality.systems import PEERS
from sarnmt.bench.profile import KINDS

WORDS = "a@@ b c@@ d e f@@ g h i j k l m n o p".split()


def _text(folder: Path, pairs: int = 24) -> Path:
    """A tiny exported text: ``train.bpe.en`` / ``train.bpe.de`` of ``pairs`` lines, lengths 2-9 pieces."""
    folder.mkdir(parents=True, exist_ok=True)
    for lang, shift in (("en", 0), ("de", 3)):
        lines = [
            " ".join(WORDS[(k + j + shift) % len(WORDS)] for j in range(2 + (k * 5 + shift) % 8)) + " z"
            for k in range(pairs)
        ]
        (folder / f"train.bpe.{lang}").write_text("".join(line + "\n" for line in lines))
    return folder


def test_the_batch_is_the_training_batch_of_the_median_pair_within_the_budget():
    src = ["a " * n for n in (5, 1, 3, 9, 2, 7, 4)]  # longer sides 5 1 3 9 2 7 4 (+1 EOS)
    tgt = ["b " * n for n in (1, 1, 1, 1, 1, 1, 1)]
    batch = profile.choose_batch(src, tgt, budget=12)
    # sorted by the longer side: 1 2 3 | 4 5 | 7 | 9 (widths 2 3 4 | 5 6 | 8 | 10: 3 x 4 = 12, 2 x 6 = 12);
    # the median pair (length 4, line 6) is in the second batch: lines 6 and 0, in corpus order
    assert batch.indices == [0, 6]
    described = batch.describe()
    assert described["sentences"] == 2 and described["src_tokens"] == 6 + 5 and described["tgt_tokens"] == 4
    assert described["sentences"] * max(described["src_width"], described["tgt_width"]) <= 12


def test_a_column_classes_the_operators_and_puts_the_rest_to_framework_overhead():
    raw = {
        "parameters": 10,
        "vocab": {"src": 5, "tgt": 5},
        "sentences": 2,
        "src_tokens": 8,
        "tgt_tokens": 6,
        "update_ms": 5.0,
        "update_wall_ms": 9.0,
        "phases_ms": dict.fromkeys(PHASES, 1.25),
        "phases_wall_ms": dict.fromkeys(PHASES, 2.25),
        "flops": 6_000_000,
        # self wall ms per update, calls
        "ops": {
            "aten::mm": [4.0, 2],
            "aten::addmm": [2.0, 1],
            "aten::cat": [1.0, 1],
            "aten::_log_softmax": [0.5, 1],
            "aten::tanh": [0.5, 3],
        },
        "profiled_ms": 10.0,  # 2 ms of it in no operator
        "profiled_cpu_ms": 5.0,  # the thread waited half the time for a core
        "repeats": 1,
    }
    column = profile.summarise(raw)
    assert column["kinds_share"] == {
        "matrix products": 0.6,
        "copies and fills": 0.1,
        "reductions and softmax": 0.05,
        "elementwise": 0.05,
        "framework overhead": 0.2,
    }
    assert column["kinds_ms"]["matrix products"] == 3.0 and column["kinds_ms"]["framework overhead"] == 1.0
    assert column["matmul_gflop_s"] == 2.0  # 6 MFLOP in 3 CPU ms
    assert column["mflop_per_target_token"] == 1.0
    assert [op["op"] for op in column["top_ops"]][:2] == ["aten::mm", "aten::addmm"]
    assert column["top_ops"][0]["ms"] == 2.0  # its share of the CPU time


def test_sarnmts_column_on_a_tiny_batch():
    src = [[2, 3, 4], [5, 6], [7, 8, 9, 2]]
    tgt = [[3, 4], [5, 6, 7, 8], [9]]
    raw = profile.run_sarnmt(src, tgt, 12, 11, repeats=1)
    column = profile.summarise(raw)
    assert column["batch"] == {"sentences": 3, "src_tokens": 12, "tgt_tokens": 10}
    assert column["vocab"] == {"src": 12, "tgt": 11} and column["threads"] == 1
    assert set(column["phases_ms"]) == set(PHASES) and all(v >= 0 for v in column["phases_ms"].values())
    assert column["update_ms"] > 0 and column["phases_ms"]["backward"] > 0
    assert set(column["kinds_ms"]) == set(KINDS) and abs(sum(column["kinds_share"].values()) - 1) < 0.01
    assert column["kinds_ms"]["matrix products"] > 0 and column["mflop_per_target_token"] > 0
    # the mini baseline (model=tiny): its 5,198,273 parameters at V = 8,000 a side, less 128 per source word (its
    # embedding) and 128 + 128 + 1 per target word (embedding, output layer, bias)
    assert column["parameters"] == 5_198_273 - (8000 - 12) * 128 - (8000 - 11) * 257


def _canned(src, tgt, src_vocab, tgt_vocab, repeats, seed=1):
    """A measurement of sarnmt's update as :func:`profile.run_sarnmt` returns it, without the model."""
    return {
        "parameters": 7,
        "vocab": {"src": src_vocab, "tgt": tgt_vocab},
        "sentences": len(src),
        "src_tokens": sum(len(s) + 1 for s in src),
        "tgt_tokens": sum(len(t) + 1 for t in tgt),
        "update_ms": 4.0,
        "update_wall_ms": 4.0,
        "phases_ms": dict.fromkeys(PHASES, 1.0),
        "phases_wall_ms": dict.fromkeys(PHASES, 1.0),
        "flops": 1000,
        "ops": {"aten::mm": [3.0, 1]},
        "profiled_ms": 4.0,
        "profiled_cpu_ms": 4.0,
        "repeats": repeats,
    }


def test_a_missing_peer_venv_is_one_not_run_line_and_sarnmt_still_runs(tmp_path, monkeypatch):
    data = _text(tmp_path / "data")
    (data / "pipeline.json").write_text("{}")
    ids = lambda lines: [[2] * len(pieces) for pieces in lines]  # noqa: E731
    monkeypatch.setattr(profile, "sarnmt_ids", lambda data, batch: (ids(batch.src), ids(batch.tgt), 5, 5))
    monkeypatch.setattr(profile, "run_sarnmt", _canned)  # measured for real in the test above
    out = tmp_path / "out"
    code = main(
        ["profile", "--data", str(data), "--peers-dir", str(tmp_path / "none"), "--out", str(out), "--repeats", "1"]
    )
    assert code == 0
    report = json.loads((out / "profile.json").read_text())
    assert report["systems"]["joeynmt"] == {
        "not_run": f"JoeyNMT 2.3.0 not installed in {tmp_path / 'none' / 'joeynmt'} (missing; "
        "benchmarks/peers/install_joeynmt.sh)"
    }
    assert "not_run" in report["systems"]["fairseq"] and report["systems"]["sarnmt_fp32"]["update_ms"] > 0
    table = (out / "profile.md").read_text()
    not_run = [line for line in table.splitlines() if "not run:" in line]
    assert len(not_run) == 1 and not_run[0].count("not run: ") == 2
    assert "| **CPU ms per update** | **" in table and "torch " in table.split("Machine:")[1].splitlines()[0]


def test_text_without_the_training_pairs_is_an_error(tmp_path, capsys):
    assert main(["profile", "--data", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --data ") and "train.bpe.en" in err[0]


@pytest.mark.parametrize("tool", ["joeynmt", "fairseq"])
def test_a_peers_script_profiles_its_update_in_its_own_venv(tmp_path, tool):
    if not (PEERS / tool / "bin" / "python").exists():
        pytest.skip(f"{tool} is not installed in {PEERS / tool} (benchmarks/peers/install_{tool}.sh)")
    data = _text(tmp_path / "data")
    batch = profile.choose_batch(
        *((data / f"train.bpe.{lang}").read_text().split("\n")[:-1] for lang in ("en", "de")), budget=64
    )
    system = profile.peer_systems(PEERS)[tool]
    raw = profile.run_peer(system, data, batch, repeats=1, seed=1, timeout=600)
    assert "not_run" not in raw, raw
    assert raw["sentences"] == len(batch.indices) and raw["tgt_tokens"] == batch.describe()["tgt_tokens"]
    assert raw["threads"] == 1 and raw["omp_num_threads"] == "1"
    column = profile.summarise(raw)
    assert column["parameters"] > 0 and column["kinds_ms"]["matrix products"] > 0 and column["update_ms"] > 0
