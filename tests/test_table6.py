"""Table 6 (language models) through the suite: the plan and the sizes per scale, the smoke sweep end to end with
perplexity over every test word once, exact resumption of a language model's training, the entry point, the
parameter counts, and checkpoints of the wrong task."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from sarnmt.checkpoints.reading import CheckpointError, load_language_model, load_model
from sarnmt.cli.reproduce import reproduce
from sarnmt.lm.run import train_lm
from sarnmt.models.factory import build_language_model
from sarnmt.sweep.lm_job import line_statistics
from sarnmt.sweep.plan import plan_jobs
from sarnmt.sweep.records import read_sentence_stats
from sarnmt.sweep.seed_tests import compare
from sarnmt.sweep.spec import load_scale, load_table
from sarnmt.sweep.stats import corpus_score
from sarnmt.utils.compose import compose
from tests.conftest import ROOT

ROWS = ["lm_lstm", "lm_attention", "lm_4gram", "lm_mean_residual", "lm_self_attentive_residual"]
QUICK = [
    "lm_data=toy",
    "model.emb_dim=16",
    "model.hidden_dim=16",
    "trainer.enable_progress_bar=false",
    "callbacks.progress_bar=null",
    "callbacks.model_summary=null",
    "logger=csv",
]


def test_table6_plans_five_language_model_jobs_with_sizes_per_scale():
    table = load_table(6)
    assert table.task == "lm" and [r.key for r in table.rows] == ROWS
    for scale in ("smoke", "mini", "paper"):
        jobs = plan_jobs([table], load_scale(scale))
        seeds = len(load_scale(scale).seeds["extra"])
        assert sorted(j.row for j in jobs) == sorted(ROWS * seeds) and {j.task for j in jobs} == {"lm"}
    mini = {j.row: j for j in plan_jobs([table], load_scale("mini"))}
    assert "model.hidden_dim=465" in mini["lm_4gram"].train and "lm_data=mini" in mini["lm_4gram"].train
    assert plan_jobs([table], load_scale("paper"))[0].train[-2] == "lm_model=lstm"  # paper: the config's own sizes


def test_mini_sizes_have_the_same_parameter_count():
    """At the mini corpus's 10K words, every row has the LSTM's count within 2% (the paper: 47M for all)."""
    counts = {}
    for job in plan_jobs([load_table(6)], load_scale("mini")):
        cfg = compose("lm", list(job.train))
        with torch.device("meta"):
            counts[job.row] = sum(p.numel() for p in build_language_model(cfg.model, 10_000).parameters())
    assert max(counts.values()) / min(counts.values()) < 1.02, counts


@pytest.fixture(scope="module")
def smoke_table6(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("smoke6")
    cfg = compose(
        "reproduce",
        [
            f"runs_dir={tmp / 'runs'}",
            f"results_dir={tmp / 'results'}",
            "progress=false",
            "allow_dirty=true",
            "table=6",
            "scale=smoke",
        ],
        return_hydra_config=True,
    )
    with open(tmp / "log", "w") as out:
        result = reproduce(cfg, out=out)
    assert result["returncode"] == 0, (tmp / "log").read_text()[-3000:]
    return tmp


def test_smoke_table6_records_perplexity_over_every_test_word(smoke_table6):
    records = smoke_table6 / "results" / "records"
    corpus = instantiate(compose("lm", QUICK).data)
    corpus.prepare_data()
    corpus.setup("test")
    words = len(corpus.stream("test"))
    for row in ROWS:
        record = json.loads((records / f"lm_text.{row}.s1.json").read_text())
        test = record["tests"]["test"]
        lines = np.asarray(read_sentence_stats(records / f"lm_text.{row}.s1.json")["test"]["ppl"])
        assert test["words"] == words == int(lines[:, 1].sum()) and test["lines"] == len(lines) == 200
        assert test["scores"]["ppl"]["score"] == pytest.approx(math.exp(lines[:, 0].sum() / words), rel=1e-12)
        assert record["selected_checkpoint"]["monitor"] == "val/ppl"
    table = (smoke_table6 / "results" / "tables" / "table6.md").read_text()
    assert "| LSTM + Self-attentive residual connections | 0.02M | 24 (296) |" in table and "80.4" in table
    rerun = reproduce(
        compose(
            "reproduce",
            [
                f"runs_dir={smoke_table6 / 'runs'}",
                "progress=false",
                "allow_dirty=true",
                "table=6",
                f"results_dir={smoke_table6 / 'results'}",
                "scale=smoke",
                "render=false",
            ],
            return_hydra_config=True,
        ),
        out=open(os.devnull, "w"),
    )
    assert {j["state"] for j in rerun["jobs"]} == {"complete"} and rerun["command"] == []


def test_lightning_perplexity_is_exp_of_the_mean_nll_over_the_split(tmp_path):
    """The module's test/ppl, the sweep's per-line statistics and exp(mean NLL per word) over the split agree, and
    the words counted are the split's."""
    cfg = compose(
        "lm",
        [
            *QUICK,
            "lm_model=mean_residual_lstm",
            "trainer.max_steps=15",
            "test=true",
            f"paths.output_dir={tmp_path}",
            "validation.val_check_interval=15",
            "validation.check_val_every_n_epoch=null",
        ],
    )
    result = train_lm(cfg)
    net, vocab = load_language_model(result["best_model_path"])
    datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("test")
    assert vocab == datamodule.vocab
    lines = line_statistics(net, datamodule, "test", torch.device("cpu"))
    assert lines[:, 1].sum() == len(datamodule.stream("test")) == result["test/words"]
    assert result["test/ppl"] == pytest.approx(corpus_score(lines, "ppl"), rel=1e-5)
    assert result["test/ppl"] == pytest.approx(math.exp(lines[:, 0].sum() / lines[:, 1].sum()), rel=1e-5)


