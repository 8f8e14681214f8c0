"""``threads=``: how many CPU threads a command's PyTorch uses (its intra-op pool), one setting for ``train``,
``translate``, ``evaluate``, ``lm`` and ``bench`` alike.

``null`` (the default) keeps PyTorch's own choice, one thread per core, the fastest on a machine the command has to
itself. On a busy or shared machine set it lower: each thread that waits for a core slows every product, and on a
2-core machine with other work the main job made 0.05 updates/s at PyTorch's default and finished in 34 minutes with
one thread (``threads=1``). The sweeps run each job on one thread (``cpu_threads=1`` in ``scripts/rerun-mini.sh``).
"""

from __future__ import annotations

import os

import torch

from sarnmt.errors import InputError

MAX_THREADS = 1024


def check_threads(value: object, key: str = "threads") -> int | None:
    """:returns: the count, or None for PyTorch's default.  :raises InputError: for anything but null or a whole
    number from 1 to :data:`MAX_THREADS` (``threads=0`` and ``threads=-2`` included), one line naming the key."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_THREADS:
        raise InputError(
            f"{key}={value!r}: must be a whole number of threads from 1 to {MAX_THREADS}, or null (PyTorch's "
            "default: one per core)"
        )
    return value


def apply_threads(value: object, key: str = "threads") -> int | None:
    """Check ``value`` (:func:`check_threads`) and set PyTorch's intra-op threads to it (and ``OMP_NUM_THREADS`` for
    processes it starts); None leaves PyTorch's default.  :returns: the count set, or None."""
    threads = check_threads(value, key)
    if threads is not None:
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
    return threads
