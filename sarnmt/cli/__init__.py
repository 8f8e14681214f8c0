"""``sarnmt <command> [overrides]``: every command of the package behind one entry point (``[project.scripts]``).

``sarnmt`` or ``sarnmt --help`` lists the commands; ``sarnmt <command> --help`` shows the command's config groups, its
settings and two examples; ``sarnmt <command> args...`` runs the command's entry point with ``args``, which this
module hands on unparsed: to Hydra for the Hydra applications, as a list to the few commands that are not Hydra
applications (each says why in its docstring). :data:`COMMANDS` is the one command table: every command's entry point
lives in ``sarnmt/cli/``, and a command made of commands (``sarnmt human create``) lists them in the same table
(:class:`Group`: :data:`HUMAN`), so its help and its refusals are this module's too. ``python -m sarnmt <command>``
(``sarnmt/__main__.py``) reads it; ``python -m sarnmt.train``, ``python -m sarnmt.human`` and ``python -m
sarnmt.bench`` (and ``sarnmt.bench.lm``, ``sarnmt.sweep.systems``), kept because scripts use them, are aliases
(:func:`alias`, :attr:`Command.alias`); no other ``python -m sarnmt.<module>`` path runs a command.

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

from sarnmt.errors import USER_ERROR_STATUS, InputError


@dataclass(frozen=True)
class Command:
    """A command: the function ``entry`` of ``sarnmt.<module>`` (every command's in ``sarnmt/cli/``), a Hydra
    application (``hydra``: it reads its arguments through Hydra) or a function of the argument list and the program
    name (``main(args, prog=...)``) returning the exit status; or a :class:`Group` of commands (``group``).

    :param config: a Hydra application's primary config (``sarnmt/conf/<config>.yaml``): ``--help`` reads it alone.
    :param flags: option-style flags the command takes beside Hydra's overrides, each to its key (``--host H`` is
        ``host=H``).
    :param alias: the ``python -m`` module that runs it too, kept for scripts (``sarnmt.train``).
    """

    module: str
    summary: str
    hydra: bool = True
    config: str | None = None
    entry: str = "main"
    flags: tuple[tuple[str, str], ...] = ()
    group: Group | None = None
    alias: str | None = None


@dataclass(frozen=True)
class Group:
    """A table of commands with its help (:func:`usage`): the package's (:data:`COMMANDS`), or a command's own
    (:data:`HUMAN`, ``sarnmt human <command>``).  :param about: a line on what they are for.  :param examples:
    command lines, ``{prog}`` the group's program name.  :param note: a closing line."""

    commands: dict[str, Command]
    about: str = ""
    examples: tuple[str, ...] = ()
    note: str = ""


