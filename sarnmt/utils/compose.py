"""Where the configs are (:func:`config_dir`, the one place that locates them, and :func:`specs_dir`, the sweep's
table and scale files beside them), how every command's Hydra entry point finds them (:func:`hydra_main`), and
composing a config from code, inside a Hydra app (the sweep job) or outside it (tests, tools)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from sarnmt.errors import InputError
from sarnmt.utils.yaml_bounds import check_yaml_file

SEARCHPATH_KEYS = ("hydra.searchpath=", "+hydra.searchpath=", "++hydra.searchpath=")


@functools.cache
def config_dir() -> Path:
    """The folder of the packaged Hydra configs, ``sarnmt/conf``: the one place that says where they are; every
    command, :func:`compose`, the model factory and ``python -m sarnmt.human`` ask it.

    It is ``importlib.resources.files("sarnmt") / "conf"``, the configs as package data of the package that is
    imported: the checkout's ``sarnmt/conf`` in an editable install, ``site-packages/sarnmt/conf`` in an installed
    wheel (pyproject.toml declares every YAML file under it package data). pip unpacks a wheel into files, so this is
    a real folder, which Hydra takes as an absolute ``config_path`` of ``@hydra.main`` (:func:`hydra_main`) and as
    ``initialize_config_dir``'s folder. Hydra 1.3 would also take ``pkg://sarnmt.conf`` there, but a file path keeps
    the files Hydra names in its messages and ``hydra.runtime.config_sources`` openable; a relative ``config_path``
    would be relative to the module of each decorated function (``sarnmt/cli/train.py``, a user's script), not to
    the package.

    Configs of one's own are added, not edited in here: ``--config-dir DIR`` or ``hydra.searchpath=[file://DIR]``.
    Hydra searches those folders after this one, so a packaged config of the same group and name wins
    (:func:`check_user_configs` says so).
    """
    return Path(str(resources.files("sarnmt") / "conf")).resolve()


@functools.cache
def specs_dir() -> Path:
    """The folder of the packaged sweep specs, ``sarnmt/sweep/specs``: the paper's tables (``tables/table<N>.yaml``),
    the scales they run at (``scales/<scale>.yaml``) and the human evaluation's numbers (``human/table5.yaml``),
    found as :func:`config_dir` finds the configs (package data of the imported package, so a wheel installed
    outside any checkout has them: ``sarnmt reproduce`` and ``sarnmt tables`` read them from there)."""
    return Path(str(resources.files("sarnmt") / "sweep" / "specs")).resolve()


def _user_dirs(argv: Sequence[str]) -> Iterator[tuple[str, str]]:
    """``(how it was given, folder)`` of each config folder a command line adds: ``--config-dir``/``-cd`` and the
    ``file://`` (or scheme-less) entries of ``hydra.searchpath=[...]``; ``pkg://`` entries are Hydra's to check."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = list(argv)
    for k, arg in enumerate(args):
        for flag in ("--config-dir", "-cd"):
            if arg == flag and k + 1 < len(args):
                yield flag, args[k + 1]
            elif arg.startswith(f"{flag}="):
                yield flag, arg.split("=", 1)[1]
        if arg.startswith(SEARCHPATH_KEYS):
            try:
                value = OverridesParser.create().parse_overrides([arg])[0].value()
            except Exception:  # a malformed override: Hydra's own message says what is wrong with it
                continue
            for entry in value if isinstance(value, list) else [value]:
                entry = str(entry)
                if entry.startswith("file://") or "://" not in entry:
                    yield "hydra.searchpath", entry.removeprefix("file://")


def check_user_configs(argv: Sequence[str]) -> list[str]:
    """Check the config folders a command line adds (:func:`_user_dirs`) before Hydra reads them, and the packaged one.

    :returns: one warning line for each config of a user folder that has the group and name of a packaged one
        (Hydra takes the packaged one, which comes first in its search path), also printed on stderr.
    :raises InputError: naming a yaml file of a user folder that is not valid YAML or whose aliases expand beyond a
        bound (:func:`~sarnmt.utils.yaml_bounds.check_yaml_file`), a folder that does not exist (Hydra would stop
        with its own message for ``--config-dir``, and only warn for ``hydra.searchpath``), or the packaged folder,
        where an installation lacks it (a wheel built without its package data).
    """
    packaged = config_dir()
    if not (packaged / "train.yaml").is_file():
        raise InputError(f"sarnmt's configs are missing from {packaged}: this installation lacks its package data")
    warnings = []
    for how, folder in _user_dirs(argv):
        path = Path(folder)
        if not path.is_dir():
            what = "is not a folder" if path.exists() else "no such folder"
            raise InputError(f"{how} {folder}: {what} (a folder of configs of your own, laid out as {packaged})")
        for user_file in sorted(path.rglob("*.yaml")):
            check_yaml_file(user_file)  # valid, and no alias bomb (sarnmt/utils/yaml_bounds.py)
            name = user_file.relative_to(path)
            if (packaged / name).is_file():
                warnings.append(
                    f"warning: {user_file} has the group and name of the packaged config {packaged / name}, which "
                    f"Hydra uses instead: give yours another name ({name.with_suffix('').as_posix()})"
                )
    for line in warnings:
        print(line, file=sys.stderr, flush=True)
    return warnings


def group_options(group: str, argv: Sequence[str] = ()) -> list[str]:
    """The options of a config group: the packaged ones and those of the config folders that ``argv`` adds
    (``--config-dir``, ``hydra.searchpath``): the group is the registry, a variant of one's own included."""
    folders = [config_dir(), *(Path(folder) for _, folder in _user_dirs(argv))]
    return sorted({path.stem for folder in folders for path in (folder / group).glob("*.yaml")})


def hydra_main(config_name: str) -> Callable[[Callable[[DictConfig], Any]], Callable[..., Any]]:
    """``@hydra.main`` on the packaged configs (:func:`config_dir`) with ``config_name`` as the primary config: how
    every command starts. :func:`sarnmt.utils.hydra_app.run_hydra`, which runs it on a command line, checks the
    config folders that command line adds first (:func:`check_user_configs`)."""
    import hydra

    return hydra.main(version_base="1.3", config_path=os.fspath(config_dir()), config_name=config_name)


def command_groups(config_name: str) -> str:
    """The config groups of ``sarnmt/conf/<config_name>.yaml``'s defaults list (Hydra's own left out), one line each
    with the group's options and the default: what ``sarnmt <command> --help`` lists (the ``sarnmt_groups``
    resolver of ``sarnmt/conf/hydra/help/sarnmt.yaml``)."""
    from omegaconf import OmegaConf

    primary = OmegaConf.load(config_dir() / f"{config_name}.yaml")
    lines = []
    for entry in primary.get("defaults", []):
        if not isinstance(entry, DictConfig):
            continue
        for key, default in entry.items():
            group = str(key).split("@")[0].removeprefix("/")
            if group.startswith(("override ", "optional ")) or group == "hydra" or group.startswith("hydra/"):
                continue
            options = ", ".join(sorted(path.stem for path in (config_dir() / group).glob("*.yaml")))
            lines.append(f"{key}: {options}  [default: {'null' if default is None else default}]")
    return "\n".join(lines) or "(none: every setting is a key=value)"


def resume_run_dir(ckpt_path: str | None, fresh: str) -> str:
    """The run folder of a training command (the ``sarnmt_run_dir`` resolver of ``sarnmt/conf/hydra/resumable.yaml``,
    ``hydra.run.dir`` of ``train`` and ``lm``): where ``ckpt_path`` names a checkpoint in a run's ``checkpoints/``
    folder (``<run>/checkpoints/last.ckpt``), the resumed run goes on in ``<run>``, so that its checkpoints, logs
    (``csv/version_<k>``, ``<command>.log``) and selected checkpoint stay the run's; otherwise ``fresh``, a new
    folder. ``hydra.run.dir=`` on the command line still wins."""
    if ckpt_path:
        path = Path(str(ckpt_path))
        if path.parent.name == "checkpoints":
            return os.fspath(path.parent.parent)
    return fresh


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("sarnmt_groups"):
        OmegaConf.register_new_resolver("sarnmt_groups", command_groups)
    if not OmegaConf.has_resolver("sarnmt_run_dir"):
        OmegaConf.register_new_resolver("sarnmt_run_dir", resume_run_dir)


_register_resolvers()


def compose(config_name: str, overrides: Sequence[str] = (), return_hydra_config: bool = False) -> DictConfig:
    """``sarnmt/conf/<config_name>.yaml`` with ``overrides``, as ``python -m sarnmt.<name> <overrides>`` would see it.

    Inside a running Hydra app (whose search path starts at :func:`config_dir`) the app's Hydra composes it; elsewhere
    a Hydra is initialised on :func:`config_dir` for the call.
    """
    if GlobalHydra.instance().is_initialized():
        return hydra_compose(config_name, overrides=list(overrides), return_hydra_config=return_hydra_config)
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        return hydra_compose(config_name, overrides=list(overrides), return_hydra_config=return_hydra_config)
