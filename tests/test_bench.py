"""``python -m sarnmt.bench``: the benchmark composes the real configs, measures every figure, writes its record."""

from __future__ import annotations

import json
import platform

import pytest
import torch

from sarnmt.bench import decode
from sarnmt.bench.compose import compose_bench
from sarnmt.bench.decode import evenly_spaced
from sarnmt.bench.report import checks, markdown
from sarnmt.bench.run import bench, bench_model
from sarnmt.bench.workload import corpus_workload, hashed_ids, make_workload, sorted_batches, synthetic_workload
from sarnmt.cli.bench import main
from sarnmt.utils.allocator import keep_freed_memory
from sarnmt.utils.precision import native_bf16
from tests.conftest import ROOT

TINY = [
    "model=tiny",
    "model.emb_dim=16",
    "model.hidden_dim=24",
    "vocab=50",
    "batch_size=4",
    "train_batches=2",
    "repeats=1",
    "workloads=[multi30k]",
    "lengths.multi30k.src=null",
    "decode.single=2",
    "threads=1",
    "plot=false",
]
PEERS = ("plain", "reference")
CHECKOUT_PEERS = f"hydra.searchpath=[file://{ROOT / 'benchmarks' / 'conf'}]"  # what make bench adds


def test_bench_measures_every_figure_on_every_workload_and_plots(tmp_path):
    cfg, systems = compose_bench(
        [
            "bench_preset=full",  # the textbook reference and the plots too
            CHECKOUT_PEERS,
            *TINY,
            "decoders=[baseline,self_attentive_rnn]",
            "plot=true",
            "systems=[lstm_input_feeding_tiny]",
            "plot_lengths=[3,6]",
            "plot_batch_sizes=[2,4]",
            "workloads=[multi30k,wmt]",
            "lengths.wmt.src=/nonexistent",
            "lengths.wmt.synthetic=[5,12,8]",
            "profile=[baseline]",
            f"out_dir={tmp_path}",
        ]
    )
    record = bench(cfg, systems)
    assert len(record["code"]["source_hash"]) == 16 and record["code"]["files"] > 50  # the imported code's hash
    short, long = record["runs"]
    assert short["workload"]["name"] == "multi30k" and long["workload"]["name"] == "wmt"
    assert short["workload"]["description"] == "synthetic sentences of 3-30 tokens, mean 12"
    assert long["workload"]["description"] == "synthetic sentences of 5-12 tokens, mean 8"
    assert short["workload"]["pairs"] == 4 * 2 * 8 and len(short["workload"]["padded_lengths"]) == 2
    for run in record["runs"]:
        names = [v["decoder"] for v in run["variants"]]
        assert names == ["baseline", "self_attentive_rnn", "lstm_input_feeding_tiny"]
        lstm = run["variants"][2]  # timed beside the cGRU variants, without the (cGRU) peers
        for key in ("train_tok_s", "greedy_batched", "beam5_single", "activation_mib", "train_flops_per_token"):
            assert lstm[key] > 0, key
        assert not any(key.startswith(PEERS) for key in lstm) and "train_overhead_vs_baseline" in lstm
        for v in run["variants"][:2]:
            for key in (
                "train_tok_s",
                "greedy_batched",
                "greedy_single",
                "beam5_batched",
                "beam5_single",
                "activation_mib",
                "train_flops_per_token",
                "train_gflop_s",
                "model_tok_s",
                "optimizer_ms",
                "reference_greedy_batched",
                "plain_greedy_batched",
                "plain_beam5_batched",
            ):
                assert v[key] > 0, key
            for peer in PEERS:
                for key in (
                    "train_tok_s",
                    "activation_mib",
                    "train_flops_per_token",
                    "model_tok_s",
                    "optimizer_ms",
                    "train_gflop_s",
                ):
                    assert v[f"{peer}_{key}"] > 0, f"{peer}_{key}"
                assert v[f"train_speedup_vs_{peer}"] == pytest.approx(v["train_tok_s"] / v[f"{peer}_train_tok_s"])
                assert v[f"model_speedup_vs_{peer}"] == pytest.approx(v["model_tok_s"] / v[f"{peer}_model_tok_s"])
            assert v["model_tok_s"] > v["train_tok_s"]  # the optimizer step is part of the whole step
            assert v["peak_mib"] is None  # CPU: no allocator peak; activation memory instead
            # the textbook loop recomputes the attention keys at every step: more matrix-product work per token
            # than sarnmt and than the plain peer, which computes them once
            assert v["reference_train_flops_per_token"] > 1.2 * v["train_flops_per_token"]
            assert v["reference_train_flops_per_token"] > 1.2 * v["plain_train_flops_per_token"]
            assert "share_of_peak" not in v  # peak_gflop_s not given
        assert run["variants"][0]["train_overhead_vs_baseline"] == 0.0
        # the self-attentive RNN keeps more for backward than the baseline (its attention over past states)
        assert run["variants"][1]["activation_mib"] > run["variants"][0]["activation_mib"]
    assert set(record["series"]) == {"baseline", "self_attentive_rnn", "lstm_input_feeding_tiny"}
    assert all(len(s["length"]) == 2 and len(s["batch"]) == 2 for s in record["series"].values())
    assert all(len(s["beam_batch"]) == 2 and min(s["beam_batch"]) > 0 for s in record["series"].values())
    table = markdown(record)
    assert "workload **multi30k**" in table and "workload **wmt**" in table
    # a row in each workload's table and in its ratios to each peer (which the LSTM system has not)
    assert table.count("| self_attentive_rnn | ") == 2 * 3 and table.count("| lstm_input_feeding_tiny | ") == 2
    assert "as the plain peer (target ≥ 1.5×)" in table and "as the textbook reference (target ≥ 2.0×)" in table
    assert "the matrix-product work" in table and "without the optimizer step" in table
    # each workload's ratios to the plain peer, measured in the same run
    assert table.count("sarnmt ÷ the plain peer on ") == 2 and table.count("sarnmt ÷ the textbook reference on ") == 2
    assert "| decoder | training × plain | model only × plain | greedy × plain | beam5 × plain |" in table
    v = short["variants"][0]
    assert f"| baseline | {v['train_tok_s'] / v['plain_train_tok_s']:.2f}× | " in table
    # sarnmt steps with its fused Adadelta, the peers with PyTorch's, both with the paper's settings
    assert (
        cfg.optim._target_ == "sarnmt.training.optim.Adadelta"
        and cfg.reference_optim._target_ == "torch.optim.Adadelta"
    )
    assert cfg.reference_optim.rho == cfg.optim.rho == 0.95
    assert any("self_attentive_rnn" in line and "≤ 15%" in line for line in checks(record, short))
    # the profile: every implementation of the baseline, its phases and kinds of work adding up to the step
    assert set(short["profiles"]) == {"baseline sarnmt", "baseline plain", "baseline reference"}
    for p in short["profiles"].values():
        assert set(p["phases_ms"]) == {"forward", "backward", "clipping", "optimizer"}
        assert sum(p["kinds_ms"].values()) == pytest.approx(p["step_ms"], rel=1e-6)
        assert p["kinds_ms"]["matrix products"] > 0 and p["matmul_gflop_s"] > 0 and len(p["top_ops"]) == 8
    # the floor (sarnmt only): products + the energies' least passes + optimizer + clipping, below the whole step
    ours = short["profiles"]["baseline sarnmt"]
    assert "floor_ms" not in short["profiles"]["baseline plain"]
    assert ours["floor_ms"] == pytest.approx(
        ours["kinds_ms"]["matrix products"]
        + ours["energies_floor_ms"]
        + ours["phases_ms"]["optimizer"]
        + ours["phases_ms"]["clipping"]
    )
    assert 0 < ours["energies_floor_ms"] < ours["floor_ms"]
    assert "Where a training step's time goes (multi30k)" in table and "| framework overhead |" in table
    assert "| *floor: products + the energies' 4 passes + optimizer + clipping* |" in table
    assert "baseline: the plain peer's step" in table and "sarnmt's floor" in table


