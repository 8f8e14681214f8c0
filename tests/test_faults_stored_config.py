"""A checkpoint is data, not code: a stored model config naming a class outside the allow-list (top level, nested or
under an interpolation), or reading the environment through an interpolation, is refused by ``translate``,
``evaluate``, ``average`` and a resumed ``train`` with one ``error:`` line naming the key, exit status 2, and nothing
built or written; a decoder of one's own loads only with ``trust_targets=``; the sizes a checkpoint claims are
compared with its tensors on the ``meta`` device before anything is allocated (:mod:`sarnmt.checkpoints.stored_config`,
:mod:`sarnmt.checkpoints.reading`)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from sarnmt.checkpoints import reading as checkpoint_module
from sarnmt.checkpoints.reading import CheckpointError, load_language_model, load_model
from sarnmt.checkpoints.stored_config import (
    MODEL_GROUPS,
    StoredConfigError,
    allowed_targets,
    check_stored_config,
    check_trust,
    targets_of,
)
from sarnmt.utils.compose import config_dir
from sarnmt.utils.hash_view import MOVED_TARGETS
from tests.cli_helpers import TINY, one_error, run_cli, train_tiny
from tests.conftest import ROOT

pytestmark = pytest.mark.faults
LINES = b"ta brin blorp\nnu gorm\nta vosk\n"


def write_text(marker: Path) -> dict:
    """A config node that, instantiated by Hydra, writes ``marker`` (hydra-core blocks os.system, not this)."""
    return {
        "_target_": "pathlib.Path.write_text",
        "self": {"_target_": "pathlib.Path", "_args_": [str(marker)]},
        "data": "pwned",
    }


def payload_string(marker: Path) -> str:
    """The same node inside an interpolation (``oc.create`` builds a node from the string when it is resolved)."""
    node = f"{{_target_: pathlib.Path.write_text, self: {{_target_: pathlib.Path, _args_: [{marker}]}}, data: pwned}}"
    return f"${{oc.create:{node}}}"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("tiny"))


def edited(good: Path, out: Path, change) -> Path:
    """A copy of checkpoint ``good`` whose stored ``net_config`` ``change`` edited in place."""
    checkpoint = torch.load(good, weights_only=True)
    change(checkpoint["sarnmt"]["net_config"])
    torch.save(checkpoint, out)
    return out


def hostile_cases(good: Path, folder: Path) -> dict[str, tuple[Path, str, Path]]:
    """``{case: (checkpoint, the key its refusal names, the file it would write)}``."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "pwned.txt"

    def top(net):
        net["decoder"] = write_text(marker)

    def nested(net):
        net["model"]["init_std"] = write_text(marker)

    def interpolated(net):
        net["model"]["init_std"] = payload_string(marker)

    def env(net):
        net["model"]["dropout_hidden"] = "${oc.env:SECRET}"

    def wrapped_in_tuple(net):  # OmegaConf makes a list of a tuple, and Hydra builds what is inside
        net["model"]["dropout_embeddings"] = (write_text(marker),)

    def wrapped_in_set(net):
        net["decoder"]["extra"] = {payload_string(marker)}

    def wrapped_in_bytes(net):
        net["model"]["dropout_hidden"] = [payload_string(marker).encode()]

    def billion_laughs(net):  # 10^9 reaches, a few hundred bytes through pickle's memo
        node: list = ["laugh"]
        for _ in range(9):
            node = [node] * 10
        net["model"]["extra"] = node

    return {
        "top level": (edited(good, folder / "top.ckpt", top), "sarnmt.net_config.decoder._target_", marker),
        "tuple": (
            edited(good, folder / "tuple.ckpt", wrapped_in_tuple),
            "sarnmt.net_config.model.dropout_embeddings is a tuple",
            marker,
        ),
        "set": (edited(good, folder / "set.ckpt", wrapped_in_set), "sarnmt.net_config.decoder.extra is a set", marker),
        "bytes": (
            edited(good, folder / "bytes.ckpt", wrapped_in_bytes),
            "sarnmt.net_config.model.dropout_hidden[0] is a bytes",
            marker,
        ),
        "billion laughs": (
            edited(good, folder / "laughs.ckpt", billion_laughs),
            "sarnmt.net_config holds more than 100,000 values",
            marker,
        ),
        "nested": (edited(good, folder / "nested.ckpt", nested), "sarnmt.net_config.model.init_std._target_", marker),
        "interpolation": (
            edited(good, folder / "interpolated.ckpt", interpolated),
            "sarnmt.net_config.model.init_std=",
            marker,
        ),
        "oc.env": (edited(good, folder / "env.ckpt", env), "sarnmt.net_config.model.dropout_hidden=", marker),
    }


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, ckpt):
    return hostile_cases(ckpt, tmp_path_factory.mktemp("hostile"))


