"""``make bench-commit REF=...``: sarnmt at another commit as a peer of the bench (benchmarks/peers/commit.py) is
that commit's code, imported beside today's, computing on the timed model's own weights."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks.peers.commit import CommitPeer, materialize, retarget
from sarnmt.bench.compose import compose_bench
from sarnmt.bench.measure import sarnmt_nll
from sarnmt.bench.report import markdown
from sarnmt.bench.run import bench, bench_model
from sarnmt.bench.workload import make_workload, sorted_batches
from sarnmt.cli.bench import main
from sarnmt.decoding.beam import BeamSearch
from sarnmt.decoding.greedy import GreedySearch
from sarnmt.decoding.penalties import LengthPenalty
from tests.test_bench import CHECKOUT_PEERS, TINY

COMMIT = [CHECKOUT_PEERS, "peers=commit", "peers.before.ref=HEAD", "optim@reference_optim=adadelta"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("commits")


def _compose(cache, *overrides):
    return compose_bench([*COMMIT, f"+peers.before.cache_dir={cache}", *TINY, "systems=[]", *overrides])


def test_the_peer_is_the_commit_s_code_on_the_timed_model_s_weights(cache):
    cfg, systems = _compose(cache, "decoders=[baseline,self_attentive_content,memory_rnn]")
    workload = make_workload(cfg.lengths.multi30k, cfg.vocab, 32, cfg.seed)
    batch = sorted_batches(workload.pairs, 8, 1)[0]
    for name, system in systems.items():
        peer = system.peers["before"]
        model = bench_model(cfg, system, torch.device("cpu")).eval()
        twin = peer.twin(model)
        assert twin is not model and peer.twin(model) is twin  # built once per model
        assert all(ours is theirs for ours, theirs in zip(model.parameters(), twin.parameters(), strict=True))
        own = {type(m).__module__.split(".")[0] for m in twin.modules() if type(m).__module__.startswith("sarnmt")}
        assert own == {peer.package}, name  # nothing of today's package inside
        assert torch.equal(peer.nll(model, batch), sarnmt_nll(model, batch)), name  # HEAD computes as the tree
        searches = peer.searches(0.5, 4, 3)
        src, mask = batch.src, batch.src_mask
        assert searches["greedy"](model, src, mask).tokens == GreedySearch(0.5, 4)(model, src, mask).tokens
        assert (
            searches["beam3"](model, src, mask).tokens
            == BeamSearch(3, LengthPenalty(), 0.5, 4)(model, src, mask).tokens
        )
        model.train()
        peer.nll(model, batch).sum().backward()  # its gradients reach the timed model's parameters
        assert model.decoder.cell2.weight_hh.grad.abs().max() > 0


def test_bench_prints_sarnmt_now_over_sarnmt_at_the_commit(cache, tmp_path):
    cfg, systems = _compose(cache, "decoders=[baseline]", f"out_dir={tmp_path}")
    assert cfg.reference_optim._target_ == cfg.optim._target_ == "sarnmt.training.optim.Adadelta"
    record = bench(cfg, systems)
    (v,) = record["runs"][0]["variants"]
    assert v["before_train_tok_s"] > 0 and v["before_model_tok_s"] > 0 and v["before_beam5_batched"] > 0
    table = markdown(record)
    assert "sarnmt ÷ the peer before on multi30k" in table
    assert "| decoder | training × before | model only × before | greedy × before | beam5 × before |" in table
    assert f"| baseline | {v['train_tok_s'] / v['before_train_tok_s']:.2f}× | " in table
    json.dumps(record)


def test_a_ref_git_does_not_know_is_one_error_naming_it(cache, capsys):
    assert main([*COMMIT[:2], "peers.before.ref=no-such-ref", *TINY, "decoders=[baseline]", "systems=[]"]) == 2
    err = capsys.readouterr().err
    assert "ref='no-such-ref' is not a commit of" in err and len(err.strip().splitlines()) == 1


def test_a_class_the_commit_lacks_leaves_the_system_out(cache):
    package = materialize("HEAD", cache)
    assert retarget({"_target_": "sarnmt.models.variants.Baseline", "x": [1]}, package) == {
        "_target_": f"{package}.models.variants.Baseline",
        "x": [1],
    }
    assert retarget({"_target_": "sarnmt.models.variants.NotYetWritten"}, package) is None
    assert retarget({"inner": {"_target_": "sarnmt.nowhere.Thing"}}, package) is None
    peer = CommitPeer({"_target_": "sarnmt.models.variants.NotYetWritten"}, {}, "HEAD", str(cache))
    assert not peer.implements
