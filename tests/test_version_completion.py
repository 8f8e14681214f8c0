"""``sarnmt --version`` and shell completion: bash runs the completion script for real (``COMP_WORDS``,
``COMP_CWORD``, ``COMP_LINE`` set as readline sets them, then the function), which asks ``sarnmt -sc query=bash``
for Hydra's part."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import sarnmt
from sarnmt import cli
from sarnmt.cli.completion import config_name, script

SCRIPT = Path(sys.executable).parent / "sarnmt"


def _sarnmt(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT}: the console script is not installed (pip install -e . --no-deps)")
    full = {**os.environ, "WANDB_MODE": "disabled", **(env or {})}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300, env=full)


@pytest.mark.parametrize("flag", ["--version", "-V", "version"])
def test_version_names_sarnmt_torch_and_cuda(flag):
    out = _sarnmt(flag)
    assert out.returncode == 0, out.stderr
    first, second, *_ = out.stdout.splitlines()
    assert first == f"sarnmt {sarnmt.__version__}"
    cuda = f"cuda {torch.version.cuda}" if torch.version.cuda else "cpu"
    assert second.startswith(f"torch {torch.__version__}, {cuda}")


def test_version_takes_no_arguments(capsys):
    assert cli.main(["version", "extra"]) == 2
    assert capsys.readouterr().err.strip() == "error: sarnmt version takes no arguments, got extra"


def complete(line: str, shell_script: str, tmp_path: Path, shell: str = "bash") -> list[str]:
    """What the completion function replies to ``line`` (the cursor at its end), called as bash's readline (or zsh's
    ``bashcompinit``, with its ksh arrays) calls it."""
    program = shutil.which(shell)
    if program is None:
        pytest.skip(f"no {shell} here")
    (tmp_path / f"completion.{shell}").write_text(shell_script)
    words = line.split(" ")
    driver = (
        f"source {tmp_path / f'completion.{shell}'}\n"
        + ("setopt ksharrays\n" if shell == "zsh" else "")
        + f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}\n'
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        "_sarnmt_completion\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{SCRIPT.parent}{os.pathsep}{os.environ['PATH']}", "WANDB_MODE": "disabled"}
    out = subprocess.run([program, "-c", driver], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    return [reply for reply in out.stdout.splitlines() if reply]


def test_bash_completes_commands_and_hydra_groups(tmp_path):
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT}: the console script is not installed")
    text = _sarnmt("completion", "bash").stdout
    assert "complete -o nospace -o default -F _sarnmt_completion sarnmt" in text
    assert complete("sarnmt tr", text, tmp_path) == ["train ", "translate "]
    assert complete("sarnmt --v", text, tmp_path) == ["--version "]
    assert "decoder=" in complete("sarnmt train deco", text, tmp_path)
    options = complete("sarnmt train decoder=self_attentive_c", text, tmp_path)
    assert options == ["decoder=self_attentive_content", "decoder=self_attentive_content_scope"]
    assert "lm_model=" in complete("sarnmt lm lm_mo", text, tmp_path)


def test_query_answers_hydra_s_own_script(capsys, monkeypatch):
    """Hydra's ``sarnmt train -sc install=bash`` script asks ``sarnmt -sc query=bash`` with the whole line."""
    monkeypatch.setenv("COMP_LINE", "sarnmt ev")
    assert cli.main(["-sc", "query=bash"]) == 0
    assert capsys.readouterr().out.split() == ["evaluate"]
    monkeypatch.setenv("COMP_LINE", "sarnmt train decoder=mem")
    assert cli.main(["-sc", "query=bash"]) == 0
    assert capsys.readouterr().out.split() == ["decoder=memory_rnn"]
    assert cli.main(["-sc", "query=fish"]) == 2


def test_every_hydra_command_has_its_primary_config_for_completion():
    for name, command in cli.COMMANDS.items():
        assert (config_name(name) is not None) == command.hydra, name


def test_zsh_completes_commands_and_hydra_groups(tmp_path):
    text = script("zsh")
    assert text.index("bashcompinit") < text.index("complete -o nospace")
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT}: the console script is not installed")
    assert complete("sarnmt tr", text, tmp_path, "zsh") == ["train ", "translate "]
    assert "decoder=" in complete("sarnmt train deco", text, tmp_path, "zsh")
