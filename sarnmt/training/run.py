"""A training run as a function of the composed config: :func:`train` fits a translation model, then tests the best
checkpoint (and the average of the last ones, ``average_last=N``), and returns the run's figures.

``sarnmt train`` (:mod:`sarnmt.cli.train`) parses the command line, calls :func:`train` and prints its
:func:`~sarnmt.cli.train.report`; the table sweep (:mod:`sarnmt.sweep.job`) and the tests call :func:`train`
directly. :func:`fit`, :func:`make_trainer`, :func:`fitted` and :func:`output_dir` serve the language model's run
too (:mod:`sarnmt.lm.run`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import Timer
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from sarnmt.checkpoints.averaging import average_checkpoints, last_checkpoints
from sarnmt.checkpoints.stored_config import run_trust
from sarnmt.decoding.search import Search, build_search
from sarnmt.errors import InputError, check_one_of
from sarnmt.kernels.choice import check_choice
from sarnmt.models.factory import build_model, check_model, count_parameters, net_config
from sarnmt.training.identity import resume_point, run_identity
from sarnmt.training.lit_module import TranslationModule
from sarnmt.training.loss import LOSS_NORMALIZATIONS
from sarnmt.training.preemption import Preemption
from sarnmt.training.run_lock import run_lock
from sarnmt.training.settings import check_training
from sarnmt.utils.instantiate import instantiate_dict
from sarnmt.utils.runtime import finish_wandb, quiet_known_warnings
from sarnmt.utils.threads import apply_threads

log = logging.getLogger("sarnmt")
AfterFit = Callable[[L.Trainer, dict[str, Any]], dict[str, Any]]


def build_module(
    cfg: DictConfig, src_vocab_size: int, tgt_vocab_size: int, searches: tuple[Search, Search]
) -> TranslationModule:
    """The model (``model=`` + ``decoder=``) wrapped in its LightningModule.  :param searches: validation's and the
    final test's (:func:`check_settings`)."""
    return TranslationModule(
        net=build_model(cfg.model, cfg.decoder, src_vocab_size, tgt_vocab_size, cfg.kernels),
        optimizer=instantiate(cfg.optim),
        loss_normalization=cfg.loss,
        val_search=searches[0],
        bleu=cfg.val_bleu,
        net_config=net_config(cfg.model, cfg.decoder, src_vocab_size, tgt_vocab_size),
        test_search=searches[1],
        train_seed=cfg.seed,
    )


def train(cfg: DictConfig, after: AfterFit | None = None) -> dict[str, Any]:
    """Fit, then test the best checkpoint. The run holds its folder's lock throughout
    (:mod:`sarnmt.training.run_lock`); a resumed run must be the same run as its checkpoint's
    (:mod:`sarnmt.training.identity`).

    :param after: called with the trainer and the result so far once training and testing are done, while the
        loggers are still open (the table sweeps evaluate there); what it returns is added to the result.
    :returns: metrics (floats) plus ``best_model_path``, ``test_bleu``, ``bleu_signature``, ``parameters`` and
        ``train_seconds`` (training and validation time, summed over resumed runs, when a Timer callback ran).
    """
    quiet_known_warnings()
    with finish_wandb(), run_lock(output_dir(cfg), cfg):  # one run at a time in a run folder
        searches = check_settings(cfg)
        apply_threads(cfg.get("threads"))
        resumed = resume_point(cfg.ckpt_path, cfg) if cfg.ckpt_path else None  # the same run's checkpoint?
        L.seed_everything(cfg.seed, workers=True, verbose=False)
        datamodule = instantiate(cfg.data)
        datamodule.prepare_data()
        datamodule.setup("fit")
        module = build_module(cfg, datamodule.src_vocab_size, datamodule.tgt_vocab_size, searches)
        module.identity = run_identity(cfg, datamodule)
        if resumed is not None:  # the same vocabularies and corpus? Refused before the trainer touches anything
            resumed.check_data(module.identity, module.hparams.net_config)
        parameters = count_parameters(module.net)
        log.info(
            "model: %s parameters (V_src=%d, V_tgt=%d)",
            f"{parameters:,}",
            datamodule.src_vocab_size,
            datamodule.tgt_vocab_size,
        )
        trainer = make_trainer(cfg, parameters)
        fit(trainer, module, datamodule, cfg.ckpt_path)
        result = final_tests(cfg, trainer, module, datamodule, fitted(trainer, parameters=parameters))
        if after is not None:
            result.update(after(trainer, result))
    return result


def check_settings(cfg: DictConfig) -> tuple[Search, Search]:
    """Every setting of the composed config checked once, before any data is read: averaging, the model= / decoder=
    pair and the model's settings, seeds and optimizer, the loss normalization, both searches (built here, from their
    checked settings) and the kernels.

    :returns: the validation and final-test searches.  :raises InputError: naming the key (a
        :class:`~sarnmt.models.factory.ModelConfigError` for a pair that does not go together)."""
    check_averaging(cfg)
    check_model(cfg.model, cfg.decoder)
    check_training(cfg)  # seeds, optimizer, guard, capture and resume limits
    check_one_of("loss", cfg.loss, LOSS_NORMALIZATIONS)
    searches = build_search(cfg.val_decoding, "val_decoding"), build_search(cfg.decoding, "decoding")
    check_choice(cfg.kernels)
    return searches


