"""Keep freed memory in the process (glibc ``mallopt``) for decoding on CPU.

Beam search allocates and frees buffers of tens of megabytes at every step (log-probabilities over B·k × V, the
attention's B·k × S × 2d energies). glibc's malloc serves blocks that large with fresh ``mmap`` pages and returns
them on ``free``, so every step pays page faults to zero them again; measured on 2 CPU cores, that is about a tenth
of batched beam search. Raising the mmap and trim thresholds keeps the freed blocks for reuse (what the PyTorch CPU
performance guides get by preloading jemalloc or tcmalloc). The process keeps its peak memory instead of returning
it to the system, which a decoding command can afford. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("sarnmt")

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
_LIMIT = 1 << 30  # 1 GiB: blocks below it come from the heap and stay there when freed


def keep_freed_memory() -> bool:
    """:returns: whether glibc accepted the settings (False off glibc)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = all(
        mallopt(option, value) == 1
        for option, value in ((M_MMAP_THRESHOLD, _LIMIT), (M_TRIM_THRESHOLD, _LIMIT), (M_TOP_PAD, 256 << 20))
    )
    log.debug("glibc malloc keeps freed memory: %s", ok)
    return ok