CASES = ["top level", "nested", "interpolation", "oc.env", "tuple", "set", "bytes", "billion laughs"]


def test_the_payloads_do_write_a_file_when_instantiated(tmp_path):
    """The hostile nodes are real: Hydra's instantiate writes the file (so a refusal that leaves none is the check's
    doing)."""
    instantiate(write_text(tmp_path / "a"))
    instantiate(OmegaConf.create({"x": payload_string(tmp_path / "b")}).x)
    assert (tmp_path / "a").read_text() == (tmp_path / "b").read_text() == "pwned"


def _refused(outcome, path: Path, key: str, marker: Path) -> str:
    line = one_error(outcome)
    assert line.startswith(f"error: checkpoint {path}: {key}"), line
    assert "refused without building anything" in line and "Traceback" not in outcome.err
    assert not marker.exists()
    return line


@pytest.mark.parametrize("case", CASES)
def test_translate_refuses_a_checkpoint_whose_config_could_run_code(capsys, monkeypatch, hostile, tmp_path, case):
    """translate refuses a checkpoint whose model config names pathlib.Path.write_text (top level, nested, in an
    interpolation) or reads ${oc.env:...}: one line naming the key, no output file, nothing written."""
    monkeypatch.setenv("SECRET", "hunter2")
    path, key, marker = hostile[case]
    out = tmp_path / "out.txt"
    outcome = run_cli(capsys, "translate", [f"ckpt_path={path}", "progress=false", f"output={out}"], b"ta brin\n")
    assert "hunter2" not in _refused(outcome, path, key, marker)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def _files_data(folder: Path) -> list[str]:
    """``data=files`` overrides for a corpus of :data:`LINES` in every split and side, written into ``folder``."""
    for name in ("train", "dev", "test"):
        for side in ("src", "tgt"):
            (folder / f"{name}.{side}").write_bytes(LINES)
    data = ["data=files", "data.vocab_size=60"]
    return data + [f"data.{n}_{s}={folder / f'{n}.{s}'}" for n in ("train", "dev", "test") for s in ("src", "tgt")]


@pytest.mark.parametrize("case", CASES)
def test_evaluate_refuses_a_checkpoint_whose_config_could_run_code(capsys, hostile, tmp_path, case):
    """evaluate refuses the same checkpoints in one line; no record or hypotheses are written."""
    path, key, marker = hostile[case]
    data = _files_data(tmp_path)
    run = tmp_path / "run"
    outcome = run_cli(
        capsys, "evaluate", [f"ckpt_path={path}", *data, "decoding=greedy", "progress=false", f"hydra.run.dir={run}"]
    )
    _refused(outcome, path, key, marker)
    assert not list(run.glob("eval.*.json")) and not list(run.glob("hypotheses.*"))


@pytest.mark.parametrize("case", CASES)
def test_average_refuses_a_checkpoint_whose_config_could_run_code(capsys, ckpt, hostile, tmp_path, case):
    """average refuses the same checkpoints among its inputs (and in dir=) and writes no average."""
    path, key, marker = hostile[case]
    out = tmp_path / "avg.ckpt"
    _refused(run_cli(capsys, "average", [f"checkpoints=[{ckpt},{path}]", f"output={out}"]), path, key, marker)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "epoch=1.ckpt").write_bytes(path.read_bytes())
    outcome = run_cli(capsys, "average", [f"dir={tmp_path / 'dir'}", "last=1", f"output={out}"])
    _refused(outcome, tmp_path / "dir" / "epoch=1.ckpt", key, marker)
    assert not out.exists()


@pytest.mark.parametrize("case", CASES)
def test_a_resumed_run_refuses_a_checkpoint_whose_config_could_run_code(capsys, hostile, tmp_path, case):
    """train ckpt_path= refuses the same checkpoints before it reads any data or writes a checkpoint."""
    path, key, marker = hostile[case]
    run = tmp_path / "run"
    outcome = run_cli(capsys, "train", [*TINY, "trainer.max_steps=4", f"ckpt_path={path}", f"hydra.run.dir={run}"])
    _refused(outcome, path, key, marker)
    assert not list(run.rglob("*.ckpt"))


