"""What decides a run's result, as a view of its config: the settings a sweep record's hash and a run's stored identity
are computed from (:func:`hash_view`), and the classes that moved since records and checkpoints were first written
(:data:`MOVED_TARGETS`). Below the checkpoints, the training side and the sweeps, which read it
(:mod:`sarnmt.checkpoints.migration`, :mod:`sarnmt.training.identity`, :mod:`sarnmt.sweep.records`)."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

HASHED = (
    "data",
    "model",
    "decoder",
    "optim",
    "loss",
    "seed",
    "decoding",
    "average_last",
    "trainer.max_epochs",
    "trainer.min_epochs",
    "trainer.max_steps",
    "trainer.max_time",
    "trainer.precision",
    "trainer.gradient_clip_val",
    "trainer.gradient_clip_algorithm",
    "trainer.val_check_interval",
    "trainer.check_val_every_n_epoch",
    "trainer.accumulate_grad_batches",
    "callbacks.model_checkpoint.monitor",
    "callbacks.model_checkpoint.mode",
    "callbacks.early_stopping.monitor",
    "callbacks.early_stopping.mode",
    "callbacks.early_stopping.patience",
    "callbacks.early_stopping.min_delta",
)
# keys added after records were first written, at the value that gives the behaviour from before they existed: left
# out of the hash at that value, so the records written before them stay current (any other value is hashed)
HASH_NEUTRAL = {("decoding", "min_len"): 0, ("decoding", "batch_tokens"): None, ("data", "order_seed"): None}
# classes that moved to another module after records were first written: new dotted path -> the path the records were
# hashed with. A moved class trains the same thing, so every ``_target_`` of the hash view is hashed under its first
# path and the records written before the move stay current; so do the run identities stored in checkpoints
# (sarnmt/training/identity.py), and checkpoints whose stored model config names a moved class are read with its new
# path (sarnmt/checkpoints/migration.py). Add a row (never change one) whenever a class that a config names moves again.
MOVED_TARGETS = {
    # sarnmt.data split into text/, corpora/ and loading/ (issue 17)
    "sarnmt.data.loading.prepared_corpus.CorpusDataModule": "sarnmt.data.corpus_datamodule.CorpusDataModule",
    "sarnmt.data.loading.in_memory.ToyDataModule": "sarnmt.data.text_datamodules.ToyDataModule",
    "sarnmt.data.loading.in_memory.FilesDataModule": "sarnmt.data.text_datamodules.FilesDataModule",
    # the training side to sarnmt/training/, the language model to sarnmt/lm/ (issue 30)
    "sarnmt.training.optim.Adadelta": "sarnmt.optim.Adadelta",
    "sarnmt.lm.datamodule.LanguageModelDataModule": "sarnmt.data.loading.lm.LanguageModelDataModule",
    "sarnmt.lm.model.RecurrentLM": "sarnmt.models.lm.model.RecurrentLM",
    "sarnmt.lm.heads.PlainOutput": "sarnmt.models.lm.heads.PlainOutput",
    "sarnmt.lm.heads.ResidualOutput": "sarnmt.models.lm.heads.ResidualOutput",
    "sarnmt.lm.daniluk.AttentionOutput": "sarnmt.models.lm.daniluk.AttentionOutput",
    "sarnmt.lm.daniluk.NgramOutput": "sarnmt.models.lm.daniluk.NgramOutput",
}
# keys of `data` that say where files are or how fast they are read, not what is read
DATA_VOLATILE = ("root", "cache_dir", "workers", "num_workers", "url_base", "checksums", "eval_batch_size")


def hash_view(cfg: DictConfig) -> dict[str, Any]:
    """The resolved values of the :data:`HASHED` keys (those that decide what a job trains and how it is
    evaluated), ``data`` without :data:`DATA_VOLATILE`. Paths, loggers, devices, progress bars and checkpoint
    intervals are left out, so moving a sweep or resuming it on other hardware keeps its records current; a key at its
    :data:`HASH_NEUTRAL` value is left out and a moved class's ``_target_`` is read as its first path
    (:data:`MOVED_TARGETS`), so records written before either change keep their hash."""
    full = OmegaConf.to_container(cfg, resolve=True)
    view: dict[str, Any] = {}
    for dotted in HASHED:
        node: Any = full
        for key in dotted.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        view[dotted] = node
    if isinstance(view["data"], dict):
        view["data"] = {k: v for k, v in view["data"].items() if k not in DATA_VOLATILE}
    for (group, key), neutral in HASH_NEUTRAL.items():
        if isinstance(view.get(group), dict) and key in view[group] and view[group][key] == neutral:
            view[group] = {k: v for k, v in view[group].items() if k != key}
    return rename_targets(view, MOVED_TARGETS)  # a moved class is hashed under its first path


def rename_targets(node: Any, paths: dict[str, str]) -> Any:
    """``node`` (a plain config tree of dicts and lists) with every ``_target_`` that ``paths`` names replaced by
    what it maps to: :data:`MOVED_TARGETS` gives each moved class its first path (the hash view), its inverse the
    path it has now (checkpoints written before a move)."""
    if isinstance(node, dict):
        return {
            k: paths.get(v, v) if k == "_target_" and isinstance(v, str) else rename_targets(v, paths)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [rename_targets(v, paths) for v in node]
    return node


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": [2]}`` -> ``{"a.b": 1, "c": [2]}`` (lists are values)."""
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out
