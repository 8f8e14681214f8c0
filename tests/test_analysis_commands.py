"""``sarnmt analyze``: every analysis run end to end on two tiny models trained on the toy corpus (a
self-attentive residual decoder and the baseline), and the bad inputs each must name in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sarnmt.analysis import AnalysisError
from sarnmt.analysis.trees import parse_brackets
from sarnmt.cli.analyze import main, run
from sarnmt.cli.translate import translate
from sarnmt.training.run import train
from sarnmt.utils.compose import compose
from tests.conftest import ROOT, compose_train

TOY = ["data.n_train=300", "data.n_dev=30", "data.n_test=30"]
TINY = ["model.emb_dim=16", "model.hidden_dim=32", "data.max_tokens=600"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Checkpoints of a self-attentive residual model and a baseline (one epoch each, seconds), and the toy test
    split as files (``toy_gold``)."""
    root = tmp_path_factory.mktemp("analysis")
    paths = {}
    for name, decoder in (("sa", "self_attentive_content"), ("base", "baseline")):
        overrides = [
            *TOY,
            *TINY,
            f"decoder={decoder}",
            "trainer.max_epochs=1",
            "trainer.enable_progress_bar=false",
            "~callbacks.progress_bar",
            "logger=csv",
            "test=false",
        ]
        train(compose_train(overrides, output_dir=root / name))
        paths[name] = str(root / name / "checkpoints" / "last.ckpt")
    gold = run("toy_gold", [*TOY, f"out_dir={root / 'toy'}"])
    paths.update({ext: str(root / "toy" / f"test.{ext}") for ext in ("src", "ref", "trees")})
    assert [Path(p).name for p in gold["files"]] == ["test.src", "test.ref", "test.trees"]
    return paths


def _translate(ckpt: str, source: str, output: Path, attention: Path | None = None) -> None:
    overrides = [f"ckpt_path={ckpt}", f"input={source}", f"output={output}", "progress=false"]
    translate(compose("translate", overrides + ([f"attention={attention}"] if attention else [])))


def test_every_analysis_runs_on_trained_toy_models_and_writes_its_files(models, tmp_path):
    both = f"ckpts=[{models['sa']},{models['base']}]"
    names = "names=[sa,base]"
    # Figure 3: the baseline's self-attention panel is a note, its source attention is drawn
    fig3 = run("figure3", [both, names, f"source={models['src']}", "sentence=2", f"out_dir={tmp_path / 'f3'}"])
    assert fig3["notes"] == [
        "base: its decoder has no target self-attention (skipped in Figure 3's self-attention panel)"
    ]
    assert [p.name for p in fig3["files"]] == ["figure3_line2.png", "figure3_line2.svg"]
    # Figure 2 on the attention files Figure 3 wrote (checked against their checkpoints and the test set): the
    # baseline is skipped with a note; every prediction after the first of each sentence is counted
    attention = f"attention=[{tmp_path / 'f3' / 'sa.attention.jsonl'},{tmp_path / 'f3' / 'base.attention.jsonl'}]"
    fig2 = run("figure2", [both, names, f"source={models['src']}", attention, f"out_dir={tmp_path / 'f2'}"])
    assert fig2["notes"] == ["base: its decoder has no target self-attention (skipped in Figure 2)"]
    records = [json.loads(line) for line in (tmp_path / "f3" / "sa.attention.jsonl").read_text().splitlines()]
    assert fig2["distributions"]["sa"].predictions == sum(len(r["target"]) - 1 for r in records if r["target"])
    assert {p.name for p in fig2["files"]} == {"figure2.csv", "figure2.png", "figure2.svg"}
    # trees: teacher-forced on the references, scored against the toy's gold trees
    trees = run(
        "trees",
        [
            f"ckpts=[{models['sa']}]",
            "names=[sa]",
            f"source={models['src']}",
            f"target={models['ref']}",
            f"gold={models['trees']}",
            "draw=[1,3]",
            f"out_dir={tmp_path / 'trees'}",
        ],
    )
    scores = trees["scores"]["sa"]
    assert set(scores) == {"algorithm1", "right_branching", "left_branching"}
    assert scores["algorithm1"]["whole"].sentences == 30 and 0 < scores["algorithm1"]["whole"].precision <= 1
    assert "0.56" in trees["report"] and "0.45" in trees["report"]
    refs = Path(models["ref"]).read_text().splitlines()
    ours = (tmp_path / "trees" / "sa.algorithm1.trees").read_text().splitlines()
    assert [parse_brackets(t).leaves() for t in ours] == [r.split() for r in refs]
    assert (tmp_path / "trees" / "sa.tree_line3.png").is_file() and (tmp_path / "trees" / "parseval.json").is_file()
    # Table 7 over the two models' translations
    for name in ("sa", "base"):
        _translate(models[name], models["src"], tmp_path / f"{name}.hyp")
    table = run(
        "table7",
        [
            f"source={models['src']}",
            f"reference={models['ref']}",
            "names=[base,sa]",
            f"hyps=[{tmp_path / 'base.hyp'},{tmp_path / 'sa.hyp'}]",
            f"out_dir={tmp_path / 't7'}",
        ],
    )
    assert "sa better than base" in table["report"] and (tmp_path / "t7" / "table7.html").is_file()
    # the agreement probe on the test split's sentences
    agree = run("agreement", [both, names, f"source={models['src']}", f"out_dir={tmp_path / 'agree'}"])
    assert set(agree["overall"]) == {"sa", "base"} and all(0 <= v["forced"] <= 1 for v in agree["overall"].values())
    assert {p.name for p in agree["files"]} >= {"agreement.csv", "agreement.md", "agreement.png"}