def test_a_language_model_checkpoint_is_checked_too(tmp_path):
    """A language model checkpoint whose head names pathlib.Path.write_text is refused by load_language_model."""
    marker = tmp_path / "pwned.txt"

    def nested(net):
        net["model"]["head"]["variant"] = write_text(marker)

    path = edited(ROOT / "tests" / "fixtures" / "before-i30-572ef88-lm.ckpt", tmp_path / "lm.ckpt", nested)
    with pytest.raises(CheckpointError, match=r"sarnmt\.net_config\.model\.head\.variant\._target_="):
        load_language_model(path)
    assert not marker.exists()
    load_language_model(ROOT / "tests" / "fixtures" / "before-i30-572ef88-lm.ckpt")  # the untouched one loads


# --- the allow-list -------------------------------------------------------------------------------------------------
def test_every_packaged_model_decoder_and_lm_config_names_allowed_classes():
    """The allow-list is derived from the packaged configs: every _target_ of every model=, decoder= and lm_model=
    option is on it, and so is the earlier path of every moved model class; data modules and optimisers are not."""
    shipped = {
        target
        for group in MODEL_GROUPS
        for path in (config_dir() / group).glob("*.yaml")
        for target in targets_of(OmegaConf.load(path))
    }
    assert len(shipped) >= 15 and shipped <= allowed_targets()
    assert {
        "sarnmt.models.seq2seq.Seq2Seq",
        "sarnmt.models.lstm.AttentionLSTM",
        "sarnmt.lm.model.RecurrentLM",
    } <= shipped
    moved = {before for now, before in MOVED_TARGETS.items() if now in shipped}
    assert "sarnmt.models.lm.model.RecurrentLM" in moved and moved <= allowed_targets()
    for other in ("sarnmt.data.loading.in_memory.ToyDataModule", "torch.optim.Adam", "sarnmt.utils.atomic.write_bytes"):
        assert other not in allowed_targets()


@pytest.mark.parametrize(
    "node, says",
    [
        pytest.param(
            {"model": {"_target_": "os.system"}}, "x.model._target_='os.system' is not a class", id="os.system"
        ),
        pytest.param({"m": [{"a": {"_target_": "shutil.copyfile"}}]}, "x.m[0].a._target_='shutil.copyfile'", id="list"),
        pytest.param({"m": {"_target_": 3}}, "x.m._target_=3 is not a class", id="not a string"),
        pytest.param({"m": {"_args_": ["a"]}}, "x.m._args_ is a Hydra key", id="_args_"),
        pytest.param({"m": {"_recursive_": False}}, "x.m._recursive_ is a Hydra key", id="_recursive_"),
        pytest.param({"m": "${oc.decode:'[1]'}"}, "x.m=\"${oc.decode:'[1]'}\" is an interpolation", id="oc.decode"),
        pytest.param({"m": "${a.${oc.env:X}}"}, "x.m='${a.${oc.env:X}}' is an interpolation", id="nested resolver"),
        pytest.param({"m": "a ${my_resolver:}"}, "is an interpolation that is not a plain reference", id="custom"),
        pytest.param({"m": "\\${oc.env:X}"}, "is an interpolation", id="escaped"),
    ],
)
def test_check_stored_config_refuses_naming_the_key(node, says):
    """Unit cases of the stored-config check: other targets, Hydra keys, resolvers, each refused by key."""
    with pytest.raises(StoredConfigError) as err:
        check_stored_config(node, "here", key="x")
    assert str(err.value).startswith("here: x.") and says in str(err.value) and "\n" not in str(err.value)


def test_plain_references_and_a_deep_config():
    """Plain references between keys pass; a config nested 100 levels deep is refused, not a RecursionError."""
    check_stored_config({"a": 1, "b": "${a}", "c": {"d": "${..a}", "e": "x ${c.d} y", "f": "${l[0]}"}, "l": [1]}, "h")
    deep: dict = {}
    node = deep
    for _ in range(100):
        node["n"] = {}
        node = node["n"]
    with pytest.raises(StoredConfigError, match="nests deeper than 32 levels"):
        check_stored_config(deep, "here")


