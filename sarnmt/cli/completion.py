"""Shell completion of ``sarnmt``: the commands, then each Hydra command's config groups, options and keys.

``eval "$(sarnmt completion bash)"`` (in ``~/.bashrc``) or ``eval "$(sarnmt completion zsh)"`` (``~/.zshrc``: zsh
runs the bash function through ``bashcompinit``) installs :func:`script`'s function:

- the first word completes from the command list (:data:`sarnmt.cli.COMMANDS`, written into the script, so ``sarnmt
  tr<TAB>`` starts no Python), with ``--help`` and ``--version``;
- after a Hydra command, the word is Hydra's to complete (``sarnmt train deco<TAB>`` → ``decoder=``, ``decoder=<TAB>``
  → its options): the function asks ``sarnmt -sc query=bash`` with the line, and :func:`query` runs Hydra's own
  completion on that command's primary config (``sarnmt/conf/<command>.yaml``) without importing the command, so no
  torch is loaded for a TAB;
- after any other command (``params``, ``human``, ...), file names.

``sarnmt -sc query=bash`` is also what the script of Hydra's ``sarnmt train -sc install=bash`` calls, which therefore
works too. The function filters the replies by the word typed itself: zsh's ``compgen`` of ``bashcompinit`` ignores
it. As Hydra's script does, this one drops ``=`` from the shell's ``COMP_WORDBREAKS``, so that
``decoder=bas`` is one word to complete.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from sarnmt.errors import USER_ERROR_STATUS

SHELLS = ("bash", "zsh")
FUNCTION = "_sarnmt_completion"
TOP_LEVEL = ("--help", "--version")
ZSH_PRELUDE = "autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n"
SCRIPT = """# sarnmt {shell} completion: eval "$(sarnmt completion {shell})"
{prelude}{function}() {{
    local line=${{COMP_LINE:0:$COMP_POINT}}
    local cur=${{line##*[[:space:]]}}
    COMPREPLY=()
    if (( COMP_CWORD <= 1 )); then
        local word
        for word in $(compgen -W "{words}" -- "$cur"); do
            [[ "$word" == "$cur"* ]] && COMPREPLY+=("$word ")
        done
        return 0
    fi
    case " {hydra} " in
        *" ${{COMP_WORDS[1]}} "*) ;;
        *) COMPREPLY=($(compgen -f -- "${{COMP_WORDS[COMP_CWORD]}}")); return 0 ;;
    esac
    local choices
    choices=$(COMP_LINE="$line" COMP_POINT=${{#line}} "${{COMP_WORDS[0]}}" -sc query=bash 2>/dev/null) || return 0
    local choice
    for choice in $(compgen -W "$choices" -- "$cur"); do
        [[ "$choice" == "$cur"* ]] && COMPREPLY+=("$choice")
    done
    return 0
}}
COMP_WORDBREAKS=${{COMP_WORDBREAKS//=}}
complete -o nospace -o default -F {function} sarnmt
"""  # str.format: {shell}, {prelude}, {function}, {words}, {hydra}; {{ }} are braces


def config_name(command: str) -> str | None:
    """The primary config of a Hydra command (``sweep-job`` → ``sweep_job``), None for the other commands."""
    from sarnmt.cli import COMMANDS
    from sarnmt.utils.compose import config_dir

    if command not in COMMANDS or not COMMANDS[command].hydra:
        return None
    name = command.replace("-", "_")
    return name if (config_dir() / f"{name}.yaml").is_file() else None


def script(shell: str) -> str:
    """The completion script for ``shell`` (bash; zsh loads ``bashcompinit`` and uses the same function)."""
    from sarnmt.cli import COMMANDS

    words = " ".join([*COMMANDS, *TOP_LEVEL])
    hydra = " ".join(name for name in COMMANDS if config_name(name))
    prelude = ZSH_PRELUDE if shell == "zsh" else ""
    return SCRIPT.format(shell=shell, prelude=prelude, function=FUNCTION, words=words, hydra=hydra)


def query(args: Sequence[str], prog: str = "sarnmt") -> int:
    """``sarnmt -sc query=bash`` with the line in ``COMP_LINE``: print the completions of its last word (commands
    for the first word, Hydra's for a Hydra command's words, nothing otherwise); ``-sc install=bash|zsh``: print
    :func:`script`."""
    action = args[1] if len(args) > 1 else ""
    key, _, shell = action.partition("=")
    if key == "install" and shell in SHELLS:
        print(script(shell), end="")
        return 0
    if key != "query" or shell not in SHELLS:
        print(f"error: {prog} -sc takes install=bash|zsh or query=bash|zsh, got {action!r}", file=sys.stderr)
        return USER_ERROR_STATUS
    line = os.environ.get("COMP_LINE", "")
    words = line.split()
    if line[-1:].isspace():
        words.append("")
    if len(words) <= 2:  # the program and the command being typed
        from sarnmt.cli import COMMANDS

        print(" ".join(w for w in [*COMMANDS, *TOP_LEVEL] if w.startswith(words[-1] if len(words) > 1 else "")))
        return 0
    return hydra_query(words, shell, prog)


def hydra_query(words: list[str], shell: str, prog: str) -> int:
    """The completions of a Hydra command's words (``words[1]`` the command), Hydra's own (``-sc query``)."""
    name = config_name(words[1])
    if name is None:
        return 0
    from sarnmt.utils.compose import hydra_main
    from sarnmt.utils.hydra_app import run_hydra

    @hydra_main(name)
    def app(cfg: object) -> None:  # never called: Hydra answers -sc query itself
        raise AssertionError

    os.environ["COMP_LINE"] = " ".join([words[1], *words[2:]])  # Hydra strips the first word as the program's
    os.environ["COMP_POINT"] = str(len(os.environ["COMP_LINE"]))
    return run_hydra(f"{prog} {words[1]}", ["-sc", f"query={shell}"], app)


def main(args: Sequence[str] = (), prog: str = "sarnmt completion") -> int:
    """``sarnmt completion bash|zsh``: print the completion script."""
    args = list(args)
    if args in (["-h"], ["--help"]):
        print(f"usage: {prog} bash|zsh\n\nPrint the shell completion script of sarnmt: its commands, then each Hydra")
        print("command's config groups, options and keys (Hydra's own completion, asked through sarnmt -sc).\n")
        print("Examples:\n  sarnmt completion bash >> ~/.bash_completion\n  sarnmt completion zsh > ~/.sarnmt.zsh")
        return 0
    if len(args) != 1 or args[0] not in SHELLS:
        print(f'error: usage: {prog} bash|zsh  (then: eval "$({prog} bash)" in ~/.bashrc)', file=sys.stderr)
        return USER_ERROR_STATUS
    print(script(args[0]), end="")
    return 0
