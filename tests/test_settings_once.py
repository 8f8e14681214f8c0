"""Each setting is checked once, where it enters (the command's composed config, or a checkpoint's stored one), by one
check with one error type (:class:`~sarnmt.errors.InputError`, from :func:`~sarnmt.errors.check_range`): so every
command that takes a setting refuses it out of range with the same ``error:`` line, naming the key and its range,
exit status 2, before any data or checkpoint is read; and a training run checks its model pair and its two searches
once, not again where it builds them."""

from __future__ import annotations

import io
import sys
from collections import Counter
from collections.abc import Callable

import pytest

from sarnmt.cli.evaluate import evaluate
from sarnmt.cli.score import score
from sarnmt.cli.translate import translate
from sarnmt.decoding import search as search_module
from sarnmt.errors import InputError
from sarnmt.models import factory
from sarnmt.training import run as run_module
from sarnmt.training.run import train
from sarnmt.utils.compose import compose
from tests.cli_helpers import TINY, one_error, run_cli, train_tiny
from tests.conftest import compose_train

PATIENCE = (
    "{key}={value}: must be 1 or more (the validations without improvement that stop training; 0 or less would stop "
    "at the first, as 1 does; to train without early stopping: ~callbacks.early_stopping)"
)


def refusals(capsys, tmp_path, commands: tuple[str, ...], setting: list[str]) -> dict[str, str]:
    """The ``error:`` line of each command given ``setting`` (each asserted to be the only line, exit status 2);
    each command would otherwise start work: read a checkpoint that is not there, or data. ``table7``,
    ``toy_gold`` and ``agreement`` are ``analyze``'s; ``train_files`` and ``train_corpus`` are ``train`` with
    ``data=files`` and with a described corpus (``data=multi30k_en_de``), whose files are not there; ``prepare``
    prepares that corpus."""
    none = tmp_path / "none.txt"
    files = [f"data.{side}={none}" for side in ("train_src", "train_tgt", "dev_src", "dev_tgt")]
    tiny_model = [setting for setting in TINY if not setting.startswith("data.")]
    base = {
        "train": [*TINY, f"hydra.run.dir={tmp_path / 'train'}"],
        "train_files": [*tiny_model, "data=files", *files, f"hydra.run.dir={tmp_path / 'train'}"],
        "train_corpus": [*tiny_model, "data=multi30k_en_de", f"data.root={tmp_path}", f"hydra.run.dir={tmp_path}"],
        "prepare": ["data=multi30k_en_de", f"data.root={tmp_path}", f"paths.cache_dir={tmp_path / 'cache'}"],
        "translate": ["ckpt_path=none.ckpt", "progress=false"],
        "evaluate": ["ckpt_path=none.ckpt", "progress=false", f"hydra.run.dir={tmp_path / 'evaluate'}"],
        "params": [],
        "bench": ["decoders=[baseline]", "systems=[]", "workloads=[multi30k]", "plot=false"],
        "analyze": ["figure2", "ckpts=[none.ckpt]", f"source={tmp_path / 'none.txt'}", f"out_dir={tmp_path / 'an'}"],
        "sweep-job": ["scale=mini", "job=none", f"runs_dir={tmp_path / 'runs'}", f"results_dir={tmp_path / 'res'}"],
        "lm": ["lm_data=mini", f"data.root={tmp_path / 'none'}", f"hydra.run.dir={tmp_path / 'lm'}"],
        "bench-lm": ["scale=smoke"],
        "toy_gold": ["toy_gold", f"out_dir={tmp_path / 'toy'}"],
        "agreement": ["agreement", "ckpts=[none.ckpt]", f"out_dir={tmp_path / 'agreement'}"],
        "score": [f"ref={none}", f"hyps=[{none}]"],
        "table7": ["table7", f"hyps=[{none},{none}]", f"source={none}", f"reference={none}", f"out_dir={tmp_path}"],
    }
    cli = {"table7": "analyze", "toy_gold": "analyze", "agreement": "analyze"}
    cli |= {"train_files": "train", "train_corpus": "train"}
    return {
        name: one_error(run_cli(capsys, cli.get(name, name), [*base[name], *setting], b"ta\n")) for name in commands
    }


