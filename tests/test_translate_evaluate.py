"""Checkpoint loading, averaging, ``translate`` and ``evaluate`` on a tiny model trained on the toy corpus."""

from __future__ import annotations

import argparse
import io
import json
import logging

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from sarnmt.checkpoints.averaging import average_checkpoints
from sarnmt.checkpoints.reading import CheckpointError, load_model, net_state_dict, read_checkpoint
from sarnmt.cli.average import average
from sarnmt.cli.evaluate import evaluate, summary
from sarnmt.cli.translate import translate
from sarnmt.data.text.codecs import UNK
from sarnmt.decoding.beam import BeamSearch
from sarnmt.errors import InputError
from sarnmt.training.lit_module import TranslationModule
from sarnmt.training.run import train
from sarnmt.utils.precision import native_bf16
from tests.conftest import CONF_DIR, ROOT, compose_train

TOY = ["data.n_train=300", "data.n_dev=30", "data.n_test=30", "data.max_tokens=600"]
TINY = ["model.emb_dim=16", "model.hidden_dim=32"]


def compose_tool(name: str, overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny self-attentive model trained for one epoch; its test BLEU with greedy search."""
    out = tmp_path_factory.mktemp("run")
    overrides = [
        *TOY,
        *TINY,
        "trainer.max_epochs=1",
        "trainer.enable_progress_bar=false",
        "~callbacks.progress_bar",
        "logger=csv",
    ]
    result = train(compose_train(overrides, output_dir=out))
    return out / "checkpoints" / "last.ckpt", result


def test_load_model_rebuilds_model_and_codecs(trained):
    path, result = trained
    loaded = load_model(path)
    assert loaded.parameters == result["parameters"] and not loaded.net.training
    assert loaded.src_codec.encode("a b") and loaded.tgt_codec.vocab_size == loaded.net_config["tgt_vocab_size"]
    state = net_state_dict(read_checkpoint(path))
    assert all(torch.equal(state[k], v) for k, v in loaded.net.state_dict().items())


def test_checkpoint_errors_say_which(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(tmp_path / "missing.ckpt")
    corrupt = tmp_path / "corrupt.ckpt"
    corrupt.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(corrupt)
    other = tmp_path / "other.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, other)
    with pytest.raises(CheckpointError, match="not a sarnmt checkpoint"):
        load_model(other)
    pickled = tmp_path / "pickled.ckpt"
    torch.save({"sarnmt": argparse.Namespace(x=1)}, pickled)  # arbitrary objects are refused, not unpickled
    with pytest.raises(CheckpointError, match="not a sarnmt checkpoint"):
        load_model(pickled)


def test_average_of_checkpoints_is_the_mean_and_loads(trained, tmp_path):
    path, _ = trained
    original = torch.load(path, map_location="cpu", weights_only=True)
    shifted = dict(
        original, state_dict={k: v + 2.0 if v.is_floating_point() else v for k, v in original["state_dict"].items()}
    )
    folder = tmp_path / "ckpts"
    folder.mkdir()
    torch.save(original, folder / "a.ckpt")
    torch.save(dict(shifted, global_step=original["global_step"] + 1), folder / "b.ckpt")
    averaged = average_checkpoints([folder / "a.ckpt", folder / "b.ckpt"], tmp_path / "avg.ckpt")
    for name, value in original["state_dict"].items():
        torch.testing.assert_close(averaged["state_dict"][name], value + 1.0)
    assert "optimizer_states" not in averaged and len(averaged["sarnmt"]["averaged_from"]) == 2
    assert load_model(tmp_path / "avg.ckpt").parameters > 0
    out = average(compose_tool("average", [f"dir={folder}", "last=2", f"output={tmp_path / 'avg2.ckpt'}"]))
    torch.testing.assert_close(read_checkpoint(out)["state_dict"], averaged["state_dict"])
    with pytest.raises(ValueError, match="has 2"):
        average(compose_tool("average", [f"dir={folder}", "last=3", f"output={tmp_path / 'x.ckpt'}"]))


def test_translate_keeps_line_count_and_writes_attention(trained, tmp_path):
    path, _ = trained
    text = "a b c\n\n   \nd e f g\na\n"
    (tmp_path / "in.txt").write_text(text)
    cfg = compose_tool(
        "translate",
        [
            f"ckpt_path={path}",
            f"input={tmp_path / 'in.txt'}",
            f"output={tmp_path / 'o.txt'}",
            f"attention={tmp_path / 'att.jsonl'}",
            "decoding=beam",
            "decoding.beam_size=3",
            "batch_size=2",
            "progress=false",
        ],
    )
    assert translate(cfg) == 5
    lines = (tmp_path / "o.txt").read_text().split("\n")
    assert len(lines) == 6 and lines[-1] == "" and lines[1] == lines[2] == ""
    records = [json.loads(line) for line in (tmp_path / "att.jsonl").read_text().splitlines()]
    assert [r["line"] for r in records] == list(range(5)) and records[1]["src_attention"] is None
    first = records[0]
    assert len(first["src_attention"]) == len(first["target"]) and len(first["src_attention"][0]) == 4  # a b c </s>
    assert all(abs(sum(row) - 1.0) < 1e-5 for row in first["src_attention"])
    assert len(first["tgt_attention"]) == len(first["target"])
    # stdin/stdout, greedy (the default) equals beam 1
    out_greedy, out_beam1 = io.StringIO(), io.StringIO()
    translate(compose_tool("translate", [f"ckpt_path={path}", "progress=false"]), io.StringIO(text), out_greedy)
    translate(
        compose_tool("translate", [f"ckpt_path={path}", "progress=false", "decoding=beam", "decoding.beam_size=1"]),
        io.StringIO(text),
        out_beam1,
    )
    assert out_greedy.getvalue() == out_beam1.getvalue() and out_greedy.getvalue().count("\n") == 5
    # bf16 autocast decodes too where the CPU multiplies bfloat16 (same line count; the words may differ from
    # fp32's); elsewhere it is one error naming what the CPU lacks. A typo is named.
    out_bf16 = io.StringIO()
    bf16 = compose_tool("translate", [f"ckpt_path={path}", "progress=false", "precision=bf16", "device=cpu"])
    if native_bf16(torch.device("cpu")):
        translate(bf16, io.StringIO(text), out_bf16)
        assert out_bf16.getvalue().count("\n") == 5
    else:
        with pytest.raises(InputError, match=r"^precision=bf16: this cpu has no AVX-512 BF16 or AMX"):
            translate(bf16, io.StringIO(text), out_bf16)
        assert out_bf16.getvalue() == ""
    with pytest.raises(ValueError, match=r"^precision='fp16' is not a choice: use one of fp32, bf16$"):
        translate(
            compose_tool("translate", [f"ckpt_path={path}", "progress=false", "precision=fp16"]),
            io.StringIO(text),
            io.StringIO(),
        )


def test_evaluate_matches_the_training_test_and_records_everything(trained, tmp_path):
    path, result = trained
    cfg = compose_tool(
        "evaluate", [f"ckpt_path={path}", *TOY, "decoding=greedy", f"output_dir={tmp_path}", "progress=false"]
    )
    record = evaluate(cfg)
    assert record["bleu"]["score"] == pytest.approx(result["test/bleu"], abs=1e-4)  # same search, same BLEU
    assert "tok:13a" in record["bleu"]["signature"] and "tok:none" in record["bleu_tokenized"]["signature"]
    assert "case:lc" in record["bleu_tokenized_lc"]["signature"] and record["chrf"]["score"] >= 0
    assert record["parameters"] == result["parameters"] and record["decoding"]["search"] == "greedy"
    assert record["precision"] == "fp32"
    capture = record["capture"]  # a CPU launches every step: not captured, and the record says why
    assert not capture["captured"] and capture["graphs"] == 0
    assert "a search on cpu launches every step" in capture["why"]
    assert len((tmp_path / "hypotheses.test.txt").read_text().splitlines()) == 30
    assert json.loads((tmp_path / "eval.test.json").read_text())["sentences"] == 30
    assert "BLEU (13a" in summary(record)
    beam = evaluate(
        compose_tool(
            "evaluate", [f"ckpt_path={path}", *TOY, f"output_dir={tmp_path}", "progress=false", "decoding.beam_size=2"]
        )
    )
    assert beam["decoding"] == {
        "search": "beam",
        "beam_size": 2,
        "length_penalty": {"alpha": 1.0, "offset": 0.0},
        "max_len_a": 2.0,
        "max_len_b": 10,
        "min_len": 0,
    }


def test_training_test_pass_decodes_with_the_configured_search(trained, tmp_path):
    """The LightningModule's test pass goes through the same search objects as ``evaluate``."""
    path, _ = trained
    loaded = load_model(path)
    datamodule = instantiate(compose_train(TOY).data)
    module = TranslationModule(loaded.net, optimizer=torch.optim.SGD, test_search=BeamSearch(beam_size=2))
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    metrics = trainer.test(module, datamodule=datamodule, verbose=False)[0]
    record = evaluate(
        compose_tool(
            "evaluate", [f"ckpt_path={path}", *TOY, f"output_dir={tmp_path}", "progress=false", "decoding.beam_size=2"]
        )
    )
    assert metrics["test/bleu"] == pytest.approx(record["bleu"]["score"], abs=1e-4)


def test_translate_nbest_lists_k_hypotheses_per_line_best_first(trained, tmp_path):
    path, _ = trained
    text = "a b c\n\nd e f g\n"
    out, one_best = io.StringIO(), io.StringIO()
    beam = [f"ckpt_path={path}", "progress=false", "decoding=beam", "decoding.beam_size=4"]
    translate(compose_tool("translate", [*beam, "nbest=3"]), io.StringIO(text), out)
    translate(compose_tool("translate", beam), io.StringIO(text), one_best)
    rows = [line.split(" ||| ") for line in out.getvalue().splitlines()]
    assert all(len(row) == 4 for row in rows)
    by_line: dict[int, list[list[str]]] = {}
    for row in rows:
        by_line.setdefault(int(row[0]), []).append(row)
    assert sorted(by_line) == [0, 1, 2] and len(by_line[0]) == len(by_line[2]) == 3
    assert by_line[1] == [["1", "", "0.000000", "0.000000"]]  # an empty line: one empty entry
    for index, best in zip((0, 2), one_best.getvalue().splitlines()[::2], strict=True):
        entries = by_line[index]
        assert entries[0][1] == best  # the first entry is the 1-best translation
        normalized = [float(e[3]) for e in entries]
        assert normalized == sorted(normalized, reverse=True)
        assert len({e[1] for e in entries}) == 3
    with pytest.raises(InputError, match=r"^nbest=5: must be at most the beam size, 4 \(decoding=beam"):
        translate(compose_tool("translate", [*beam, "nbest=5"]), io.StringIO(text), io.StringIO())
    # the search rule from the command line (docs/models.md §Decoding): the shipped one, named, decodes the same
    named = io.StringIO()
    rule = "+decoding.rule={_target_: sarnmt.decoding.rule.BeamRule, _partial_: true}"
    translate(compose_tool("translate", [*beam, rule]), io.StringIO(text), named)
    assert named.getvalue() == one_best.getvalue()


def test_a_checkpoint_written_by_the_first_release_still_loads_and_decodes_the_same():
    """tests/fixtures/release-0ee4d47.ckpt was written by sarnmt 0ee4d47 (before the model factory and the LSTM
    systems); the model rebuilt from it computes what that release computed."""
    from sarnmt.data.loading.batching import pad_sequences
    from sarnmt.decoding.beam import beam_decode
    from sarnmt.decoding.greedy import greedy_decode

    fixtures = ROOT / "tests" / "fixtures"
    expected = json.loads((fixtures / "release-0ee4d47.json").read_text())
    loaded = load_model(fixtures / "release-0ee4d47.ckpt")
    src, src_mask = pad_sequences(expected["sources"])
    b = expected["max_len_b"]
    assert greedy_decode(loaded.net, src, src_mask, 0.0, b).tokens == expected["greedy"]
    beam = beam_decode(loaded.net, src, src_mask, 3, max_len_a=0.0, max_len_b=b)
    assert beam.tokens == expected["beam3"]
    # written on another CPU (tests/fixtures/README.md): tokens exact, float32 numbers within 1e-5 relative (the
    # logits' sum may cancel: its tolerance is 1e-5 of the abs sum)
    assert beam.normalized_scores == pytest.approx(expected["beam3_normalized"], rel=1e-5)
    with torch.no_grad():
        logits = loaded.net(src, src_mask, pad_sequences(expected["targets"])[0]).logits.double()
    tolerance = 1e-5 * expected["logits_abs_sum"]
    assert logits.sum().item() == pytest.approx(expected["logits_sum"], abs=tolerance)
    assert logits.abs().sum().item() == pytest.approx(expected["logits_abs_sum"], abs=tolerance)
    assert [loaded.tgt_codec.decode(t) for t in expected["greedy"]] == expected["decoded_greedy"]


def test_checkpoint_of_an_unknown_or_incompatible_model_is_named(trained, tmp_path):
    path, _ = trained
    original = torch.load(path, map_location="cpu", weights_only=True)

    def holding(model_target: str, name: str) -> None:  # the checkpoint, its stored model replaced
        info = json.loads(json.dumps(original["sarnmt"]))
        info["net_config"]["model"]["_target_"] = model_target
        torch.save(dict(original, sarnmt=info), tmp_path / name)

    holding("sarnmt.models.transformer.Transformer", "unknown.ckpt")
    with pytest.raises(
        CheckpointError,
        match=r"unknown.ckpt: sarnmt.net_config.model._target_='sarnmt.models.transformer.Transformer' is not a "
        r"class this installation has",
    ):
        load_model(tmp_path / "unknown.ckpt")
    holding("sarnmt.models.lstm.InputFeedingLSTM", "mismatched.ckpt")
    with pytest.raises(
        CheckpointError,
        match=r"mismatched.ckpt holds model .*InputFeedingLSTM.* with decoder .*"
        r"SelfAttentiveResidual.*valid decoder= options for this model: none",
    ):
        load_model(tmp_path / "mismatched.ckpt")


@pytest.mark.parametrize("model", ["lstm_fixed_context_tiny", "lstm_input_feeding_tiny"])
def test_lstm_checkpoints_translate_and_evaluate(model, tmp_path):
    """A new model family goes through the same tools: translate (with attention and n-best output) and evaluate."""
    overrides = [
        *TOY,
        f"model={model}",
        "model.emb_dim=16",
        "model.hidden_dim=24",
        "trainer.max_epochs=1",
        "trainer.enable_progress_bar=false",
        "~callbacks.progress_bar",
        "logger=csv",
    ]
    result = train(compose_train(overrides, output_dir=tmp_path / "run"))
    path = tmp_path / "run" / "checkpoints" / "last.ckpt"
    loaded = load_model(path)
    assert loaded.parameters == result["parameters"] and loaded.net_config["model"]["_target_"].endswith("LSTM")
    text = "a b c\n\nd e f g\n"
    out = io.StringIO()
    cfg = compose_tool(
        "translate",
        [
            f"ckpt_path={path}",
            "progress=false",
            "decoding=beam",
            "decoding.beam_size=3",
            "nbest=2",
            f"attention={tmp_path / 'att.jsonl'}",
        ],
    )
    assert translate(cfg, io.StringIO(text), out) == 3
    assert {line.split(" ||| ")[0] for line in out.getvalue().splitlines()} == {"0", "1", "2"}
    records = [json.loads(line) for line in (tmp_path / "att.jsonl").read_text().splitlines()]
    if model == "lstm_fixed_context_tiny":  # no source attention to write
        assert all(r["src_attention"] is None for r in records)
    else:
        assert all(abs(sum(row) - 1.0) < 1e-5 for row in records[0]["src_attention"])
    record = evaluate(
        compose_tool(
            "evaluate", [f"ckpt_path={path}", *TOY, f"output_dir={tmp_path}", "progress=false", "decoding=greedy"]
        )
    )
    assert record["parameters"] == result["parameters"] and 0 <= record["bleu"]["score"] <= 100


def test_translate_says_when_much_of_the_input_is_unknown(trained, tmp_path, caplog):
    """More than ``unknown_warning`` of the input's source tokens are <unk>: one warning naming the input file."""
    path, _ = trained
    codec = load_model(path, torch.device("cpu")).src_codec
    known = [codec.decode([i]) for i in range(2, 12)]  # ids 0 and 1 are </s> and <unk>
    assert UNK not in codec.encode(" ".join(known))
    (tmp_path / "known.txt").write_text(" ".join(known) + "\n")
    (tmp_path / "foreign.txt").write_text(f"zqxv wkjh {known[0]}\nhello world\n")

    def warnings(name: str, *overrides: str) -> list[str]:
        caplog.clear()
        cfg = compose_tool("translate", [f"ckpt_path={path}", f"input={tmp_path / name}", "progress=false", *overrides])
        with caplog.at_level(logging.WARNING, logger="sarnmt"):
            translate(cfg, stdout=io.StringIO())
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]

    assert warnings("known.txt") == []
    (line,) = warnings("foreign.txt")
    assert line.startswith(f"{tmp_path / 'foreign.txt'}: 4 of 5 source tokens (80.0%) are unknown to the model")
    assert warnings("foreign.txt", "unknown_warning=0.8") == []  # above the threshold, not at it
    assert warnings("foreign.txt", "unknown_warning=null") == []
    with pytest.raises(InputError, match=r"unknown_warning=2: must be a share between 0 and 1, or null"):
        warnings("foreign.txt", "unknown_warning=2")
