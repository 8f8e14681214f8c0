"""Checkpoints written before the training side moved to ``sarnmt/training/`` still work:
``tests/fixtures/before-i30-572ef88*.ckpt`` were written by sarnmt 572ef88 (``tests/fixtures/write_before_i30.py``),
when the Lightning modules, the optimiser, checkpoints and resume sat at the top of ``sarnmt/``, the language model in
``sarnmt/models/lm/`` and ``sarnmt/data/``, and the commands were top-level modules. Run as a user runs them
(``sarnmt <command>``), they translate as they did then, the language model computes the same scores, and both runs
resume: their stored identity (which names the optimiser's, the language model's and its data's classes) is still
this run's."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from tests.cli_helpers import run_cli
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
CKPT = FIXTURES / "before-i30-572ef88.ckpt"
LM_CKPT = FIXTURES / "before-i30-572ef88-lm.ckpt"
EXPECTED = json.loads((FIXTURES / "before-i30-572ef88.json").read_text())


def test_a_translation_checkpoint_from_before_the_move_translates_as_it_did(capsys):
    greedy = run_cli(
        capsys, "translate", [f"ckpt_path={CKPT}", "progress=false", "device=cpu"], EXPECTED["text"].encode()
    )
    assert greedy.code == 0, greedy.err[-3000:]
    assert greedy.out == EXPECTED["greedy"]
    beam = run_cli(
        capsys,
        "translate",
        [f"ckpt_path={CKPT}", "progress=false", "device=cpu", "decoding=beam", "decoding.beam_size=3", "nbest=2"],
        EXPECTED["text"].encode(),
    )
    assert beam.code == 0, beam.err[-3000:]
    assert beam.out == EXPECTED["beam3_nbest2"]


def test_a_language_model_checkpoint_from_before_the_move_scores_as_it_did():
    from sarnmt.checkpoints.reading import load_language_model

    net, vocab = load_language_model(LM_CKPT)
    assert len(vocab) == EXPECTED["lm_vocab_size"]
    with torch.no_grad():
        logits = net(torch.tensor(EXPECTED["lm_input"])).logits.double()
    # written on another CPU: float32 logits within 1e-5 of their magnitude (another instruction set sums each
    # product in another order, a few units of the 7th digit); the sum may cancel, so its tolerance is the abs sum's
    tolerance = 1e-5 * EXPECTED["lm_logits_abs_sum"]
    assert logits.sum().item() == pytest.approx(EXPECTED["lm_logits_sum"], abs=tolerance)
    assert logits.abs().sum().item() == pytest.approx(EXPECTED["lm_logits_abs_sum"], abs=tolerance)


@pytest.mark.parametrize(
    ("command", "checkpoint", "overrides"),
    [("train", CKPT, EXPECTED["train"]), ("lm", LM_CKPT, EXPECTED["lm"])],
    ids=["translation", "lm"],
)
def test_a_run_from_before_the_move_resumes(capsys, tmp_path, command, checkpoint, overrides):
    """The stored identity holds ``optim._target_`` (and a language model's ``model._target_`` and
    ``data._target_``) as they were named then: the resumed run is the same run, and trains one more update."""
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    shutil.copyfile(checkpoint, out / "checkpoints" / "last.ckpt")
    resumed = [
        *[o for o in overrides if not o.startswith(("trainer.max_steps=", "callbacks.resume_checkpoint."))],
        "trainer.max_steps=4",
        "callbacks.resume_checkpoint.train_time_interval=null",
        "callbacks.resume_checkpoint.every_n_train_steps=1",
        f"ckpt_path={out / 'checkpoints' / 'last.ckpt'}",
        f"hydra.run.dir={out}",
        f"paths.output_dir={out}",
    ]
    outcome = run_cli(capsys, command, resumed)
    assert outcome.code == 0, outcome.err[-3000:]
    assert "belongs to another run" not in outcome.err
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 4
