"""Build callbacks and loggers from dicts of ``_target_`` nodes (``callbacks=`` and ``logger=`` groups)."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig


def instantiate_dict(nodes: DictConfig | None) -> list:
    """Instantiate every ``_target_`` node of a dict config, skipping entries set to null."""
    if not nodes:
        return []
    if not isinstance(nodes, DictConfig):
        raise TypeError(f"expected a dict of _target_ nodes, got {type(nodes).__name__}")
    built = []
    for key, node in nodes.items():
        if node is None:
            continue
        if not isinstance(node, DictConfig) or "_target_" not in node:
            raise ValueError(f"config entry {key!r} is not a _target_ node: {node}")
        built.append(instantiate(node))
    return built
