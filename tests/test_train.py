"""End-to-end training through the pure ``train(cfg)`` with the real configs."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import torch

from sarnmt.cli.train import report
from sarnmt.training.run import train
from tests.conftest import DECODERS, compose_train

SMALL_TOY = [
    "data.n_train=300",
    "data.n_dev=40",
    "data.n_test=40",
    "data.max_tokens=600",
    "model.emb_dim=16",
    "model.hidden_dim=32",
]


@pytest.mark.parametrize("name", DECODERS)
def test_fast_dev_run_every_decoder(name, tmp_path):
    cfg = compose_train([f"decoder={name}", "debug=fdr", *SMALL_TOY], output_dir=tmp_path)
    result = train(cfg)
    assert 0.0 <= result["test_bleu"] <= 100.0
    assert "tok:13a" in result["bleu_signature"] and "version:2.6.0" in result["bleu_signature"]
    assert result["test/loss"] > 0
    assert "test BLEU" in report(result)


@pytest.mark.parametrize("model", ["lstm_fixed_context_tiny", "lstm_ff_attention_tiny", "lstm_input_feeding_tiny"])
def test_fast_dev_run_every_lstm_system(model, tmp_path):
    cfg = compose_train([f"model={model}", "debug=fdr", *SMALL_TOY], output_dir=tmp_path)
    result = train(cfg)
    assert 0.0 <= result["test_bleu"] <= 100.0 and result["test/loss"] > 0
    assert result["parameters"] > 0


def test_train_checkpoints_and_resume(tmp_path):
    overrides = [*SMALL_TOY, "trainer.max_epochs=1", "trainer.enable_progress_bar=false", "~callbacks.progress_bar"]
    first = train(compose_train(overrides, output_dir=tmp_path))
    checkpoints = tmp_path / "checkpoints"
    last = checkpoints / "last.ckpt"
    assert last.is_file() and Path(first["best_model_path"]).is_file()
    state = torch.load(last, map_location="cpu", weights_only=True)
    assert state["sarnmt"]["net_config"]["decoder"]["_target_"].endswith("SelfAttentiveResidual")
    assert state["sarnmt"]["parameters"] == first["parameters"]
    steps_one_epoch = state["global_step"]
    resumed = compose_train([*overrides[:-2], "trainer.max_epochs=2", f"ckpt_path={last}"], output_dir=tmp_path)
    train(resumed)
    state = torch.load(last, map_location="cpu", weights_only=True)
    assert state["global_step"] == 2 * steps_one_epoch  # continued, not restarted


def test_average_last_checkpoints_at_the_end(tmp_path):
    overrides = [
        *SMALL_TOY,
        "trainer.max_epochs=2",
        "trainer.enable_progress_bar=false",
        "~callbacks.progress_bar",
        "callbacks.model_checkpoint.save_top_k=-1",
        "average_last=2",
    ]
    result = train(compose_train(overrides, output_dir=tmp_path))
    averaged = torch.load(result["average_model_path"], map_location="cpu", weights_only=True)
    assert [Path(p).name[:8] for p in averaged["sarnmt"]["averaged_from"]] == ["epoch000", "epoch001"]
    assert 0.0 <= result["test_average/bleu"] <= 100.0 and result["test_average/loss"] > 0
    assert result["test_average/loss"] != result["test/loss"]  # the average, not the best checkpoint again
    assert "averaged checkpoint" in report(result)
    with pytest.raises(ValueError, match=r"average_last=3 needs callbacks.model_checkpoint.save_top_k >= 3 .* is 1"):
        train(compose_train([*SMALL_TOY, "average_last=3"], output_dir=tmp_path / "bad"))


def test_csv_logger_writes_named_metrics(tmp_path):
    cfg = compose_train([*SMALL_TOY, "trainer.max_epochs=1", "trainer.log_every_n_steps=1"], output_dir=tmp_path)
    train(cfg)
    header = next((tmp_path / "csv").rglob("metrics.csv")).read_text().splitlines()[0].split(",")
    for name in ("train/loss", "val/loss", "val/ppl", "val/bleu", "test/bleu"):
        assert name in header


def test_ddp_sim_two_processes(tmp_path):
    cfg = compose_train(
        [
            *SMALL_TOY,
            "trainer=ddp_sim",
            "trainer.max_epochs=1",
            "test=false",
            "trainer.enable_progress_bar=false",
            "~callbacks.progress_bar",
        ],
        output_dir=tmp_path,
    )
    result = train(cfg)
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    assert "val/bleu" in result


def _write(path: Path, lines: list[str], gz: bool = False) -> str:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        path = path.with_suffix(path.suffix + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return str(path)


def test_files_misaligned_fails_before_training(tmp_path):
    src = _write(tmp_path / "train.en", ["a b", "c d", "e"])
    tgt = _write(tmp_path / "train.de", ["x", "y"], gz=True)
    dev = _write(tmp_path / "dev.en", ["a"])
    cfg = compose_train(
        ["data=files", f"data.train_src={src}", f"data.train_tgt={tgt}", f"data.dev_src={dev}", f"data.dev_tgt={dev}"],
        output_dir=tmp_path,
    )
    with pytest.raises(ValueError) as err:
        train(cfg)
    message = str(err.value)
    assert "train.en" in message and "train.de.gz" in message and "3" in message and "2" in message
    assert not (tmp_path / "checkpoints").exists()


def test_files_multi30k_trains_and_validates(shared_data, tmp_path):
    root = shared_data / "multi30k-en-de"
    cfg = compose_train(
        [
            "data=files",
            f"data.train_src={root}/train.en.gz",
            f"data.train_tgt={root}/train.de.gz",
            f"data.dev_src={root}/val.en.gz",
            f"data.dev_tgt={root}/val.de.gz",
            f"data.test_src={root}/test_2016_flickr.en.gz",
            f"data.test_tgt={root}/test_2016_flickr.de.gz",
            "data.vocab_size=2000",
            "model=tiny",
            "trainer.max_steps=5",
            "trainer.val_check_interval=5",
            "trainer.limit_val_batches=1",
            "trainer.limit_test_batches=1",
            "trainer.enable_progress_bar=false",
            "~callbacks.progress_bar",
        ],
        output_dir=tmp_path,
    )
    result = train(cfg)
    assert result["val/loss"] > 0 and "val/bleu" in result and result["test_bleu"] is not None