@pytest.mark.parametrize(
    "setting,commands,says",
    [
        pytest.param(
            ["decoding=beam", "decoding.beam_size=0"],
            ("train", "translate", "evaluate"),
            "decoding.beam_size=0: must be 1 or more",
            id="beam_size=0",
        ),
        pytest.param(
            ["decoding.max_len_a=nan"],
            ("train", "translate", "evaluate"),
            "decoding.max_len_a=nan: must be a finite number, between 0 and 10.0",
            id="max_len_a=nan",
        ),
        pytest.param(
            ["decoding=beam", "decoding.max_len_a=0", "decoding.max_len_b=3", "decoding.min_len=3"],
            ("train", "translate", "evaluate"),
            "decoding.min_len=3: more than any output can have, so none could end: the longest is 3 tokens, EOS "
            "included (decoding.max_len_a=0, decoding.max_len_b=3); lower min_len",
            id="min_len beyond every output",
        ),
        pytest.param(
            ["model.dropout_readout=1.5"],
            ("train", "params", "bench"),
            "model.dropout_readout=1.5: must be at most 1 (a dropout rate)",
            id="dropout=1.5",
        ),
        pytest.param(
            ["model.hidden_dim=2.5"],
            ("train", "params", "bench"),
            "model.hidden_dim=2.5: must be a whole number, 1 or more",
            id="hidden_dim=2.5",
        ),
        pytest.param(
            ["kernels=fast"],
            ("train", "translate", "evaluate", "bench", "analyze"),
            "kernels='fast' is not a choice: use one of auto, fused, plain (sarnmt/kernels/)",
            id="kernels=fast",
        ),
        pytest.param(
            ["batch_size=0"],
            ("translate", "evaluate", "analyze", "bench"),
            "batch_size=0: must be 1 or more",
            id="batch_size=0",
        ),
        pytest.param(
            ["batch_size=2.5"],
            ("translate", "evaluate", "analyze", "bench"),
            "batch_size=2.5: must be a whole number, 1 or more",
            id="batch_size=2.5",
        ),
        pytest.param(["nbest=0"], ("translate",), "nbest=0: must be 1 or more", id="nbest=0"),
        pytest.param(["nbest=1.5"], ("translate",), "nbest=1.5: must be a whole number, 1 or more", id="nbest=1.5"),
        pytest.param(
            ["max_input_tokens=0"],
            ("translate", "evaluate"),
            "max_input_tokens=0: must be 1 or more",
            id="max_input_tokens=0",
        ),
        pytest.param(
            ["precision=fp16"],
            ("translate", "evaluate"),
            "precision='fp16' is not a choice: use one of fp32, bf16",
            id="precision=fp16",
        ),
        pytest.param(
            ["max_input_tokens=2.5"],
            ("translate", "evaluate"),
            "max_input_tokens=2.5: must be a whole number, between 1 and 4,096",
            id="max_input_tokens=2.5",
        ),
        pytest.param(["chunk_batches=0"], ("translate",), "chunk_batches=0: must be 1 or more", id="chunk_batches=0"),
        pytest.param(
            ["chunk_batches=2.5"],
            ("translate",),
            "chunk_batches=2.5: must be a whole number, 1 or more",
            id="chunk_batches=2.5",
        ),
        pytest.param(
            ["tokenize=bogus"],
            ("score", "table7"),
            "tokenize='bogus' is not a choice: use one of none, 13a, intl, zh, char",
            id="tokenize=bogus",
        ),
        pytest.param(
            ["callbacks.nonfinite.max_consecutive=0"],
            ("train", "lm"),
            "callbacks.nonfinite.max_consecutive=0: must be 1 or more",
            id="max_consecutive=0",
        ),
        pytest.param(
            ["trainer=gpu", "trainer.strategy.max_graphs=0"],
            ("train", "lm"),
            "trainer.strategy.max_graphs=0: must be 1 or more",
            id="max_graphs=0",
        ),
        pytest.param(["data.bptt=0"], ("lm",), "data.bptt=0: must be 1 or more", id="lm data.bptt=0"),
        pytest.param(
            ["data.vocab_max_size=1"],
            ("lm",),
            "data.vocab_max_size=1: must be 2 or more (it counts <eos> and <unk>; null for no limit)",
            id="lm data.vocab_max_size=1",
        ),
        pytest.param(["repeats=0"], ("bench", "bench-lm"), "repeats=0: must be 1 or more", id="repeats=0"),
        pytest.param(
            ["repeats=2.5"],
            ("bench", "bench-lm"),
            "repeats=2.5: must be a whole number, 1 or more",
            id="repeats=2.5",
        ),
        pytest.param(["warmup=-1"], ("bench", "bench-lm"), "warmup=-1: must be 0 or more", id="warmup=-1"),
        pytest.param(["data.max_tokens=0"], ("train",), "data.max_tokens=0: must be 1 or more", id="max_tokens=0"),
        pytest.param(
            ["data.max_len=2.5"],
            ("train",),
            "data.max_len=2.5: must be a whole number, 1 or more",
            id="max_len=2.5",
        ),
        pytest.param(["data.maxi_batch=-1"], ("train",), "data.maxi_batch=-1: must be 0 or more", id="maxi_batch=-1"),
        pytest.param(["data.n_train=0"], ("train",), "data.n_train=0: must be 1 or more", id="n_train=0"),
        pytest.param(
            ["data.n_test=-1"],
            ("train", "toy_gold", "agreement"),
            "data.n_test=-1: must be 0 or more",
            id="n_test=-1",
        ),
        pytest.param(
            ["data.n_dev=2.5"],
            ("train", "toy_gold", "agreement"),
            "data.n_dev=2.5: must be a whole number, 1 or more",
            id="n_dev=2.5",
        ),
        pytest.param(
            ["data.corpus=wiki"],
            ("lm",),
            "data.corpus='wiki' is not a choice: use one of folder, mini, toy",
            id="lm data.corpus=wiki",
        ),
        pytest.param(
            ["eval_batch_size=0"],
            ("sweep-job",),
            "eval_batch_size=0: must be 1 or more",
            id="eval_batch_size=0",
        ),
        pytest.param(
            ["eval_batch_size=2.5"],
            ("sweep-job",),
            "eval_batch_size=2.5: must be a whole number, 1 or more",
            id="eval_batch_size=2.5",
        ),
        pytest.param(
            ["data.max_tokens=null", "data.max_sentences=null"],
            ("train", "train_files", "train_corpus"),
            "data.max_tokens=null and data.max_sentences=null: give one or both (the limits of a training batch)",
            id="max_tokens and max_sentences null",
        ),
        pytest.param(
            ["data.corpus=toy", "data.toy_sizes=[20,0,5]"],
            ("lm",),
            "data.toy_sizes.1=0: must be 1 or more (the lines of the valid split)",
            id="lm data.toy_sizes=[20,0,5]",
        ),
        pytest.param(
            ["data.corpus=toy", "data.toy_sizes=[20,5]"],
            ("lm",),
            "data.toy_sizes=[20, 5]: must be three line counts (train, valid and test)",
            id="lm data.toy_sizes=[20,5]",
        ),
        pytest.param(
            ["data.corpus=toy", "data.toy_sizes=[20,2.5,5]"],
            ("lm",),
            "data.toy_sizes.1=2.5: must be a whole number, 1 or more",
            id="lm data.toy_sizes=[20,2.5,5]",
        ),
        pytest.param(
            ["loss=tokens"],
            ("train",),
            "loss='tokens' is not a choice: use one of sentence, token",
            id="loss=tokens",
        ),
        pytest.param(["optim.rho=1.5"], ("train",), "optim.rho=1.5: must be at most 1 (a decay rate)", id="rho=1.5"),
        pytest.param(["optim.eps=-1"], ("train", "lm"), "optim.eps=-1: must be 0 or more", id="eps=-1"),
        pytest.param(
            ["optim.weight_decay=nan"],
            ("train", "lm"),
            "optim.weight_decay=nan: must be a finite number, 0 or more",
            id="weight_decay=nan",
        ),
        pytest.param(
            ["optim=adam", "optim.betas.1=1"],
            ("train", "lm"),
            "optim.betas.1=1: must be less than 1 (a decay rate)",
            id="betas.1=1",
        ),
        pytest.param(
            ["optim=adam", "optim.betas=[0.9]"],
            ("train", "lm"),
            "optim.betas=[0.9]: must be two decay rates (the gradient's and its square's)",
            id="betas=[0.9]",
        ),
        pytest.param(
            ["model.init_std=0"],
            ("train", "params", "bench", "lm"),
            "model.init_std=0: must be more than 0 (the spread of the initial weights)",
            id="init_std=0",
        ),
        pytest.param(
            ["model.dropout=1.5"], ("lm",), "model.dropout=1.5: must be at most 1 (a dropout rate)", id="lm dropout=1.5"
        ),
        pytest.param(["model.hidden_dim=0"], ("lm",), "model.hidden_dim=0: must be 1 or more", id="lm hidden_dim=0"),
        pytest.param(
            ["decoder=mean_residual", "decoder.first_step=last"],
            ("train", "params"),
            "decoder.first_step='last' is not a choice: use one of zero_slot, paper",
            id="first_step=last",
        ),
        pytest.param(
            ["decoder=self_attentive_content", "decoder.scorer=scope"],
            ("train", "params"),
            "decoder.scorer='scope' is not a choice: use one of content, content_scope",
            id="scorer=scope",
        ),
        pytest.param(
            ["decoder=memory_rnn", "decoder.form=paper"],
            ("train", "params"),
            "decoder.form='paper' is not a choice: use one of count_consistent, appendix",
            id="form=paper",
        ),
        pytest.param(
            ["data.vocab_size=2"],
            ("train_files", "train_corpus"),
            "data.vocab_size=2: must be 3 or more (it counts </s> and <unk>)",
            id="vocab_size=2",
        ),
        pytest.param(
            ["data.vocab_size=2.5"],
            ("train_files", "train_corpus"),
            "data.vocab_size=2.5: must be a whole number, 3 or more",
            id="vocab_size=2.5",
        ),
        pytest.param(
            ["data.test_src=none.txt"],
            ("train_files",),
            "data.test_tgt=null: give it with data.test_src, or neither (a test pair of files)",
            id="test_src without test_tgt",
        ),
        pytest.param(
            ["callbacks.resume_checkpoint.every_n_train_steps=10"],
            ("train", "lm"),
            "callbacks.resume_checkpoint.every_n_train_steps=10: give it or "
            "callbacks.resume_checkpoint.train_time_interval, the other null (both are given)",
            id="resume_checkpoint both given",
        ),
        pytest.param(
            [
                "callbacks.resume_checkpoint.train_time_interval=null",
                "callbacks.resume_checkpoint.every_n_train_steps=0",
            ],
            ("train", "lm"),
            "callbacks.resume_checkpoint.every_n_train_steps=0: must be 1 or more",
            id="resume_checkpoint every_n_train_steps=0",
        ),
        pytest.param(
            ["data.corpus=bogus"],
            ("train_corpus", "prepare"),
            "data.corpus='bogus' is not a choice: use one of es_en, en_de, en_zh, multi30k_en_de, multi30k_de_en, "
            "mini_es_en, mini_en_de, mini_en_zh, tatoeba_es_en, tatoeba_en_zh (sarnmt/data/corpora/catalog.py)",
            id="corpus=bogus",
        ),
        pytest.param(
            ["data.src.case=upper"],
            ("train_corpus", "prepare"),
            "data.src.case='upper' is not a choice: use one of truecase, lowercase, keep",
            id="src.case=upper",
        ),
        pytest.param(
            ["data.tgt.segmenter=spacy"],
            ("train_corpus", "prepare"),
            "data.tgt.segmenter='spacy' is not a choice: use one of moses, jieba",
            id="tgt.segmenter=spacy",
        ),
        pytest.param(
            ["data.src.normalize=maybe"],
            ("train_corpus", "prepare"),
            "data.src.normalize='maybe': must be true or false",
            id="src.normalize=maybe",
        ),
        pytest.param(
            ["+data.src.lowercase=true"],
            ("train_corpus", "prepare"),
            "data.src.lowercase: not a setting of a side: use lang, normalize, aggressive_dash_splits, case, segmenter",
            id="src.lowercase (a typo of case)",
        ),
        pytest.param(
            ["data.tgt.lang=german"],
            ("train_corpus", "prepare"),
            "data.tgt.lang='german': must be a language code as the Moses tools take it (ISO 639: en, de, es, zh)",
            id="tgt.lang=german",
        ),
        pytest.param(
            ["data.src.lang=null"],
            ("train_corpus", "prepare"),
            "data.src.lang is required: a language code as the Moses tools take it (ISO 639: en, de, es, zh)",
            id="src.lang=null",
        ),
        pytest.param(
            ["data.joint_vocab=maybe"],
            ("train_files", "train_corpus", "prepare"),
            "data.joint_vocab='maybe': must be true or false",
            id="joint_vocab=maybe",
        ),
        pytest.param(
            ["optim=adadelta", "optim.compiled=maybe"],
            ("train", "lm"),
            "optim.compiled='maybe': must be true or false",
            id="compiled=maybe",
        ),
        pytest.param(
            ["callbacks.early_stopping.patience=-1"],
            ("train", "lm"),
            PATIENCE.format(key="callbacks.early_stopping.patience", value=-1),
            id="early_stopping.patience=-1",
        ),
        pytest.param(
            ["validation.patience=0"],
            ("train", "lm"),
            PATIENCE.format(key="validation.patience", value=0),
            id="validation.patience=0",
        ),
        pytest.param(
            ["validation.patience=2.5"],
            ("train", "lm"),
            "validation.patience=2.5: must be a whole number, 1 or more",
            id="validation.patience=2.5",
        ),
    ],
)
def test_every_command_refuses_a_setting_out_of_range_with_the_same_line(capsys, tmp_path, setting, commands, says):
    lines = refusals(capsys, tmp_path, commands, setting)
    assert lines == dict.fromkeys(commands, f"error: {says}")
    assert not list(tmp_path.rglob("*.ckpt"))  # refused before any training


