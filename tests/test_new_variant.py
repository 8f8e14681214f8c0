"""The cost of a new decoder variant: one Python module of one method and one yaml in a folder of one's own, nothing
else written.

With the yaml's folder on the command line (``--config-dir`` for the Hydra commands, ``hydra.searchpath`` for the
bench) and the module importable, the variant trains, translates (its module named in ``trust_targets=``: a
checkpoint is data) and is benched as a packaged one is, and the test oracle holds its teacher-forced form to its step
form. The ``decoder`` config group is the registry.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
import torch

from sarnmt.cli.bench import main as bench
from sarnmt.models.factory import build_model
from tests.cli_helpers import TINY, run_cli
from tests.conftest import ROOT, compose_train
from tests.oracle import textbook_logits
from tests.test_oracle import VOCAB, _batch

# R_t = W_yt d_t with d_t = (ȳ_{t-1} + ȳ_{t-2}) / 2: the readout sees the mean of the last two words (ȳ_{-1} = ȳ_0 =
# 0). One method: the summary's step form; its teacher-forced form is derived from it, R_t's formula is the base's
MODULE = '''
"""A toy decoder variant: the readout's target context is the mean of the last two words."""

import torch

from sarnmt.models.variants.base import DecoderVariant


class LastTwo(DecoderVariant):
    """d_t = (ȳ_{t-1} + ȳ_{t-2}) / 2."""

    streams = False  # no language-model form

    def summary_step(self, prev_emb, prev_hidden, hidden, state, steps):
        before = state.get("last", torch.zeros_like(prev_emb))
        return (prev_emb + before) / 2, {"last": prev_emb}, None
'''
YAML = "_target_: last_two_variant.LastTwo\n_partial_: true\n"


@pytest.fixture
def variant(tmp_path, monkeypatch) -> Path:
    """The two files a new variant takes: ``code/last_two_variant.py`` (importable) and ``conf/decoder/last_two.yaml``;
    the config folder."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "last_two_variant.py").write_text(MODULE)
    (tmp_path / "conf" / "decoder").mkdir(parents=True)
    (tmp_path / "conf" / "decoder" / "last_two.yaml").write_text(YAML)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    monkeypatch.delitem(sys.modules, "last_two_variant", raising=False)
    return tmp_path / "conf"


def test_a_new_variant_is_one_method():
    (cls,) = [node for node in ast.parse(MODULE).body if isinstance(node, ast.ClassDef)]
    assert [node.name for node in cls.body if isinstance(node, ast.FunctionDef)] == ["summary_step"]


def test_a_new_variant_is_held_to_the_oracle(variant):
    cfg = compose_train(
        [
            f"hydra.searchpath=[file://{variant}]",
            "decoder=last_two",
            "model=tiny",
            "model.emb_dim=8",
            "model.hidden_dim=12",
        ]
    )
    torch.manual_seed(0)
    model = build_model(cfg.model, cfg.decoder, VOCAB, VOCAB).double()
    src, src_mask, tgt, tgt_mask = _batch()
    expected = model(src, src_mask, tgt).logits  # R_t of every step at once: the form derived from the step form
    actual = textbook_logits(model, cfg.decoder, src, src_mask, tgt)  # one step at a time, the variant's own hook
    torch.testing.assert_close(actual[tgt_mask], expected[tgt_mask], atol=1e-9, rtol=0)


def test_a_new_variant_trains_translates_and_is_benched(capsys, tmp_path, variant):
    run = tmp_path / "run"
    outcome = run_cli(
        capsys,
        "train",
        ["--config-dir", str(variant), "decoder=last_two", *TINY, "trainer.max_epochs=1", f"hydra.run.dir={run}"],
    )
    assert outcome.code == 0, outcome.err
    checkpoint = run / "checkpoints" / "last.ckpt"
    assert checkpoint.is_file()

    text = b"ta brin\nnu gorm\n"
    args = [f"ckpt_path={checkpoint}", "progress=false", "decoding.min_len=1"]
    refused = run_cli(capsys, "translate", args, text)  # a checkpoint is data: a class of one's own is named first
    assert refused.code == 2 and "trust_targets=[last_two_variant]" in refused.err
    outcome = run_cli(capsys, "translate", [*args, "trust_targets=[last_two_variant]"], text)
    assert outcome.code == 0, outcome.err
    assert len(outcome.out.splitlines()) == 2 and all(line.strip() for line in outcome.out.splitlines())

    # the bench's smallest setting, beside the checkout's peers: the textbook model computes the new variant through
    # its hooks, the plain peer (which writes the paper's variants only) is left out for it
    out = tmp_path / "bench"
    searchpath = f"hydra.searchpath=[file://{variant},file://{ROOT / 'benchmarks' / 'conf'}]"
    sizes = ["model=tiny", "model.emb_dim=16", "model.hidden_dim=24", "vocab=50", "batch_size=4", "threads=1"]
    sizes += ["train_batches=1", "repeats=1", "lengths.multi30k.src=null", "decode.single=2", "systems=[]"]
    assert bench([searchpath, "peers=full", "decoders=[last_two]", *sizes, f"out_dir={out}"]) == 0
    (record,) = [json.loads(path.read_text()) for path in out.glob("bench-*.json")]
    (row,) = record["runs"][0]["variants"]
    assert row["decoder"] == "last_two" and row["train_tok_s"] > 0 and row["beam5_batched"] > 0
    assert row["reference_train_tok_s"] > 0 and row["reference_greedy_batched"] > 0
    assert not any(key.startswith("plain_") for key in row)
    assert "| last_two |" in capsys.readouterr().out
