"""The ``sarnmt`` command (sarnmt/cli): one entry point listing every command and running each of them."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.core.hydra_config import HydraConfig

from sarnmt import cli
from tests.conftest import ROOT

TABLE1 = ("108,725,885", "108,976,885", "109,775,485", "110,287,485", "110,824,061", "111,336,061")


@pytest.fixture(autouse=True)
def no_hydra_left_behind():
    """A command run in this process leaves Hydra's config set and its logging handlers on the stream this test
    captured (a command's own process ends there): later tests would take Hydra as running, resolving relative
    paths against the first working folder, and log into a closed stream."""
    loggers = [logging.getLogger(name) for name in (None, "sarnmt", "hydra")]
    saved = [(logger, logger.handlers[:], logger.level) for logger in loggers]
    yield
    HydraConfig.instance().cfg = None
    for logger, handlers, level in saved:
        logger.handlers[:] = handlers
        logger.setLevel(level)


def sarnmt(*args: str) -> subprocess.CompletedProcess:
    """The console script, as installed by ``pip install -e .`` ([project.scripts])."""
    script = Path(sys.executable).parent / "sarnmt"
    if not script.is_file():
        pytest.skip(f"{script}: the console script is not installed (pip install -e . --no-deps)")
    return subprocess.run([str(script), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_help_lists_every_command(capsys):
    out = sarnmt("--help")
    assert out.returncode == 0, out.stderr
    for name, command in cli.COMMANDS.items():
        assert f"  {name} " in out.stdout and command.summary in out.stdout
    assert cli.main(["--help"]) == 0
    assert capsys.readouterr().out == out.stdout
    assert cli.main([]) == 2 and "Commands:" in capsys.readouterr().err  # no command: the list, as a usage error


def test_unknown_command_lists_the_commands(capsys):
    out = sarnmt("trian", "decoder=baseline")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == f"error: unknown command 'trian'; commands: {', '.join(cli.COMMANDS)}"
    assert cli.main(["nope"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [out.stderr.strip().replace("'trian'", "'nope'")]


def test_python_m_sarnmt_is_the_sarnmt_script():
    """``python -m sarnmt`` reads the same registry: no command or an unknown one lists the commands, exit 2."""

    def python_m(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sarnmt", *args], cwd=ROOT, capture_output=True, text=True)

    out = python_m()
    assert out.returncode == 2 and out.stdout == "" and out.stderr.startswith("usage: python -m sarnmt <command>")
    assert all(f"  {name} " in out.stderr and command.summary in out.stderr for name, command in cli.COMMANDS.items())
    out = python_m("trian")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == f"error: unknown command 'trian'; commands: {', '.join(cli.COMMANDS)}"
    out = python_m("params", "--help")  # a command runs under its python -m name (params: no torch to import)
    assert out.returncode == 0 and out.stdout.startswith("usage: python -m sarnmt params "), out.stderr


def test_params_prints_table1(capsys):
    out = sarnmt("params", "model=paper", "decoder=all")
    assert out.returncode == 0, out.stderr
    assert all(figure in out.stdout for figure in TABLE1)
    assert cli.main(["params", "model=paper", "decoder=all"]) == 0
    printed = capsys.readouterr().out
    assert all(figure in printed for figure in TABLE1)


def _commands(table: dict[str, cli.Command], prefix: str = "") -> list[tuple[str, cli.Command]]:
    """Every command of the table, a group's commands instead of the group (``human create``)."""
    found = []
    for name, command in table.items():
        if command.group is not None:
            found += _commands(command.group.commands, f"{prefix}{name} ")
        else:
            found.append((prefix + name, command))
    return found


def test_every_command_has_its_entry_point_in_cli():
    """One command table: every command, and every command of a group, runs a function of a module of
    sarnmt/cli/."""
    import importlib

    commands = _commands(cli.COMMANDS)
    assert {"human create", "human serve", "human export", "human annotators", "bench", "bench-lm"} <= dict(
        commands
    ).keys()
    for name, command in commands:
        assert command.module.startswith("cli."), name
        assert callable(getattr(importlib.import_module(f"sarnmt.{command.module}"), command.entry)), name


def test_no_entry_point_or_command_table_outside_cli():
    """Hydra applications (``@hydra_main``), argument-list entry points (``def main``), command tables and usage texts
    are defined in sarnmt/cli only; the ``python -m`` aliases of other packages (``sarnmt.human``, ``sarnmt.bench``,
    ...) run the package's program by name (:func:`sarnmt.utils.hydra_app.run_alias`) and hold nothing else."""
    import re

    pattern = re.compile(r"^@hydra_main\(|^def main\(|^USAGE = |^COMMANDS\b", re.MULTILINE)
    found = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "sarnmt").rglob("*.py")
        if path.parent.name != "cli" and pattern.search(path.read_text(encoding="utf-8"))
    }
    assert not found, found
    for alias in ("human/__main__.py", "bench/__main__.py"):
        body = (ROOT / "sarnmt" / alias).read_text(encoding="utf-8").split('"""')[-1]
        assert len(body.strip().splitlines()) <= 4 and "run_alias(" in body and "sarnmt.cli" not in body, alias


