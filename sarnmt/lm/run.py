"""A language model's training run as a function of the composed config (Table 6): :func:`train_lm` fits, then tests
the selected checkpoint (lowest valid perplexity), every test word counted once.

``sarnmt lm`` (:mod:`sarnmt.cli.lm`) parses the command line, calls :func:`train_lm` and prints its report; the table
sweep (:mod:`sarnmt.sweep.job`) and the tests call :func:`train_lm` directly. The trainer, the fit and its figures are
a translation run's (:mod:`sarnmt.training.run`).
"""

from __future__ import annotations

import logging
from typing import Any

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig

from sarnmt.lm.module import LanguageModelModule
from sarnmt.models.factory import build_language_model, check_language_model, count_parameters, plain_config
from sarnmt.training.identity import resume_point, run_identity
from sarnmt.training.run import AfterFit, fit, fitted, make_trainer, output_dir
from sarnmt.training.run_lock import run_lock
from sarnmt.training.settings import check_training
from sarnmt.utils.runtime import finish_wandb, quiet_known_warnings
from sarnmt.utils.threads import apply_threads

log = logging.getLogger("sarnmt")


def build_lm_module(cfg: DictConfig, vocab_size: int) -> LanguageModelModule:
    """The model (``lm_model=``) wrapped in its LightningModule."""
    return LanguageModelModule(
        net=build_language_model(cfg.model, vocab_size),
        optimizer=instantiate(cfg.optim),
        net_config={"model": plain_config(cfg.model), "vocab_size": vocab_size},
        train_seed=cfg.seed,
    )


def train_lm(cfg: DictConfig, after: AfterFit | None = None) -> dict[str, Any]:
    """Fit, then test the selected checkpoint.

    :param after: called with the trainer and the result once training and testing are done, loggers still open;
        what it returns is added to the result.
    :returns: the logged metrics (floats: ``val/ppl``, ``test/ppl``, ``test/loss``, ``test/words`` ...) plus
        ``best_model_path``, ``parameters``, ``train_seconds`` and the data's ``report`` (words and unknown words
        per split).
    """
    quiet_known_warnings()
    with finish_wandb(), run_lock(output_dir(cfg), cfg):  # one run at a time in a run folder (training/run_lock.py)
        # a resumed run is the same run as its checkpoint's (training/identity.py): the config before any data is read
        check_training(cfg)  # seeds, optimizer, guard, capture and resume limits, before any data is read
        check_language_model(cfg.model)
        apply_threads(cfg.get("threads"))
        resumed = resume_point(cfg.ckpt_path, cfg, task="lm") if cfg.ckpt_path else None
        L.seed_everything(cfg.seed, workers=True, verbose=False)
        datamodule = instantiate(cfg.data)
        datamodule.prepare_data()
        datamodule.setup("fit")
        module = build_lm_module(cfg, datamodule.vocab_size)
        module.identity = run_identity(cfg, datamodule)
        if resumed is not None:  # the vocabulary and corpus
            resumed.check_data(module.identity, module.hparams.net_config)
        parameters = count_parameters(module.net)
        log.info("language model: %s parameters (V=%d)", f"{parameters:,}", datamodule.vocab_size)
        trainer = make_trainer(cfg, parameters)
        fit(trainer, module, datamodule, cfg.ckpt_path)
        result = fitted(trainer, parameters=parameters, report=datamodule.report)
        if cfg.test:
            trainer.test(module, datamodule=datamodule, ckpt_path=result["best_model_path"] or None, verbose=False)
            result.update({key: float(value) for key, value in trainer.callback_metrics.items()})
        if after is not None:
            result.update(after(trainer, result))
    return result
