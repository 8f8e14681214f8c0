"""``sarnmt <command> [overrides]``: every command of the package behind one entry point (``[project.scripts]``).

``sarnmt`` or ``sarnmt --help`` lists the commands; ``sarnmt <command> --help`` shows the command's config groups, its
settings and two examples; ``sarnmt <command> args...`` runs the command's entry point with ``args``, which this
module hands on unparsed: to Hydra for the Hydra applications, as a list to the few commands that are not Hydra
applications (each says why in its docstring). :data:`COMMANDS` is the one registry: ``python -m sarnmt <command>``
(``sarnmt/__main__.py``) reads it too, and ``python -m sarnmt.train``, kept because scripts use it, is an alias of
``sarnmt train`` (:func:`alias`); no other ``python -m sarnmt.<module>`` path runs a command.

This module (:func:`main`, the dispatcher) and the runner below it, :mod:`sarnmt.utils.hydra_app`, are the one
place that takes arguments from ``sys.argv`` or sets it (tests/test_cli.py checks it): Hydra reads the command line
from ``sys.argv``, so running a Hydra application under another program name (``sarnmt train``, ``sarnmt human
serve``) means setting ``sys.argv`` to ``[program, *args]`` for the call
(:func:`~sarnmt.utils.hydra_app.run_hydra`), which first checks the config folders the command line adds
(``--config-dir``, ``hydra.searchpath``: :func:`sarnmt.utils.compose.check_user_configs`).
Every error a user can cause is one ``error: ...`` line and exit status 2 (:func:`sarnmt.errors.reported`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from sarnmt.errors import USER_ERROR_STATUS


@dataclass(frozen=True)
class Command:
    """A command: ``sarnmt.<module>``'s ``main``, a Hydra application (``hydra``: it reads its arguments through
    Hydra) or a function of the argument list and the program name (``main(args, prog=...)``) returning the exit
    status. The commands of the package live in ``sarnmt/cli/`` (``cli.train``)."""

    module: str
    summary: str
    hydra: bool = True
    config: str | None = None  # a Hydra application's primary config (sarnmt/conf/<config>.yaml): --help reads it alone


COMMANDS: dict[str, Command] = {
    "train": Command(
        "cli.train", "train a translation model (data=, model=, decoder=, optim=, trainer=, ...)", config="train"
    ),
    "translate": Command("cli.translate", "translate plain text with a trained checkpoint", config="translate"),
    "evaluate": Command(
        "cli.evaluate", "a checkpoint's BLEU on a corpus split (greedy or beam search)", config="evaluate"
    ),
    "score": Command(
        "cli.score", "BLEU of existing system outputs, with confidence intervals and p-values", config="score"
    ),
    "average": Command("cli.average", "average the weights of several checkpoints", config="average"),
    "params": Command("cli.params", "parameter counts of the models, beside Table 1 and Table 6", hydra=False),
    "prepare": Command("cli.prepare", "fetch, preprocess and cache a corpus", config="prepare"),
    "reproduce": Command(
        "cli.reproduce", "run a table's sweep (local, joblib or SLURM) and render the table", config="reproduce"
    ),
    "tables": Command("cli.tables", "render the paper's tables from the sweep's records", config="tables"),
    "analyze": Command("cli.analyze", "the paper's analysis (section 8): figures, trees, Table 7", hydra=False),
    "lm": Command("cli.lm", "train a word-level language model (Table 6)", config="lm"),
    "human": Command(
        "human.__main__", "the human evaluation (Table 5): create, serve, export, annotators", hydra=False
    ),
    "bench": Command("bench.__main__", "the speed benchmark of every decoder beside its peers", hydra=False),
    "bench-lm": Command("bench.lm", "training speed of Table 6's language models", config="bench_lm"),
    "sweep-job": Command("cli.sweep_job", "one job of a table's sweep (what reproduce launches)", config="sweep_job"),
    "sweep-systems": Command("sweep.systems", "the table of every system of a seeds sweep", config="sweep_systems"),
    "curves": Command("cli.curves", "training loss and dev cost/BLEU of one or more runs, in one PNG", hydra=False),
    "version": Command("cli.version", "sarnmt's, torch's and CUDA's versions (also sarnmt --version, -V)", hydra=False),
    "completion": Command("cli.completion", "the bash or zsh completion script (commands, Hydra groups)", hydra=False),
}


def usage(prog: str = "sarnmt") -> str:
    """The command list, for ``prog`` (``sarnmt`` or ``python -m sarnmt``)."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()]
    return (
        f"usage: {prog} <command> [group=option ...] [key=value ...]\n"
        f"       {prog} <command> --help     (its config groups, settings and examples)\n\n"
        "Commands:\n" + "\n".join(lines) + "\n\n"
        "Examples:\n"
        f"  {prog} train decoder=baseline model=small trainer.max_epochs=20\n"
        f"  {prog} params model=paper decoder=all\n\n"
        "sarnmt <command> and python -m sarnmt <command> are the same (python -m sarnmt.train is sarnmt train).\n"
    )