@pytest.mark.parametrize(
    "value",
    ["os", "pathlib.Path", "sarnmt", "sarnmt.utils", "a b", "mypkg;x", 3, "torch", "numpy", "lightning", "hydra"]
    + ["omegaconf", "pip", "setuptools", "__main__"],
)
def test_trust_targets_refuses_what_is_not_a_module_of_ones_own(value):
    """trust_targets= takes module names of one's own: standard-library modules, sarnmt, the frameworks it runs on
    (whose functions would write files: torch.save, numpy.savetxt), the installers, __main__ and non-names are
    refused."""
    with pytest.raises(Exception, match="trust_targets") as err:
        check_trust([value])
    assert type(err.value).__name__ == "InputError"


# --- a decoder of one's own -----------------------------------------------------------------------------------------
MODULE = '''
"""A decoder of one's own: a packaged one under another name; importing it leaves a mark."""

import pathlib
import os

from sarnmt.models.variants import SelfAttentiveResidual

pathlib.Path(os.environ["SARNMT_TEST_IMPORTED"]).write_text("imported")


class MyDecoder(SelfAttentiveResidual):
    """The self-attentive residual decoder, by another path."""
'''


@pytest.fixture
def own(tmp_path, monkeypatch, ckpt) -> tuple[Path, Path]:
    """A checkpoint naming ``my_decoder.MyDecoder`` (a module in ``tmp_path/code`` on ``sys.path``) and the file that
    importing the module writes."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "my_decoder.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    monkeypatch.delitem(sys.modules, "my_decoder", raising=False)
    imported = tmp_path / "imported.txt"
    monkeypatch.setenv("SARNMT_TEST_IMPORTED", str(imported))

    def mine(net):
        net["decoder"]["_target_"] = "my_decoder.MyDecoder"

    return edited(ckpt, tmp_path / "mine.ckpt", mine), imported


def test_a_decoder_of_ones_own_loads_only_with_trust_targets(capsys, own, caplog):
    """Without trust_targets the checkpoint is refused, naming the module to trust, and the module is not even
    imported; with trust_targets=[my_decoder] it translates, with a warning (its log) naming the class trusted."""
    path, imported = own
    args = [f"ckpt_path={path}", "progress=false", "decoding.min_len=1"]
    line = one_error(run_cli(capsys, "translate", args, b"ta brin\nnu gorm\n"))
    assert line.startswith(f"error: checkpoint {path}: sarnmt.net_config.decoder._target_='my_decoder.MyDecoder'")
    assert line.endswith("trust_targets=[my_decoder]") and not imported.exists() and "my_decoder" not in sys.modules
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        outcome = run_cli(capsys, "translate", [*args, "trust_targets=[my_decoder]"], b"ta brin\nnu gorm\n")
    assert outcome.code == 0, outcome.err
    assert len(outcome.out.splitlines()) == 2 and imported.exists()
    trusted = [r.getMessage() for r in caplog.records if "trusted (trust_targets)" in r.getMessage()]
    assert trusted == [
        f"checkpoint {path}: built with classes of your own, trusted (trust_targets): my_decoder.MyDecoder"
    ]
    assert one_error(run_cli(capsys, "translate", [*args, "trust_targets=[os]"], b"x\n")).startswith(
        "error: trust_targets: 'os' is not a module of your own"
    )


def test_trust_reaches_only_what_the_trusted_module_defines(own):
    """Trusting my_decoder trusts the classes it defines, not what it imports: my_decoder.pathlib.Path.write_text
    is the standard library's, refused before anything is built."""
    mine = {"decoder": {"_target_": "my_decoder.MyDecoder"}}
    assert check_stored_config(mine, "here", trust=("my_decoder",)) == ["my_decoder.MyDecoder"]
    for reexported in (
        "my_decoder.pathlib.Path.write_text",
        "my_decoder.os.system",
        "my_decoder.SelfAttentiveResidual",
    ):
        with pytest.raises(StoredConfigError, match="is not a class sarnmt rebuilds models from"):
            check_stored_config({"decoder": {"_target_": reexported}}, "here", trust=("my_decoder",))


def test_evaluate_records_the_trusted_modules(capsys, own, tmp_path):
    """evaluate with trust_targets= writes the trusted modules into its record."""
    path, _ = own
    data = _files_data(tmp_path)
    run = tmp_path / "run"
    args = [f"ckpt_path={path}", *data, "decoding=greedy", "progress=false", f"hydra.run.dir={run}"]
    outcome = run_cli(capsys, "evaluate", [*args, "trust_targets=[my_decoder]"])
    assert outcome.code == 0, outcome.err
    assert json.loads((run / "eval.test.json").read_text())["trust_targets"] == ["my_decoder"]