def test_bench_command_writes_json_markdown_and_reports_errors(tmp_path, capsys):
    assert (
        main(
            [
                *TINY,
                "decoders=[baseline]",
                "systems=[]",
                "peak_gflop_s=1000",
                f"out_dir={tmp_path}",
            ]
        )
        == 0
    )
    (json_path,) = tmp_path.glob("bench-*.json")
    record = json.loads(json_path.read_text())
    (variant,) = record["runs"][0]["variants"]
    assert "reference_train_tok_s" not in variant and "plain_train_tok_s" not in variant
    assert variant["share_of_peak"] == pytest.approx(variant["train_gflop_s"] / 1000)
    assert json_path.with_suffix(".md").read_text().startswith("device cpu")
    assert "| baseline |" in capsys.readouterr().out
    assert main(["decoders=[baseline,nonsense]"]) == 2
    assert "unknown decoders ['nonsense']" in capsys.readouterr().err
    assert main(["systems=[lstm_nonsense]"]) == 2
    assert "unknown systems ['lstm_nonsense']" in capsys.readouterr().err
    assert main(["model=lstm_input_feeding_tiny", "decoders=[baseline]", "systems=[]"]) == 2
    assert "valid decoder= options for this model: none" in capsys.readouterr().err
    assert main(["decoders=[baseline]", "profile=[memory_rnn]"]) == 2
    assert "profile names ['memory_rnn'], which are not timed" in capsys.readouterr().err
    assert main(["workloads=[multi30k,europarl]"]) == 2
    assert "unknown workloads ['europarl']; choose from ['multi30k', 'wmt', 'peers']" in capsys.readouterr().err
    assert main(["nosuchkey=1"]) == 2
    assert main(["decoders=[baseline]", "+peers.mine._target_=nowhere.Peer"]) == 2  # not importable from here
    assert "bench: peers.mine: 'nowhere.Peer' cannot be built (Error locating target 'nowhere.Peer')" in (
        capsys.readouterr().err
    )
    if not torch.cuda.is_available():
        assert main([*TINY, "device=cuda"]) == 2
        assert "device=cuda but no CUDA device is available" in capsys.readouterr().err
    if not native_bf16(torch.device("cpu")):
        assert main([*TINY, "precision=bf16"]) == 2
        assert "precision=bf16 but this cpu has no AVX-512 BF16 or AMX" in capsys.readouterr().err
    assert main(["--help"]) == 0 and "workloads=[multi30k,wmt]" in capsys.readouterr().out