HOST_PORT = (("--host", "host"), ("--port", "port"))
HUMAN = Group(
    {
        "create": Command(
            "cli.human",
            "sample sentences of a source file and 2+ system outputs into a task (one per language pair)",
            config="human_create",
            entry="create",
            flags=HOST_PORT,
        ),
        "serve": Command(
            "cli.human",
            "the ranking page for the annotators (http://127.0.0.1:8000/; --host 0.0.0.0 to listen elsewhere)",
            config="human_serve",
            entry="serve",
            flags=HOST_PORT,
        ),
        "export": Command(
            "cli.human",
            "Table 5 (Markdown, LaTeX, CSV) beside the paper's numbers, the raw judgements, the agreement",
            config="human_export",
            entry="export_command",
            flags=HOST_PORT,
        ),
        "annotators": Command(
            "cli.human",
            "a task's annotators and their sign-in tokens; add=[name,...] adds annotators",
            config="human_annotators",
            entry="annotators",
            flags=HOST_PORT,
        ),
    },
    about="A blind ranking of system outputs by human annotators, stored in SQLite, exported as the paper's Table 5.",
    examples=(
        "{prog} create db=human.sqlite pair=en_de source=test.en ref=test.de \\\n"
        "      hyps=[baseline.de,mean.de,attentive.de] names=[baseline,mean_residual,self_attentive_content] \\\n"
        "      annotators=[ana,ben]",
        "{prog} serve db=human.sqlite",
        "{prog} export db=human.sqlite output_dir=human-eval",
    ),
)
COMMANDS: dict[str, Command] = {
    "train": Command(
        "cli.train",
        "train a translation model (data=, model=, decoder=, optim=, trainer=, ...)",
        config="train",
        alias="sarnmt.train",
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
        "cli.human",
        "the human evaluation (Table 5): create, serve, export, annotators",
        hydra=False,
        group=HUMAN,
        alias="sarnmt.human",
    ),
    "bench": Command(
        "cli.bench", "the speed benchmark of every decoder beside its peers", hydra=False, alias="sarnmt.bench"
    ),
    "bench-lm": Command(
        "cli.bench_lm", "training speed of Table 6's language models", config="bench_lm", alias="sarnmt.bench.lm"
    ),
    "sweep-job": Command("cli.sweep_job", "one job of a table's sweep (what reproduce launches)", config="sweep_job"),
    "sweep-systems": Command(
        "cli.sweep_systems",
        "the table of every system of a seeds sweep",
        config="sweep_systems",
        alias="sarnmt.sweep.systems",
    ),
    "calibrate": Command(
        "cli.calibrate",
        "the seed-aware tests' error rates under a true null, simulated (docs/reproducing.md)",
        config="calibrate",
    ),
    "curves": Command("cli.curves", "training loss and dev cost/BLEU of one or more runs, in one PNG", hydra=False),
    "version": Command("cli.version", "sarnmt's, torch's and CUDA's versions (also sarnmt --version, -V)", hydra=False),
    "completion": Command("cli.completion", "the bash or zsh completion script (commands, Hydra groups)", hydra=False),
}
PACKAGE = Group(
    COMMANDS,
    examples=(
        "{prog} train decoder=baseline model=small trainer.max_epochs=20",
        "{prog} params model=paper decoder=all",
    ),
    note="sarnmt <command> and python -m sarnmt <command> are the same (python -m sarnmt.train is sarnmt train).",
)


def usage(prog: str = "sarnmt", group: Group = PACKAGE) -> str:
    """The help of a table of commands, for ``prog`` (``sarnmt``, ``python -m sarnmt``, ``sarnmt human``)."""
    width = max(map(len, group.commands))
    lines = [f"  {name:<{width}}  {command.summary}" for name, command in group.commands.items()]
    examples = [f"  {example.format(prog=prog)}" for example in group.examples]
    return (
        f"usage: {prog} <command> [group=option ...] [key=value ...]\n"
        f"       {prog} <command> --help     (its config groups, settings and examples)\n\n"
        + (f"{group.about}\n\n" if group.about else "")
        + "Commands:\n"
        + "\n".join(lines)
        + "\n\nExamples:\n"
        + "\n".join(examples)
        + "\n"
        + (f"\n{group.note}\n" if group.note else "")
    )


HELP_FLAGS = frozenset({"--help", "-h", "--hydra-help"})


def _help_only(cfg: Any) -> None:
    """The task of a Hydra application run for its help: never called (Hydra prints the help and exits first)."""
    raise AssertionError("a help flag was given: Hydra prints the help without running the task")


def run(name: str, args: Sequence[str], prog: str | None = None, entry: Callable[..., Any] | None = None) -> int:
    """Run command ``name`` of :data:`COMMANDS` on ``args`` (unparsed) and return its exit status; ``entry``: its
    entry point, where the caller has it (``python -m sarnmt.train``)."""
    return run_command(COMMANDS[name], args, prog or f"sarnmt {name}", entry)