@pytest.mark.parametrize(
    ("module", "usage"),
    [
        ("sarnmt.human", "usage: python -m sarnmt.human <command>"),
        ("sarnmt.bench", "usage: python -m sarnmt.bench [key=value ...]"),
        ("sarnmt.bench.lm", "usage: sarnmt bench-lm [key=value ...]"),
        ("sarnmt.sweep.systems", "usage: sarnmt sweep-systems"),
    ],
)
def test_the_python_m_aliases_run_their_command(module, usage):
    """``python -m sarnmt.human`` (and the other aliases kept for scripts) run the command of the one table, under
    its own program name; a Hydra command's help is its config's."""
    out = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith(usage), out.stdout[-2000:] + out.stderr[-2000:]
    if module == "sarnmt.human":
        assert "  create " in out.stdout and "python -m sarnmt.human serve db=human.sqlite" in out.stdout
        missing = subprocess.run([sys.executable, "-m", module], cwd=ROOT, capture_output=True, text=True)
        assert missing.returncode == 2 and missing.stderr.startswith(usage)


def test_python_m_sarnmt_train_is_kept_as_an_alias_of_sarnmt_train():
    """Users' scripts run ``python -m sarnmt.train``: ``sarnmt/train.py`` hands its arguments to ``cli.train``'s
    ``main`` through :func:`cli.alias`, under its own program name."""
    source = (ROOT / "sarnmt" / "train.py").read_text(encoding="utf-8")  # run: tests/test_entrypoints.py
    assert "from sarnmt.cli.train import main" in source and 'alias("train", main)' in source


def test_the_top_level_of_the_package_holds_packages_and_four_modules():
    """One registry: the commands are ``sarnmt <command>``; ``python -m sarnmt.<command>`` alias modules are gone,
    but for ``sarnmt.train``."""
    top = sorted(path.name for path in (ROOT / "sarnmt").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "errors.py", "train.py"]
    out = subprocess.run([sys.executable, "-m", "sarnmt.translate"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0 and "No module named sarnmt.translate" in out.stderr


HUMAN = ("create", "serve", "export", "annotators")


def _help(capsys, *args: str) -> tuple[int, str]:
    try:
        code = cli.main([*args, "--help"])
    except SystemExit as exit_:  # Hydra's and argparse's --help exit
        code = exit_.code or 0
    captured = capsys.readouterr()
    return code, captured.out


@pytest.mark.parametrize("args", [[name] for name in cli.COMMANDS] + [["human", sub] for sub in HUMAN])
def test_every_command_help_shows_groups_and_examples(capsys, args):
    code, out = _help(capsys, *args)
    assert code == 0, out
    examples = [line for line in out[out.index("Examples") :].splitlines() if line.strip().startswith("sarnmt ")]
    assert len(examples) >= 2, out
    if cli.COMMANDS[args[0]].hydra or args[0] == "human" and len(args) > 1:
        assert "== Config groups (group=option) ==" in out and "== Config (" in out
    if args[0] in ("train", "evaluate", "lm", "bench"):  # commands with groups name them
        group = {"train": "decoder: baseline", "evaluate": "decoding: beam", "lm": "lm_model:", "bench": "Decoders:"}
        assert group[args[0]] in out, out


def test_only_the_dispatcher_takes_arguments_from_sys_argv():
    """No command parses the command line by hand: ``sys.argv`` is indexed or assigned in sarnmt/cli and in the
    Hydra runner below it, sarnmt/utils/hydra_app.py, only (sarnmt/training/run_lock.py records it, unparsed, in the
    run folder's lock)."""
    import re

    pattern = re.compile(r"sys\.argv\s*(\[|=(?!=))")
    found = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "sarnmt").rglob("*.py")
        if path.parent.name != "cli" and pattern.search(path.read_text(encoding="utf-8"))
    }
    assert found == {"sarnmt/utils/hydra_app.py"}


def test_one_place_locates_the_configs():
    """sarnmt.utils.compose.config_dir is the only code that says where sarnmt/conf is."""
    import re

    pattern = re.compile(r"resources\.files\(|__file__.*conf|[\"']conf[\"']")
    found = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "sarnmt").rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    }
    assert found == {"sarnmt/utils/compose.py"}
