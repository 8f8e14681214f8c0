"""The ranges of a training run's own settings, checked before any data is read (``train`` and ``lm``): the seeds
and the learning rate. The decoding settings are checked where a decoding config is read
(:func:`sarnmt.decoding.search.check_decoding`).

- ``seed`` and ``data.seed``: 0 .. 2³² − 1 (:data:`MAX_SEED`), what Lightning's ``seed_everything`` and NumPy accept
  (a 22-digit seed ended in a traceback there);
- ``optim.lr``: a finite number above 0 (``nan`` trained a model of NaNs, or ended in a traceback at the first step);
- ``callbacks.nonfinite.max_consecutive`` and ``trainer.strategy.max_graphs`` (where the run has them): whole
  numbers, 1 or more (:class:`~sarnmt.training.nonfinite.NonFiniteGuard` and
  :class:`~sarnmt.training.capture.CaptureStrategy` trust them);
- ``trainer.precision``: a bf16 setting only where the device multiplies bfloat16 natively
  (:func:`~sarnmt.utils.precision.check_native_bf16`).
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig, OmegaConf

from sarnmt.errors import InputError, check_range
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
    for key in ("callbacks.nonfinite.max_consecutive", "trainer.strategy.max_graphs"):
        value = OmegaConf.select(cfg, key)
        if value is not None:
            check_range(key, value, 1, whole=True)
    precision = OmegaConf.select(cfg, "trainer.precision")
    if precision is not None:
        check_native_bf16(trainer_device(OmegaConf.select(cfg, "trainer.accelerator")), precision, "trainer.precision")


def trainer_device(accelerator: str | None) -> torch.device:
    """The device Lightning trains on for ``trainer.accelerator`` (``auto``: CUDA where there is one)."""
    if accelerator in ("gpu", "cuda") or (accelerator in (None, "auto") and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")