def test_a_setting_out_of_range_is_an_input_error_in_the_library_too(tmp_path):
    """The error behind the line is the one type, where the setting enters a training run in-process (the sweeps and
    the tests call :func:`~sarnmt.training.run.train`)."""
    for setting in (["decoding=beam", "decoding.beam_size=0"], ["model.dropout_embeddings=-0.1"]):
        with pytest.raises(InputError):
            train(compose_train([*TINY, *setting], output_dir=tmp_path))


def test_a_training_run_checks_its_pair_and_searches_once(monkeypatch, tmp_path):
    """One update of a training run: the model pair (:func:`~sarnmt.models.factory.check_model`) and each search's
    settings (:func:`~sarnmt.decoding.search.check_decoding`) are checked once, before the data is read; building the
    model and the LightningModule checks nothing again."""
    calls: dict[str, list] = {"pair": [], "decoding": []}
    pair, decoding = factory.check_combination, search_module.check_decoding
    monkeypatch.setattr(factory, "check_combination", lambda *a: calls["pair"].append(a) or pair(*a))
    monkeypatch.setattr(search_module, "check_decoding", lambda *a: calls["decoding"].append(a[1]) or decoding(*a))
    built = []
    real_build = run_module.build_module
    monkeypatch.setattr(run_module, "build_module", lambda *a: built.append(len(calls["pair"])) or real_build(*a))
    train(compose_train([*TINY, "trainer.max_steps=1", "decoding=beam"], output_dir=tmp_path))
    assert len(calls["pair"]) == 1 and built == [1]  # checked before the module was built, not while
    assert calls["decoding"] == ["val_decoding", "decoding"]


