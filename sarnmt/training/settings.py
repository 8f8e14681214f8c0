"""The ranges of a training run's own settings, checked before any data is read (``train`` and ``lm``): the seeds,
the optimizer and the callbacks' limits. The decoding settings are checked where a decoding config is read
(:func:`sarnmt.decoding.search.check_decoding`).

- ``seed`` and ``data.seed``: 0 .. 2³² − 1 (:data:`MAX_SEED`), what Lightning's ``seed_everything`` and NumPy accept
  (a 22-digit seed ended in a traceback there);
- ``optim.lr``: a finite number above 0 (``nan`` trained a model of NaNs, or ended in a traceback at the first step);
  the optimizer's ``eps``, ``weight_decay``, ``rho`` and ``betas`` in PyTorch's ranges, ``compiled`` a flag
  (:func:`check_optimizer`);
- ``callbacks.nonfinite.max_consecutive`` and ``trainer.strategy.max_graphs`` (where the run has them): whole
  numbers, 1 or more (:class:`~sarnmt.training.nonfinite.NonFiniteGuard` and
  :class:`~sarnmt.training.capture.CaptureStrategy` trust them); ``callbacks.resume_checkpoint``'s interval
  (:func:`check_resume_interval`); ``callbacks.early_stopping.patience`` 1 or more (:func:`check_patience`);
- ``trainer.precision``: a bf16 setting only where the device multiplies bfloat16 natively
  (:func:`~sarnmt.utils.precision.check_native_bf16`).
"""

from __future__ import annotations

import re

import torch
from omegaconf import DictConfig, OmegaConf

from sarnmt.errors import InputError, check_flag, check_range
from sarnmt.utils.precision import check_native_bf16

MAX_SEED = 2**32 - 1  # numpy.random.seed and lightning.seed_everything: an unsigned 32-bit integer


def check_training(cfg: DictConfig) -> None:
    """:raises InputError: ``<key>=<value>: must be ...``, one line naming the key and its range."""
    for key in ("seed", "data.seed"):
        value = OmegaConf.select(cfg, key)
        if value is not None:
            check_range(key, value, 0, MAX_SEED, "the seeds NumPy and Lightning accept: an unsigned 32-bit integer")
    lr = OmegaConf.select(cfg, "optim.lr")
    if lr is not None:
        check_range("optim.lr", lr, 0)
        if lr == 0:
            raise InputError("optim.lr=0: must be more than 0 (nothing would be learned)")
    check_optimizer(cfg)
    for key in ("callbacks.nonfinite.max_consecutive", "trainer.strategy.max_graphs"):
        value = OmegaConf.select(cfg, key)
        if value is not None:
            check_range(key, value, 1, whole=True)
    resume = OmegaConf.select(cfg, "callbacks.resume_checkpoint")
    if resume is not None:
        check_resume_interval(resume)
    stopping = OmegaConf.select(cfg, "callbacks.early_stopping")
    if stopping is not None:
        check_patience(stopping)
    precision = OmegaConf.select(cfg, "trainer.precision")
    if precision is not None:
        check_native_bf16(trainer_device(OmegaConf.select(cfg, "trainer.accelerator")), precision, "trainer.precision")


def check_optimizer(cfg: DictConfig) -> None:
    """The optimizer's other settings, where the run has them (the PyTorch optimizer refused them only at the first
    step, with a traceback): ``optim.eps`` and ``optim.weight_decay`` 0 or more, Adadelta's ``optim.rho`` in [0, 1],
    Adam's ``optim.betas`` two numbers in [0, 1); Adadelta's ``optim.compiled`` true or false (``maybe`` was taken
    as true).

    :raises InputError: ``<key>=<value>: must be ...``, one line naming the key (``optim.betas.0`` for a beta)."""
    for key in ("optim.eps", "optim.weight_decay"):
        value = OmegaConf.select(cfg, key)
        if value is not None:
            check_range(key, value, 0)
    compiled = OmegaConf.select(cfg, "optim.compiled")
    if compiled is not None:
        check_flag("optim.compiled", compiled)
    rho = OmegaConf.select(cfg, "optim.rho")
    if rho is not None:
        check_range("optim.rho", rho, 0, 1, "a decay rate")
    betas = OmegaConf.select(cfg, "optim.betas")
    if betas is None:
        return
    if not OmegaConf.is_list(betas) or len(betas) != 2:
        shown = OmegaConf.to_container(betas) if OmegaConf.is_config(betas) else betas
        raise InputError(f"optim.betas={shown}: must be two decay rates (the gradient's and its square's)")
    for index, beta in enumerate(betas):
        check_range(f"optim.betas.{index}", beta, 0, 1, "a decay rate")
        if beta == 1:
            raise InputError(f"optim.betas.{index}={beta}: must be less than 1 (a decay rate)")


def check_resume_interval(node: DictConfig) -> None:
    """``callbacks.resume_checkpoint``'s interval (:class:`~sarnmt.training.resume.ResumeCheckpoint`): exactly one of
    ``train_time_interval`` and ``every_n_train_steps``, the steps a whole number, 1 or more (Lightning took 0 as
    no step interval at all).

    :raises InputError: naming ``callbacks.resume_checkpoint.every_n_train_steps``, one line."""
    key = "callbacks.resume_checkpoint"
    steps, interval = node.get("every_n_train_steps"), node.get("train_time_interval")
    if (steps is None) == (interval is None):
        given = "both are null" if steps is None else "both are given"
        shown = "null" if steps is None else steps
        raise InputError(
            f"{key}.every_n_train_steps={shown}: give it or {key}.train_time_interval, the other null ({given})"
        )
    if steps is not None:
        check_range(f"{key}.every_n_train_steps", steps, 1, whole=True)


def check_patience(node: DictConfig) -> None:
    """``callbacks.early_stopping.patience``, the validations without improvement that stop training (Lightning's
    ``EarlyStopping``): a whole number, 1 or more. Lightning takes any number: 0 or less stops at the first
    validation without improvement, as 1 does, so ``-1`` (fairseq's "never stop early") stopped a run where it was
    meant to go on; to train without early stopping, drop the callback (``~callbacks.early_stopping``).

    The key named is the one the user sets: ``validation.patience`` where the callback's is its interpolation (the
    configs' ``${validation.patience}``).

    :raises InputError: ``<key>=<value>: must be ...`` (:func:`~sarnmt.errors.check_range`), one line."""
    if "patience" not in node:
        return
    raw = OmegaConf.to_container(node, resolve=False)["patience"]
    source = re.fullmatch(r"\$\{([\w.]+)\}", raw) if isinstance(raw, str) else None
    key = source.group(1) if source else "callbacks.early_stopping.patience"
    why = (
        "the validations without improvement that stop training; 0 or less would stop at the first, as 1 does; "
        "to train without early stopping: ~callbacks.early_stopping"
    )
    check_range(key, node.patience, 1, whole=True, why_below=why)


def trainer_device(accelerator: str | None) -> torch.device:
    """The device Lightning trains on for ``trainer.accelerator`` (``auto``: CUDA where there is one)."""
    if accelerator in ("gpu", "cuda") or (accelerator in (None, "auto") and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")
