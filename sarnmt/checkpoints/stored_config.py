"""A checkpoint's stored model config is data, never code: the classes it may name, and the check that runs before
anything of it is built.

A config folder (the packaged ``sarnmt/conf``, a ``--config-dir``) is code: its ``_target_`` entries name any Python
callable, and Hydra's ``instantiate`` calls it. A checkpoint, which researchers pass around, is data: its model config
(``checkpoint["sarnmt"]["net_config"]``) is rebuilt by the model factory (:mod:`sarnmt.models.factory`) only when

- every ``_target_`` in it, at any depth, is on the allow-list (:func:`allowed_targets`: the ``_target_`` entries of
  the packaged ``model``, ``decoder`` and ``lm_model`` configs, the classes sarnmt builds models from, and the paths
  those classes had before they moved, :data:`~sarnmt.utils.hash_view.MOVED_TARGETS`), or lies in a module the user
  named with ``trust_targets=[mypkg]`` (a decoder of one's own);
- every interpolation in it is a plain reference to another key of the same config (``${..hidden_dim}``): a resolver
  (``${oc.env:SECRET}``, ``${oc.decode:...}``, any custom one) could read the environment or files, and is refused;
- it holds no Hydra key but ``_target_`` and ``_partial_`` (``_args_``, ``_recursive_``, ``_convert_`` are never
  written by sarnmt).

Anything else is refused with one line naming the key (:class:`StoredConfigError`) before any of it is built or
anything is written.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from sarnmt.errors import InputError, UserError
from sarnmt.utils.compose import config_dir
from sarnmt.utils.hash_view import MOVED_TARGETS

MODEL_GROUPS = ("model", "decoder", "lm_model")  # the config groups whose classes a checkpoint may name
HYDRA_KEYS = frozenset({"_target_", "_partial_"})  # the Hydra keys a stored model config may hold
MAX_DEPTH = 32  # a stored model config nests 4 levels (model.head.variant); deeper is not one sarnmt wrote
# ${key}, ${.key}, ${..a.b}, ${a[0]}: a reference to another key of the same config, no resolver (which has a colon)
PLAIN_REFERENCE = re.compile(r"\$\{\s*\.*[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*|\[\d+\])*\s*\}")
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


MAX_NODES = 100_000  # a model config holds ~40; a shared list is counted each time it is reached (pickle's memo)
PLAIN_SCALARS = (str, int, float, bool, type(None))


class StoredConfigError(UserError, ValueError):
    """A stored model config that names a class outside the allow-list, reads the environment or files through an
    interpolation, or holds a Hydra key sarnmt never writes; the message names the key."""


def plain_config(node: Any, where: str, key: str = "net_config", max_nodes: int = MAX_NODES) -> Any:
    """A fresh copy of a stored config made of plain types only, the object that is then checked
    (:func:`check_stored_config`) and built: the check and Hydra see one and the same tree.

    Dicts with string keys, lists, str, int, float, bool and None pass (a dict subclass, PyTorch's OrderedDict,
    becomes a dict); any other type, a tuple, set, bytes or tensor included, is refused by name, as OmegaConf would
    turn a tuple into a list and Hydra build every ``_target_`` inside it. The walk counts every node each time it is
    reached (a list shared a thousand times through pickle's memo counts a thousand times) and stops past
    ``max_nodes`` or :data:`MAX_DEPTH` levels, before anything is copied whole.

    :param where: what holds it, for the message (``checkpoint path/last.ckpt``).
    :raises StoredConfigError: naming the key and what is wrong.
    """
    seen = 0

    def copy(value: Any, at: str, depth: int) -> Any:
        nonlocal seen
        seen += 1
        if seen > max_nodes:
            raise StoredConfigError(
                f"{where}: {key} holds more than {max_nodes:,} values (counting shared ones each time they are "
                "reached); not a model config sarnmt wrote, refused without building anything"
            )
        if depth > MAX_DEPTH:
            raise StoredConfigError(
                f"{where}: {at[:200]} nests deeper than {MAX_DEPTH} levels; not a model config sarnmt wrote"
            )
        kind = type(value)
        if kind in PLAIN_SCALARS:
            return value
        if isinstance(value, dict) and kind.__module__ in ("builtins", "collections"):
            out = {}
            for name, item in value.items():
                if type(name) is not str:
                    raise StoredConfigError(
                        f"{where}: {at[:200]} has a key of type {type(name).__name__} ({str(name)[:40]!r}); a "
                        "stored config has string keys only, so it is refused without building anything"
                    )
                out[name] = copy(item, f"{at}.{name}", depth + 1)
            return out
        if kind is list:
            return [copy(item, f"{at}[{index}]", depth + 1) for index, item in enumerate(value)]
        raise StoredConfigError(
            f"{where}: {at[:200]} is a {kind.__name__}, which a stored config never holds (only dicts, lists, "
            "strings, numbers, booleans and null); refused without building anything"
        )

    return copy(node, key, 0)


def targets_of(node: Any) -> set[str]:
    """Every ``_target_`` string of a config node, at any depth (interpolations left unresolved)."""
    if isinstance(node, (DictConfig, ListConfig)):
        node = OmegaConf.to_container(node, resolve=False)
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "_target_" and isinstance(value, str):
                found.add(value)
            else:
                found |= targets_of(value)
    elif isinstance(node, list):
        for value in node:
            found |= targets_of(value)
    return found


@functools.cache
def allowed_targets() -> frozenset[str]:
    """The classes a stored model config may name: every ``_target_`` of the packaged ``model``, ``decoder`` and
    ``lm_model`` configs, and the earlier paths of those that moved (:data:`~sarnmt.utils.hash_view.MOVED_TARGETS`)."""
    shipped: set[str] = set()
    for group in MODEL_GROUPS:
        for path in sorted((config_dir() / group).glob("*.yaml")):
            shipped |= targets_of(OmegaConf.load(path))
    moved = {before for now, before in MOVED_TARGETS.items() if now in shipped}
    return frozenset(shipped | moved)


def check_trust(value: Any, key: str = "trust_targets") -> tuple[str, ...]:
    """``trust_targets=[mypkg, ...]``: modules whose classes a checkpoint may name (a decoder of one's own).

    :raises InputError: for an entry that is not a dotted module name, or names a standard-library module or sarnmt
        itself (sarnmt's own loadable classes are on the allow-list already; trusting a whole package would let a
        checkpoint call any of its functions).
    """
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InputError(f"{key}={value!r}: give a list of module names, e.g. {key}=[mypkg]")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not MODULE_NAME.fullmatch(name):
            raise InputError(f"{key}: {str(name)[:80]!r} is not a module name (e.g. {key}=[mypkg])")
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top in {"builtins", "sarnmt", "__main__"} or top in frameworks():
            raise InputError(
                f"{key}: {name!r} is not a module of your own; only a module you wrote (your decoder's) can be "
                "trusted, as every class and function in it can then be called by a checkpoint"
            )
    return names


# installers and their shims: present everywhere, never a module of one's own
TOOLING = frozenset({"pip", "setuptools", "pkg_resources", "wheel", "_distutils_hack", "distutils", "site"})


@functools.cache
def frameworks() -> frozenset[str]:
    """The top-level modules of every distribution sarnmt depends on (its requirements, extras included, and theirs,
    from the installed metadata) and of the installers: torch, numpy, lightning, hydra, omegaconf, ... Trusting one
    would let a checkpoint call any function in it (``torch.save``, ``numpy.savetxt``), so none can be trusted."""
    from importlib import metadata

    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    closure: set[str] = set()
    todo = ["sarnmt"]
    while todo:
        name = canonical(todo.pop())
        if name in closure:
            continue
        closure.add(name)
        try:
            requirements = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requirements:
            found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if found and (name == "sarnmt" or "extra ==" not in requirement):
                todo.append(found.group(1))
    modules = {
        module
        for module, distributions in metadata.packages_distributions().items()
        if any(canonical(d) in closure for d in distributions)
    }
    return frozenset((modules | TOOLING) - {"sarnmt"})


def defined_in(target: str, trust: Sequence[str]) -> bool:
    """Whether the object ``target`` names is defined in one of the ``trust`` modules (its ``__module__``), not
    merely reachable through one: ``mydec.shutil.copyfile`` is the standard library's ``copyfile``, imported by
    ``mydec``. Imports the trusted module to look (it is the user's own code)."""
    from hydra.utils import get_object

    try:
        obj = get_object(target)
    except Exception:  # Hydra wraps an import or attribute error in its own types
        return False
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and any(module == name or module.startswith(name + ".") for name in trust)


def trusted(target: str, trust: Sequence[str]) -> bool:
    """Whether ``target`` is on the allow-list, is a class path the run's own config names, or names an object
    defined in a trusted module (:func:`defined_in`)."""
    if target in allowed_targets() or target in trust:
        return True
    return any(target.startswith(name + ".") for name in trust) and defined_in(target, trust)


def check_stored_config(node: Any, where: str, trust: Sequence[str] = (), key: str = "net_config") -> list[str]:
    """Refuse a stored model config that could run anything when built (see the module docstring).

    :param where: what holds it, for the message (``checkpoint path/last.ckpt``).
    :param trust: module names from ``trust_targets`` (:func:`check_trust`).
    :returns: the classes it names that are not sarnmt's own but trusted (logged by the caller).
    :raises StoredConfigError: naming the key, e.g. ``net_config.decoder._target_``.
    """
    _walk(node, key, where, tuple(trust), 0)
    return sorted(target for target in targets_of(node) if target not in allowed_targets())


def _walk(node: Any, key: str, where: str, trust: tuple[str, ...], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise StoredConfigError(f"{where}: {key} nests deeper than {MAX_DEPTH} levels; not a model config sarnmt wrote")
    if isinstance(node, dict):
        for name, value in node.items():
            child = f"{key}.{name}"
            if name == "_target_":
                _check_target(value, child, where, trust)
            elif isinstance(name, str) and name.startswith("_") and name.endswith("_") and name not in HYDRA_KEYS:
                raise StoredConfigError(
                    f"{where}: {child[:200]} is a Hydra key sarnmt never stores in a model config; refused without "
                    "building anything"
                )
            else:
                _walk(value, child, where, trust, depth + 1)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _walk(value, f"{key}[{index}]", where, trust, depth + 1)
    elif isinstance(node, str) and "${" in PLAIN_REFERENCE.sub("", node):
        raise StoredConfigError(
            f"{where}: {key[:200]}={node[:120]!r} is an interpolation that is not a plain reference to another key "
            "(a resolver such as oc.env can read the environment or files); a checkpoint is data, so it is refused "
            "without building anything"
        )


def _check_target(value: Any, key: str, where: str, trust: tuple[str, ...]) -> None:
    if isinstance(value, str) and trusted(value, trust):
        return
    shown = repr(value)[:120] if not isinstance(value, str) else repr(value[:120])
    hint = ""
    top = value.split(".")[0] if isinstance(value, str) else ""
    if MODULE_NAME.fullmatch(top) and top not in sys.stdlib_module_names and top not in {"builtins", "sarnmt"}:
        module = value.rsplit(".", 1)[0] if "." in value else value
        hint = f"; if it is a decoder of your own, name its module: trust_targets=[{module}]"
    if isinstance(value, str) and top == "sarnmt":
        raise StoredConfigError(
            f"{where}: {key[:200]}={shown} is not a class this installation has among its models, decoder variants "
            "and language models (a checkpoint of another sarnmt version?); refused without building anything"
        )
    raise StoredConfigError(
        f"{where}: {key[:200]}={shown} is not a class sarnmt rebuilds models from (its own models, decoder variants "
        f"and language models); a checkpoint is data, so it is refused without building anything{hint}"
    )


def run_trust(cfg: DictConfig) -> tuple[str, ...]:
    """What a command trusts a checkpoint to name: its ``trust_targets`` and, for a run resuming or decoding its own
    checkpoints, the classes its own config (code) names in ``model`` and ``decoder``."""
    own = targets_of(cfg.get("model")) | targets_of(cfg.get("decoder"))
    return (*check_trust(cfg.get("trust_targets")), *sorted(own))
