"""The ranges of a training run's own settings, checked before any data is read (``train`` and ``lm``): the seeds
and the learning rate. The decoding settings are checked where a decoding config is read
(:func:`sarnmt.decoding.search.check_decoding`).

- ``seed`` and ``data.seed``: 0 .. 2³² − 1 (:data:`MAX_SEED`), what Lightning's ``seed_everything`` and NumPy accept
  (a 22-digit seed ended in a traceback there);
- ``optim.lr``: a finite number above 0 (``nan`` trained a model of NaNs, or ended in a traceback at the first step).
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from sarnmt.errors import InputError, check_range

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