def make_trainer(cfg: DictConfig, parameters: int) -> L.Trainer:
    """The Lightning trainer of ``cfg.trainer`` with the config's loggers and callbacks, the config and parameter
    count logged as hyperparameters."""
    loggers = instantiate_dict(cfg.get("logger"))
    callbacks = instantiate_dict(cfg.get("callbacks"))
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    for logger in trainer.loggers:
        logger.log_hyperparams({"cfg": OmegaConf.to_container(cfg, resolve=True), "parameters": parameters})
    return trainer


def fitted(trainer: L.Trainer, **extra: Any) -> dict[str, Any]:
    """The figures of a fit: the logged metrics (floats), ``best_model_path``, then ``extra``, then
    ``train_seconds`` (training and validation time, when a Timer callback ran)."""
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    result: dict[str, Any] = {key: float(value) for key, value in trainer.callback_metrics.items()}
    result.update(best_model_path=best, **extra)
    timers = [cb for cb in trainer.callbacks if isinstance(cb, Timer)]
    if timers:
        result["train_seconds"] = timers[0].time_elapsed("train") + timers[0].time_elapsed("validate")
    return result


def final_tests(cfg: DictConfig, trainer: L.Trainer, module: TranslationModule, datamodule, result: dict[str, Any]):
    """Test the best checkpoint (``test_bleu``, ``bleu_signature`` and the ``test/*`` metrics), then the average of
    the last ``average_last`` ones: ``result``, with these added."""
    if cfg.test and datamodule.has_split("test"):
        best = result["best_model_path"]
        trainer.test(module, datamodule=datamodule, ckpt_path=best or None, verbose=False)
        result.update({key: float(value) for key, value in trainer.callback_metrics.items()})
        result["test_bleu"] = result.get("test/bleu")
        result["bleu_signature"] = module.bleu_signature
    if cfg.average_last > 1:
        result.update(evaluate_average(cfg, trainer, module, datamodule))
    return result


def output_dir(cfg: DictConfig) -> str | None:
    """The run folder (``paths.output_dir``); None where it cannot be resolved (a config composed outside Hydra)."""
    return OmegaConf.select(cfg, "paths.output_dir", throw_on_resolution_failure=False)


def fit(trainer: L.Trainer, module: L.LightningModule, datamodule, ckpt_path: str | None) -> None:
    """``trainer.fit``; a stop on a preemption signal becomes :class:`~sarnmt.errors.TrainingStopped` (exit status
    128 + the signal), after the checkpoint was written (:mod:`sarnmt.training.preemption`); SIGINT, after
    Lightning's graceful shutdown, a ``KeyboardInterrupt`` again (:func:`~sarnmt.errors.reported`: status 130)."""
    try:
        with warnings.catch_warnings():
            if ckpt_path:  # a resumed run goes on in its own folder (hydra/resumable.yaml), checkpoints/ not empty
                warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
            trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    except SIGTERMException:  # a SystemExit too: it must be matched before the clause below
        stops = [cb for cb in trainer.callbacks if isinstance(cb, Preemption) and cb.saved_at is not None]
        if not stops:
            raise
        raise stops[0].stopped() from None
    except SystemExit:
        if trainer.interrupted:  # Lightning's answer to SIGINT: a graceful shutdown, then exit status 1
            raise KeyboardInterrupt from None  # reported(): one line, status 130
        raise


def check_averaging(cfg: DictConfig) -> None:
    """``average_last`` needs that many checkpoints kept: fail before training, not after it."""
    keep = OmegaConf.select(cfg, "callbacks.model_checkpoint.save_top_k")
    if cfg.average_last > 1 and (keep is None or (keep != -1 and keep < cfg.average_last)):
        raise InputError(
            f"average_last={cfg.average_last} needs callbacks.model_checkpoint.save_top_k >= "
            f"{cfg.average_last} (or -1), but it is {keep}"
        )


def evaluate_average(cfg: DictConfig, trainer: L.Trainer, module: TranslationModule, datamodule) -> dict[str, Any]:
    """Average the newest ``average_last`` kept checkpoints and test the average (``test_average/*`` metrics)."""
    directory = Path(trainer.checkpoint_callback.dirpath)
    output = directory / f"average-{cfg.average_last}.ckpt"
    trust = run_trust(cfg)  # the run's own checkpoints: the classes its config (code) names
    paths = last_checkpoints(directory, cfg.average_last, exclude=output, trust=trust)
    average_checkpoints(paths, output, trust)
    log.info("averaged %s into %s", ", ".join(p.name for p in paths), output)
    result: dict[str, Any] = {"average_model_path": str(output)}
    if cfg.test and datamodule.has_split("test"):
        trainer.test(module, datamodule=datamodule, ckpt_path=str(output), verbose=False)
        result.update(
            {
                key.replace("test/", "test_average/"): float(value)
                for key, value in trainer.callback_metrics.items()
                if key.startswith("test/")
            }
        )
    return result
