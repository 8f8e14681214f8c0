"""Out of device memory while choosing a batch size: halve it, say so, and go on."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import torch

log = logging.getLogger("sarnmt")
T = TypeVar("T")


def halve_on_oom(run: Callable[[int], T], size: int, minimum: int = 1, what: str = "batch size") -> tuple[int, T]:
    """``run(size)``; where it runs out of device memory (``torch.OutOfMemoryError``), a warning, the size halved
    (not below ``minimum``), the cache emptied, and the run tried again.

    :returns: the size that ran (to be recorded) and what ``run`` returned.
    :raises torch.OutOfMemoryError: when even ``minimum`` does not fit.
    """
    while True:
        try:
            return size, run(size)
        except torch.OutOfMemoryError:
            if size <= minimum:
                raise
            smaller = max(minimum, size // 2)
            log.warning("out of device memory at %s %d; halving it to %d and going on", what, size, smaller)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            size = smaller