# --- sizes before allocation ----------------------------------------------------------------------------------------
def test_sizes_are_checked_on_the_meta_device_before_allocation(ckpt, tmp_path, monkeypatch):
    """A 43K-parameter checkpoint claiming hidden_dim=6000 (a 1.6 GB model) is refused naming the first tensor whose
    shape differs; the model was only ever built on the meta device."""

    def big(net):
        net["model"]["hidden_dim"] = 6000

    path = edited(ckpt, tmp_path / "big.ckpt", big)
    devices = []
    real = checkpoint_module.build_model

    def spy(*args, **kwargs):
        devices.append(torch.empty(0).device.type)
        return real(*args, **kwargs)

    monkeypatch.setattr(checkpoint_module, "build_model", spy)
    with pytest.raises(CheckpointError, match=r"its weights do not fit its model config \(its config gives .* shape"):
        load_model(path)
    assert devices == ["meta"]
    load_model(ckpt)
    assert devices == ["meta", "meta", "cpu"]


@pytest.mark.parametrize("value", [-5, 10**30, "abc", 2.5])
def test_a_size_that_is_no_size_is_one_line(capsys, ckpt, tmp_path, value):
    """A hidden_dim that is negative, astronomically large, a string or a fraction is refused in one line."""

    def odd(net):
        net["model"]["hidden_dim"] = value

    path = edited(ckpt, tmp_path / "odd.ckpt", odd)
    line = one_error(run_cli(capsys, "translate", [f"ckpt_path={path}", "progress=false"], b"ta\n"))
    if isinstance(value, int) and value > 0:  # a size, but not one the weights have
        assert line.startswith(f"error: checkpoint {path} is corrupt: "), line
    else:  # the model's own range, the same for a config composed on the command line
        assert line.startswith(f"error: checkpoint {path} holds model "), line
        says = "must be 1 or more" if isinstance(value, int) else "must be a whole number, 1 or more"
        assert line.endswith(f"model.hidden_dim={value!r}: {says}"), line


def test_a_symlink_loop_among_the_checkpoints_is_named(capsys, ckpt, tmp_path):
    """average dir= holding a *.ckpt symlink loop, or a loop given as a checkpoint, is one line naming it (a
    RuntimeError traceback from pathlib before)."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.ckpt").symlink_to("b.ckpt")
    (tmp_path / "dir" / "b.ckpt").symlink_to("a.ckpt")
    (tmp_path / "dir" / "epoch=1.ckpt").write_bytes(ckpt.read_bytes())
    out = tmp_path / "avg.ckpt"
    line = one_error(run_cli(capsys, "average", [f"dir={tmp_path / 'dir'}", "last=1", f"output={out}"]))
    assert (
        line == f"error: checkpoint {tmp_path / 'dir' / 'a.ckpt'} is a symlink loop (a link that leads back to itself)"
    )
    line = one_error(run_cli(capsys, "translate", [f"ckpt_path={tmp_path / 'dir' / 'b.ckpt'}"], b"ta\n"))
    assert line.endswith("b.ckpt is a symlink loop (a link that leads back to itself)") and not out.exists()


@pytest.mark.parametrize(
    "change,says",
    [
        pytest.param(
            lambda c: c["sarnmt"]["net_config"]["model"].__setitem__("dropout_readout", float("nan")),
            "model.dropout_readout=nan: must be a finite number, between 0 and 1",
            id="dropout nan",
        ),
        pytest.param(
            lambda c: c["sarnmt"]["net_config"].__setitem__("model", dict(c["sarnmt"]["net_config"]["decoder"])),
            "is not a sarnmt model (it does not declare the hooks it offers and needs)",
            id="a decoder class as the model",
        ),
        pytest.param(lambda c: c["sarnmt"].__setitem__("task", ["lm"]), "holds a list as its task", id="task a list"),
    ],
)
def test_a_stored_setting_out_of_its_range_is_one_line(capsys, ckpt, tmp_path, change, says):
    """Stored values the command line would refuse are refused from a checkpoint too, in one line, not a traceback
    at the first decoding step."""
    checkpoint = torch.load(ckpt, weights_only=True)
    change(checkpoint)
    torch.save(checkpoint, tmp_path / "odd.ckpt")
    line = one_error(run_cli(capsys, "translate", [f"ckpt_path={tmp_path / 'odd.ckpt'}", "progress=false"], b"a\n"))
    assert line.startswith(f"error: checkpoint {tmp_path / 'odd.ckpt'}") and says in line, line