def run_command(command: Command, args: Sequence[str], prog: str, entry: Callable[..., Any] | None = None) -> int:
    """Run ``command`` on ``args`` under the program name ``prog``: a group dispatches to its commands
    (:func:`dispatch`), a Hydra application's ``--help`` reads its config alone."""
    if command.group is not None:
        return dispatch(command.group, args, prog)
    if command.flags:
        try:
            args = flags_to_overrides(args, dict(command.flags))
        except InputError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            return USER_ERROR_STATUS
    if command.hydra and command.config and entry is None and HELP_FLAGS & set(args):
        from sarnmt.utils.compose import hydra_main
        from sarnmt.utils.hydra_app import run_hydra

        # Hydra prints the help from the config alone and exits before the task: the command's module, and torch,
        # Lightning and matplotlib with it, are not imported (sarnmt <command> --help in about a second)
        return run_hydra(prog, args, hydra_main(command.config)(_help_only))
    if entry is None:
        entry = getattr(importlib.import_module(f"sarnmt.{command.module}"), command.entry)
    if command.hydra:
        from sarnmt.utils.hydra_app import run_hydra  # hydra imported only to run a command, not for the list

        return run_hydra(prog, args, entry)
    return entry(list(args), prog=prog)


def flags_to_overrides(args: Sequence[str], flags: dict[str, str]) -> list[str]:
    """``--host H`` / ``--host=H`` → Hydra's ``host=H`` for each of ``flags`` (flag → key); everything else unchanged.

    :raises InputError: for a flag without its value."""
    out, k = [], 0
    while k < len(args):
        flag, eq, value = args[k].partition("=")
        if flag in flags:
            if not eq:
                if k + 1 >= len(args):
                    raise InputError(f"{flag} needs a value")
                value, k = args[k + 1], k + 1
            out.append(f"{flags[flag]}={value}")
        else:
            out.append(args[k])
        k += 1
    return out


def dispatch(group: Group, args: Sequence[str], prog: str) -> int:
    """Run the command of ``group`` that ``args[0]`` names on the rest; none, or help: the group's help (on stderr
    and status 2 when nothing was asked); an unknown one: one line naming the commands, status 2."""
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage(prog, group), end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else USER_ERROR_STATUS
    name, rest = args[0], args[1:]
    if name not in group.commands:
        print(f"error: unknown command {name!r}; commands: {', '.join(group.commands)}", file=sys.stderr, flush=True)
        return USER_ERROR_STATUS
    return run_command(group.commands[name], rest, f"{prog} {name}")


def alias(name: str, entry: Callable[..., Any] | None = None) -> NoReturn:
    """``python -m <alias> args`` (:attr:`Command.alias`): ``sarnmt <name> args`` under the alias's program name; exits
    with its status. ``sarnmt/train.py`` calls it with its entry point; a package below this floor reaches it through
    ``sarnmt/__main__.py`` (:func:`sarnmt.utils.hydra_app.run_alias`, :func:`aliased`)."""
    command = COMMANDS[name]
    sys.exit(run_command(command, sys.argv[1:], f"python -m {command.alias}", entry))


def aliased() -> str | None:
    """The command whose ``python -m`` alias (:attr:`Command.alias`) this process was started as: its main module's
    (``python -m sarnmt.human``: ``sarnmt.human.__main__``, ``human``); None for ``python -m sarnmt`` and the
    ``sarnmt`` script."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = spec.name.removesuffix(".__main__") if spec is not None else None
    return next((name for name, command in COMMANDS.items() if module and command.alias == module), None)


def main(argv: Sequence[str] | None = None, prog: str = "sarnmt") -> int:
    """The ``sarnmt`` console script and ``python -m sarnmt`` (``prog``): no command, or one not in
    :data:`COMMANDS`, prints the command list on stderr and returns 2."""
    args = list(sys.argv[1:] if argv is None else argv)  # the dispatcher: the one reader of sys.argv
    if args[:1] in (["-sc"], ["--shell-completion"]):  # what the completion scripts ask (sarnmt.cli.completion)
        from sarnmt.cli.completion import query

        return query(args, prog)
    if args[:1] in (["--version"], ["-V"]):
        args[0] = "version"
    return dispatch(PACKAGE, args, prog)
