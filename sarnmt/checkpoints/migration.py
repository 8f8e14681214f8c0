"""Checkpoints written by earlier versions, read as today's: a stored model config that names a class by the path it
had before it moved (:data:`~sarnmt.utils.hash_view.MOVED_TARGETS`, e.g. a language model of a checkpoint written
when it lived in ``sarnmt.models.lm``) names it by its path now. :func:`sarnmt.checkpoints.reading.read_checkpoint`
applies it to every checkpoint it reads, before the config is checked against the allow-list.

The weights themselves need no migration: a checkpoint is loaded with ``torch.load(weights_only=True)``, so its pickle
names no sarnmt module (only tensors and plain containers), and no class that moved is ever unpickled. The early
checkpoints' resolved decoder sizes are dropped where every model is built (:func:`sarnmt.models.factory.build_model`).
"""

from __future__ import annotations

from typing import Any

from sarnmt.utils.hash_view import MOVED_TARGETS, rename_targets

# a class's path before it moved -> its path now (the rows of MOVED_TARGETS): a stored model config may name either
CURRENT_TARGETS = {first: now for now, first in MOVED_TARGETS.items()}


def current_targets(node: Any) -> Any:
    """``node`` with every ``_target_`` that names a class by the path it had before it moved set to the class's path
    now (:data:`CURRENT_TARGETS`)."""
    return rename_targets(node, CURRENT_TARGETS)