def test_quick_preset_is_the_default_and_full_is_bench_yaml_as_written():
    """`make bench`: one workload, the six decoders beside the plain peer, nothing else; `make bench-full`: all."""
    cfg, systems = compose_bench([CHECKOUT_PEERS])
    assert list(cfg.workloads) == ["multi30k"] and list(systems) == [
        "baseline",
        "mean_residual",
        "self_attentive_content",
        "self_attentive_content_scope",
        "memory_rnn",
        "self_attentive_rnn",
    ]
    assert list(cfg.peers) == ["plain"] and not cfg.plot and list(cfg.systems) == [] and cfg.repeats >= 3
    assert cfg.train_batches == 1 and cfg.decode.single == 4 and cfg.decode.beam_size == 5  # the median-length batch
    assert all(list(system.peers) == ["plain"] for system in systems.values())  # it implements each of them
    cfg, systems = compose_bench(["bench_preset=full", CHECKOUT_PEERS])
    assert list(cfg.workloads) == ["multi30k", "wmt"] and list(cfg.peers) == ["plain", "reference"] and cfg.plot
    assert cfg.repeats == 5 and cfg.train_batches == 3 and cfg.decode.single == 16 and len(systems) == 6 + 3
    assert [list(system.peers) for system in systems.values()] == [["plain", "reference"]] * 6 + [[]] * 3  # no LSTM
    cfg, _ = compose_bench(["repeats=4", "peers=full", CHECKOUT_PEERS])  # key=value overrides win over the preset
    assert cfg.repeats == 4 and list(cfg.peers) == ["plain", "reference"] and list(cfg.workloads) == ["multi30k"]
    cfg, systems = compose_bench(["bench_preset=full"])  # the package alone (a wheel): sarnmt without peers
    assert dict(cfg.peers) == {} and all(system.peers == {} for system in systems.values())