CHECKS = ("check_range", "check_flag", "check_one_of")  # the one form of each check; each names its setting


def counted_checks(monkeypatch) -> Counter:
    """Every check of a setting from now on, counted by the setting's key: each of :data:`CHECKS` replaced, in every
    ``sarnmt`` module that has it (its own or imported), by one that counts and then checks."""
    seen: Counter = Counter()

    def counting(check: Callable, name: str) -> Callable:
        def counted(*args, **kwargs):
            key = args[0] if args else None
            seen[key] += 1
            return check(*args, **kwargs)

        return counted

    for module_name, module in list(sys.modules.items()):
        if module_name == "sarnmt" or module_name.startswith("sarnmt."):
            for name in CHECKS:
                check = getattr(module, name, None)
                if callable(check):
                    monkeypatch.setattr(module, name, counting(check, name))
    return seen


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("tiny"))


def test_translate_evaluate_and_score_check_each_setting_once(monkeypatch, tmp_path, tiny_checkpoint):
    """A whole command in-process: every setting it takes is checked once, where it enters, and not again by what
    decodes (the stream's batch sizes, the input limit, the kernel choice, the precision context, the length limit,
    BLEU's tokenizer and resample counts)."""
    seen = counted_checks(monkeypatch)
    beam = [f"ckpt_path={tiny_checkpoint}", "progress=false", "decoding=beam", "device=cpu"]
    translate(compose("translate", [*beam, "nbest=2"]), io.StringIO("ta brin\n\nnu gorm\n"), io.StringIO())
    assert seen and all(count == 1 for count in seen.values()), dict(seen)
    for key in (
        "batch_size",
        "chunk_batches",
        "kernels",
        "precision",
        "max_input_tokens",
        "max_line_bytes",
        "decoding.beam_size",
    ):
        assert seen[key] == 1, key

    seen.clear()
    toy = ["data.n_train=200", "data.n_dev=20", "data.n_test=20", f"output_dir={tmp_path / 'eval'}"]
    evaluate(compose("evaluate", [*beam, *toy]))
    assert seen and all(count == 1 for count in seen.values()), dict(seen)
    assert {"batch_size", "kernels", "precision", "max_input_tokens"} <= set(seen)

    seen.clear()
    ref, hyp = tmp_path / "ref.txt", tmp_path / "hyp.txt"
    ref.write_text("the cat sat on the mat\n" * 4)
    hyp.write_text("the cat sat on a mat\n" * 4)
    score(compose("score", [f"ref={ref}", f"hyps=[{ref},{hyp}]", "n_bootstrap=20", "n_randomization=20"]))
    assert dict(seen) == {"n_bootstrap": 1, "n_randomization": 1, "tokenize": 1}