def test_models_without_self_attention_and_mismatched_files_are_named(models, tmp_path):
    src = f"source={models['src']}"
    with pytest.raises(
        AnalysisError,
        match=r"Figure 3's self-attention panel needs a target self-attention, and "
        r"the decoder of .*base.* has none",
    ):
        run("figure3", [f"ckpts=[{models['base']}]", src, "panels=[self]", f"out_dir={tmp_path}"])
    with pytest.raises(AnalysisError, match="Algorithm 1's trees needs a target self-attention"):
        run("trees", [f"ckpts=[{models['base']}]", src, f"out_dir={tmp_path}"])
    sa = [f"ckpts=[{models['sa']}]", src, f"target={models['ref']}", f"out_dir={tmp_path}"]
    short = tmp_path / "short.trees"
    short.write_text("".join(Path(models["trees"]).read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(AnalysisError, match=f"gold trees {short} have 29 lines but there are 30 sentences"):
        run("trees", [*sa, f"gold={short}"])
    # attention of another test set: the dev split has as many lines (30) but other sentences
    dev = tmp_path / "dev.src"
    run("toy_gold", [*TOY, "split=dev", f"out_dir={tmp_path}"])
    _translate(models["sa"], str(dev), tmp_path / "dev.hyp", tmp_path / "dev.jsonl")
    with pytest.raises(AnalysisError, match=r"dev.jsonl line 1: its source tokens .* are not line 1 of"):
        run("figure2", [*sa, f"attention=[{tmp_path / 'dev.jsonl'}]"])
    fewer = tmp_path / "fewer.src"
    fewer.write_text("".join(Path(models["src"]).read_text().splitlines(keepends=True)[:10]))
    with pytest.raises(AnalysisError, match="has 30 records but source .*fewer.src has 10 lines"):
        run("figure2", [f"ckpts=[{models['sa']}]", f"source={fewer}", f"attention=[{tmp_path / 'dev.jsonl'}]"])
    # attention of another model: the baseline's (no self-attention) and a model with other weights, same vocabulary
    _translate(models["base"], models["src"], tmp_path / "b.hyp", tmp_path / "base.jsonl")
    with pytest.raises(AnalysisError, match="line 1: it has no target self-attention, the decoder of .* has"):
        run("figure2", [*sa, f"attention=[{tmp_path / 'base.jsonl'}]"])
    _translate(models["sa"], models["src"], tmp_path / "sa.hyp", tmp_path / "sa.jsonl")
    with pytest.raises(AnalysisError, match=r"sa.jsonl line \d+: its target is not line \d+ of target .*test.ref"):
        run("figure2", [*sa, f"attention=[{tmp_path / 'sa.jsonl'}]"])  # translations, claimed teacher-forced
    checkpoint = torch.load(models["sa"], map_location="cpu", weights_only=True)
    generator = torch.Generator().manual_seed(0)
    checkpoint["state_dict"] = {
        k: v + 0.5 * torch.randn(v.shape, generator=generator) if v.is_floating_point() else v
        for k, v in checkpoint["state_dict"].items()
    }
    torch.save(checkpoint, tmp_path / "other.ckpt")
    with pytest.raises(AnalysisError, match=r"sa.jsonl line \d+: its \w+ differs from what .*other.ckpt gives"):
        run("figure2", [f"ckpts=[{tmp_path / 'other.ckpt'}]", src, f"attention=[{tmp_path / 'sa.jsonl'}]"])


def test_the_command_line_prints_one_error_line_and_its_help(models, tmp_path, capsys):
    assert main(["trees", f"ckpts=[{models['base']}]", f"source={models['src']}", f"out_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: Algorithm 1's trees needs a target self-attention") and "Traceback" not in err
    assert main(["figure2", "source=x"]) == 2 and "error: figure2 needs ckpts=..." in capsys.readouterr().err
    assert main(["figure9"]) == 2 and "unknown analysis 'figure9'" in capsys.readouterr().err
    assert main(["trees", "--help"]) == 0 and "gold: null" in capsys.readouterr().out
    # as a user runs it: a missing checkpoint is one line on stderr, no traceback
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sarnmt",
            "analyze",
            "figure2",
            f"ckpts=[{tmp_path / 'no.ckpt'}]",
            f"source={models['src']}",
            f"out_dir={tmp_path}",
            "typo_key=1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error: Could not override 'typo_key'")
    assert len(proc.stderr.strip().splitlines()) == 1
