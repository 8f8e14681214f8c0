"""Train a word-level language model (Table 6): ``python -m sarnmt lm [lm_model=...] [lm_data=...] [key=value ...]``.

:func:`train_lm` is a pure function of the composed config (tests and the table sweep call it); :func:`main` is the
Hydra entry. The run ends with the test perplexity of the selected checkpoint (lowest valid perplexity), every test
word counted once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import Timer
from omegaconf import DictConfig, OmegaConf

from sarnmt.cli.train import fit, output_dir
from sarnmt.errors import reported
from sarnmt.lm.module import LanguageModelModule
from sarnmt.models.factory import build_language_model, count_parameters, plain_config
from sarnmt.training.identity import resume_point, run_identity
from sarnmt.training.run_lock import run_lock
from sarnmt.training.settings import check_training
from sarnmt.utils.compose import hydra_main
from sarnmt.utils.instantiate import instantiate_dict
from sarnmt.utils.runtime import finish_wandb, quiet_known_warnings

log = logging.getLogger("sarnmt")
AfterFit = Callable[[L.Trainer, dict[str, Any]], dict[str, Any]]


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
        check_training(cfg)  # seeds and learning rate, before any data is read
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
        loggers = instantiate_dict(cfg.get("logger"))
        callbacks = instantiate_dict(cfg.get("callbacks"))
        trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
        for logger in trainer.loggers:
            logger.log_hyperparams({"cfg": OmegaConf.to_container(cfg, resolve=True), "parameters": parameters})
        fit(trainer, module, datamodule, cfg.ckpt_path)
        best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
        result: dict[str, Any] = {key: float(value) for key, value in trainer.callback_metrics.items()}
        result.update(best_model_path=best, parameters=parameters, report=datamodule.report)
        timers = [cb for cb in trainer.callbacks if isinstance(cb, Timer)]
        if timers:
            result["train_seconds"] = timers[0].time_elapsed("train") + timers[0].time_elapsed("validate")
        if cfg.test:
            trainer.test(module, datamodule=datamodule, ckpt_path=best or None, verbose=False)
            result.update({key: float(value) for key, value in trainer.callback_metrics.items()})
        if after is not None:
            result.update(after(trainer, result))
    return result


def report(result: dict[str, Any]) -> str:
    """The lines printed at the end of a run."""
    lines = []
    if result.get("test/ppl") is not None:
        unknown = (result.get("report") or {}).get("splits", {}).get("test", {}).get("unk_oov")
        note = f", {unknown:,} of them <unk>" if unknown is not None else ""
        lines.append(f"test perplexity = {result['test/ppl']:.2f}  ({int(result['test/words']):,} words{note})")
    if result.get("val/ppl") is not None:
        lines.append(f"last valid perplexity = {result['val/ppl']:.2f}")
    lines.append(f"best checkpoint: {result['best_model_path'] or '(none saved)'}")
    return "\n".join(lines)


@hydra_main("lm")
def main(cfg: DictConfig) -> float | None:
    with reported():
        result = train_lm(cfg)
    print(report(result), flush=True)
    return result.get("val/ppl")