HELP_FLAGS = frozenset({"--help", "-h", "--hydra-help"})


def _help_only(cfg: Any) -> None:
    """The task of a Hydra application run for its help: never called (Hydra prints the help and exits first)."""
    raise AssertionError("a help flag was given: Hydra prints the help without running the task")


def run(name: str, args: Sequence[str], prog: str | None = None, entry: Callable[..., Any] | None = None) -> int:
    """Run command ``name`` on ``args`` (unparsed) and return its exit status; ``entry``: its ``main``, where the
    caller has it (``python -m``: the module run as ``__main__``)."""
    command = COMMANDS[name]
    prog = prog or f"sarnmt {name}"
    if command.hydra and command.config and entry is None and HELP_FLAGS & set(args):
        from sarnmt.utils.compose import hydra_main
        from sarnmt.utils.hydra_app import run_hydra

        # Hydra prints the help from the config alone and exits before the task: the command's module, and torch,
        # Lightning and matplotlib with it, are not imported (sarnmt <command> --help in about a second)
        return run_hydra(prog, args, hydra_main(command.config)(_help_only))
    if entry is None:
        entry = importlib.import_module(f"sarnmt.{command.module}").main
    if command.hydra:
        from sarnmt.utils.hydra_app import run_hydra  # hydra imported only to run a command, not for the list

        return run_hydra(prog, args, entry)
    return entry(list(args), prog=prog)


def published(module: str) -> str:
    """The ``python -m`` path of a command's module (:attr:`Command.module`): ``cli.train`` keeps the path it was
    published under (``sarnmt.train``), a package's ``__main__`` is run as the package (``sarnmt.human``)."""
    return "sarnmt." + module.removeprefix("cli.").removesuffix(".__main__")


def alias(name: str, entry: Callable[..., Any]) -> NoReturn:
    """``python -m sarnmt.train args``: ``sarnmt train args`` under its own program name
    (:func:`~sarnmt.utils.hydra_app.run_as_module`, which the modules that run as themselves call directly:
    ``sarnmt.human``, ``sarnmt.bench``, ``sarnmt.bench.lm``, ``sarnmt.sweep.systems``)."""
    from sarnmt.utils.hydra_app import run_as_module

    run_as_module(f"python -m {published(COMMANDS[name].module)}", entry, COMMANDS[name].hydra)


def main(argv: Sequence[str] | None = None, prog: str = "sarnmt") -> int:
    """The ``sarnmt`` console script and ``python -m sarnmt`` (``prog``): no command, or one not in
    :data:`COMMANDS`, prints the command list on stderr and returns 2."""
    args = list(sys.argv[1:] if argv is None else argv)  # the dispatcher: the one reader of sys.argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage(prog), end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else USER_ERROR_STATUS
    if args[0] in ("-sc", "--shell-completion"):  # what the completion scripts ask (sarnmt.cli.completion)
        from sarnmt.cli.completion import query

        return query(args, prog)
    name, rest = {"--version": "version", "-V": "version"}.get(args[0], args[0]), args[1:]
    if name not in COMMANDS:
        print(f"error: unknown command {name!r}; commands: {', '.join(COMMANDS)}", file=sys.stderr, flush=True)
        return USER_ERROR_STATUS
    return run(name, rest, prog=f"{prog} {name}")