def test_peers_null_times_sarnmt_alone():
    """``peers=null`` (bench.yaml: none): sarnmt alone, from the package and beside the checkout's peers group, whose
    option Hydra would refuse to set to null."""
    for folders in ([], [CHECKOUT_PEERS], ["bench_preset=full", CHECKOUT_PEERS]):
        cfg, systems = compose_bench([*folders, "peers=null", "decoders=[baseline]", "systems=[]"])
        assert not cfg.peers and list(systems) == ["baseline"] and systems["baseline"].peers == {}


def test_single_sentences_are_spread_over_the_batch():
    assert evenly_spaced(list(range(64)), 4) == [0, 16, 32, 48]
    assert evenly_spaced([1, 2], 5) == [1, 2]


def test_workloads(tmp_path):
    assert hashed_ids("a b a", 10) == [hashed_ids("a", 10)[0], hashed_ids("b", 10)[0], hashed_ids("a", 10)[0]]
    assert all(2 <= i < 10 for i in hashed_ids("the quick brown fox jumps", 10))
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("a b c\nd e\n\nf g h i\n")
    tgt.write_text("x y\nz\nw\nv u t s r\n")
    work = corpus_workload(src, tgt, 100, max_len=5)  # the pair with an empty side and the long one are left out
    assert [(len(s), len(t)) for s, t in work.pairs] == [(3, 2), (2, 1)]
    pairs = [([2] * n, [3] * (n % 5 + 1)) for n in range(1, 41)]  # max(source, target) length 1 .. 40
    batches = sorted_batches(pairs, 4, 3)  # 10 full batches; the middle ones of 3 stretches: batches 1, 5, 8
    assert [b.src.size(1) - 1 for b in batches] == [8, 24, 36]
    assert all(b.src.size(0) == 4 for b in batches)
    with pytest.raises(ValueError, match="40 sentence pairs make 10 batches of 4, 11 needed"):
        sorted_batches(pairs, 4, 11)
    lengths = [len(s) for s, _ in synthetic_workload(4000, 100, (5, 40, 17), seed=1).pairs]
    assert min(lengths) == 5 and max(lengths) <= 40 and abs(sum(lengths) / len(lengths) - 17) < 0.5
    with pytest.raises(ValueError, match=r"\[5, 11\] cannot have mean 30 \(a triangular .* mean lies in \[7, 9\]"):
        synthetic_workload(10, 100, (5, 11, 30), seed=1)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_keep_freed_memory_is_accepted_by_glibc():
    assert keep_freed_memory() is True


def test_every_round_times_each_search_once_in_alternating_order(monkeypatch):
    """sarnmt's searches and its peers' take turns within each repeat, the order reversed every other repeat."""
    cfg, systems = compose_bench([CHECKOUT_PEERS, *TINY, "decoders=[baseline]", "systems=[]", "repeats=3"])
    calls = []

    def fake_timed(fn, device):  # records which search each timing ran, and whether one sentence at a time
        calls.append((fn.args[0], fn.func.__name__))
        return 1.0

    monkeypatch.setattr(decode, "timed", fake_timed)
    workload = make_workload(cfg.lengths.multi30k, cfg.vocab, 32, cfg.seed)
    system = systems["baseline"]
    model = bench_model(cfg, system, torch.device("cpu"))
    decode.decode_rates(cfg, model, sorted_batches(workload.pairs, 8, 1), system.peers)
    batched = [search for search, how in calls if how == "run"]
    assert len(batched) == 3 * 4 and len(set(map(id, batched[:4]))) == 4  # greedy, beam5, plain_greedy, plain_beam5
    first = batched[:4]
    assert batched[4:8] == first[::-1] and batched[8:] == first
    singles = [search for search, how in calls if how == "run_each"]
    assert len(singles) == 3 * 2 and set(map(id, singles)) == set(map(id, first[:2]))  # sarnmt's own only