def test_resumed_language_model_trains_exactly_as_the_uninterrupted_one(tmp_path):
    """Stopped after 7 updates (mid-epoch: carried state, loader position, dropout masks) and resumed to 14, the
    weights equal those of 14 updates in one go."""
    common = [
        *QUICK,
        "lm_model=self_attentive_residual_lstm",
        "model.dropout=0.3",
        "test=false",
        "validation.val_check_interval=null",
        "validation.check_val_every_n_epoch=100",
    ]
    whole = train_lm(
        compose(
            "lm",
            [
                *common,
                "trainer.max_steps=14",
                f"paths.output_dir={tmp_path / 'whole'}",
                "callbacks.resume_checkpoint.train_time_interval=null",
                "callbacks.resume_checkpoint.every_n_train_steps=7",
            ],
        )
    )
    part = [
        *common,
        f"paths.output_dir={tmp_path / 'part'}",
        "callbacks.resume_checkpoint.train_time_interval=null",
        "callbacks.resume_checkpoint.every_n_train_steps=7",
    ]
    train_lm(compose("lm", [*part, "trainer.max_steps=7"]))
    last = tmp_path / "part" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 7
    train_lm(compose("lm", [*part, "trainer.max_steps=14", f"ckpt_path={last}"]))
    finals = [torch.load(tmp_path / run / "checkpoints" / "last.ckpt", weights_only=True) for run in ("whole", "part")]
    assert finals[0]["global_step"] == finals[1]["global_step"] == 14
    for key, value in finals[0]["state_dict"].items():
        torch.testing.assert_close(finals[1]["state_dict"][key], value, rtol=0, atol=0, msg=key)
    assert whole["parameters"] > 0


def test_perplexity_significance_prefers_the_lower_perplexity():
    rng = np.random.default_rng(0)
    words = rng.integers(5, 20, size=300).astype(np.float64)
    good = np.stack([words * rng.normal(4.0, 0.3, 300), words], axis=1)
    bad = np.stack([words * rng.normal(4.3, 0.3, 300), words], axis=1)
    assert corpus_score(good, "ppl") < corpus_score(bad, "ppl")
    p_t, p_boot = compare([good], [bad], "ppl", n_samples=200)
    assert p_t < 0.01 and p_boot < 0.01
    p_t, p_boot = compare([bad], [good], "ppl", n_samples=200)
    assert p_t > 0.5 and p_boot > 0.5


def test_lm_entry_point_prints_the_test_perplexity(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "sarnmt",
            "lm",
            *QUICK,
            "lm_model=ngram_lstm",
            "model.hidden_dim=18",
            "trainer.max_steps=5",
            "validation.val_check_interval=5",
            "validation.check_val_every_n_epoch=null",
            f"hydra.run.dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "WANDB_MODE": "disabled"},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "test perplexity = " in run.stdout and "words, 0 of them <unk>" in run.stdout


def test_checkpoints_of_the_other_task_are_refused_in_one_line(smoke_table6):
    lm_checkpoint = next((smoke_table6 / "runs" / "lm_text.lm_lstm.s1" / "checkpoints").glob("epoch*.ckpt"))
    with pytest.raises(CheckpointError, match="holds a language model .* not a translation model"):
        load_model(lm_checkpoint)
    with pytest.raises(CheckpointError, match="holds a translation model, not a language model"):
        load_language_model(ROOT / "tests" / "fixtures" / "release-0ee4d47.ckpt")


def test_params_prints_the_language_models_beside_table6():
    run = subprocess.run(
        [sys.executable, "-m", "sarnmt", "params", "lm_model=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "| lstm | 300 | 300 | 46,999,400 | +0 | d = 300, 47M |" in run.stdout
    assert run.stdout.count("47M") == 5


def test_bench_lm_times_every_row_in_one_run():
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "sarnmt",
            "bench-lm",
            "scale=smoke",
            "steps=2",
            "warmup=1",
            "repeats=1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("| lm_")]
    assert [r.split(" | ")[0][2:] for r in rows] == ROWS and rows[0].endswith("| 1.00x |")
