"""What one benchmark run times: the ``bench`` config composed as every command's is (overrides, config folders of
one's own), and its systems: each of ``decoders`` on ``model``, each model of ``systems`` with its own default
decoder, each beside the peers of ``peers`` that implement it (:mod:`sarnmt.bench.peer`). ``sarnmt bench``
(:mod:`sarnmt.cli.bench`) composes through :func:`compose_bench` and times with :func:`sarnmt.bench.run.bench`."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig

from sarnmt.bench.peer import Peer
from sarnmt.bench.run import System
from sarnmt.errors import InputError
from sarnmt.models.factory import check_model
from sarnmt.utils.compose import SEARCHPATH_KEYS, config_dir, group_options


def peers_of(cfg: DictConfig, model: DictConfig, decoder: DictConfig) -> dict[str, Peer]:
    """The peers of ``cfg.peers`` that implement the system of ``model`` and ``decoder`` (:mod:`sarnmt.bench.peer`);
    none where ``peers`` is null.

    :raises InputError: naming a peer whose ``_target_`` cannot be built (not importable: run from the checkout)."""
    peers = {}
    for name, node in (cfg.peers or {}).items():
        try:
            peer = instantiate(node, _partial_=True)(model=model, decoder=decoder)
        except InstantiationException as err:
            reason = str(err).strip().splitlines()[0].split(", set env var HYDRA_FULL_ERROR")[0].rstrip(".")
            raise InputError(
                f"bench: peers.{name}: {node.get('_target_')!r} cannot be built ({reason}); a checkout's peers "
                "import from its root: make bench there"
            ) from err
        if peer.implements:
            peers[name] = peer
    return peers


def no_peers(overrides: list[str]) -> list[str]:
    """``overrides`` with ``peers=null`` (none: sarnmt timed alone) in the form Hydra takes: where a config folder
    has a ``peers`` group (the checkout's), the option is removed (``~peers``; Hydra refuses null for a group) and
    the key keeps its empty default; where none has, the key is set to null, which :func:`peers_of` reads as none."""
    if "peers=null" not in overrides or not group_options("peers", overrides):
        return overrides
    return ["~peers" if arg == "peers=null" else arg for arg in overrides]


def compose_bench(overrides: list[str]) -> tuple[DictConfig, dict[str, System]]:
    """The bench config and what it times: each of ``decoders`` on ``model``, then each model of ``systems`` with its
    own default decoder; each with the peers that implement it (none for ``peers=null``: :func:`no_peers`). The config
    folders ``overrides`` add (``hydra.searchpath``) are searched for these too: a decoder of one's own is timed as
    the packaged ones are."""
    searchpath = [arg for arg in overrides if arg.startswith(SEARCHPATH_KEYS)]
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name="bench", overrides=no_peers(overrides))
        decoders = group_options("decoder", overrides)
        unknown = [name for name in cfg.decoders if name not in decoders]
        if unknown:
            raise InputError(f"bench: unknown decoders {unknown}; choose from {decoders}")
        models = group_options("model", overrides)
        unknown = [name for name in cfg.profile if name not in [*cfg.decoders, *cfg.systems]]
        if unknown:
            raise ValueError(
                f"bench: profile names {unknown}, which are not timed; choose from decoders/systems "
                f"{[*cfg.decoders, *cfg.systems]}"
            )
        unknown = [name for name in cfg.workloads if name not in cfg.lengths]
        if unknown:
            raise ValueError(f"bench: unknown workloads {unknown}; choose from {list(cfg.lengths)}")
        unknown = [name for name in cfg.systems if name not in models]
        if unknown:
            raise ValueError(f"bench: unknown systems {unknown}; choose from the model= options {models}")
        pairs = {
            name: (cfg.model, compose(config_name="train", overrides=[*searchpath, f"decoder={name}"]).decoder)
            for name in cfg.decoders
        }
        for name in cfg.systems:
            composed = compose(config_name="train", overrides=[*searchpath, f"model={name}"])
            pairs[name] = (composed.model, composed.decoder)
    for model, decoder in pairs.values():
        check_model(model, decoder)
    systems = {name: System(model, decoder, peers_of(cfg, model, decoder)) for name, (model, decoder) in pairs.items()}
    return cfg, systems
