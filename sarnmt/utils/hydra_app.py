"""Running a command under a program name: :func:`run_hydra` runs a Hydra application (``sarnmt train``, ``sarnmt
human serve``); :func:`run_alias` makes a package's ``python -m`` alias (``python -m sarnmt.human``) the command it
stands for.

Hydra reads the command line from ``sys.argv``, so running a Hydra application on arguments of one's own means
setting ``sys.argv`` to ``[program, *args]`` for the call; this module and the dispatcher (:func:`sarnmt.cli.main`)
are the only code that reads or sets ``sys.argv`` (tests/test_cli.py checks it). It lies below every command, so that
a package below the commands' floor (``sarnmt.human``, ``sarnmt.bench``) can run its alias through it without
importing :mod:`sarnmt.cli`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from sarnmt.errors import FULL_ERROR, USER_FULL_ERROR, InputError, describe, reported
from sarnmt.utils.compose import check_user_configs


def run_hydra(prog: str, args: Sequence[str], app: Callable[[], Any]) -> int:
    """Run the Hydra application ``app`` on ``args`` under the program name ``prog`` (``sys.argv`` set for the
    call, and restored after); the config folders the command line adds are checked first
    (:func:`~sarnmt.utils.compose.check_user_configs`).

    Hydra prints its own config errors (an option or a group that does not exist, a key not in the config) as several
    lines and exits 1; for the call, ``HYDRA_FULL_ERROR=1`` makes it raise them instead, so that
    :func:`~sarnmt.errors.reported` says each in one ``error:`` line with exit status 2, as for every other error. The
    user's own ``HYDRA_FULL_ERROR`` (tracebacks wanted or not) is kept in ``SARNMT_FULL_ERROR``, which
    :func:`~sarnmt.errors.verbose` reads first, for this process and the jobs it starts.
    """
    from hydra.errors import ConfigCompositionException

    with reported():  # --config-dir / hydra.searchpath folders that do not exist, configs that shadow packaged ones
        check_user_configs(args)
    with _hydra_command_line(prog, args), reported():
        try:
            app()
        except ConfigCompositionException as err:  # a group, option or key the config does not have
            raise InputError(f"{describe(err)} ({prog} --help lists the groups and settings)") from err
    return 0


@contextmanager
def _hydra_command_line(prog: str, args: Sequence[str]) -> Iterator[None]:
    """``sys.argv = [prog, *args]`` and ``HYDRA_FULL_ERROR=1`` (the user's own value kept in ``SARNMT_FULL_ERROR``)
    for the block; both restored after it."""
    saved_argv, saved_env = sys.argv, {key: os.environ.get(key) for key in (FULL_ERROR, USER_FULL_ERROR)}
    os.environ.setdefault(USER_FULL_ERROR, os.environ.get(FULL_ERROR, ""))
    os.environ[FULL_ERROR] = "1"
    sys.argv = [prog, *args]
    try:
        yield
    finally:
        sys.argv = saved_argv
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_alias() -> NoReturn:
    """``python -m <package> args``, an alias of a command that a package below the commands' floor keeps for scripts
    (``sarnmt/human/__main__.py``, ``python -m sarnmt.human``): the package's own command-line program
    (``sarnmt/__main__.py``, above every floor) run in this process, by name, as ``python -m`` runs it; the command
    table says which command the alias is (:attr:`sarnmt.cli.Command.alias`). The alias so names the program, never the
    commands' package: nothing below :mod:`sarnmt.cli` imports it."""
    import runpy

    runpy.run_module("sarnmt", run_name="__main__")  # alter_sys=False: the alias stays the process's __main__
    raise AssertionError("sarnmt/__main__.py ends in sys.exit")
