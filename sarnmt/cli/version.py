"""``sarnmt --version`` (``-V``, ``sarnmt version``): which sarnmt, on which torch, with which CUDA.

Three lines, the first ``sarnmt <version>`` (what ``pip show`` and the CHANGELOG call it), then torch's version and
its CUDA: the CUDA version torch was built with and the devices it sees, or ``cpu`` for a CPU build (or a CUDA build
on a machine without a GPU, which runs on the CPU), and the Python. What a bug report needs first.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence

EXAMPLES = "Examples:\n  sarnmt --version\n  sarnmt version"


def cuda_line() -> str:
    """``cuda 12.1, 1 device (NVIDIA H100 80GB HBM3)``, ``cuda 12.1 build, no device: cpu``, or ``cpu``."""
    import torch

    built = torch.version.cuda
    if not built:
        return "cpu"
    if not torch.cuda.is_available():
        return f"cuda {built} build, no device: cpu"
    count = torch.cuda.device_count()
    names = sorted({torch.cuda.get_device_name(k) for k in range(count)})
    return f"cuda {built}, {count} device{'s' if count != 1 else ''} ({', '.join(names)})"


def version_text() -> str:
    import torch

    import sarnmt

    return (
        f"sarnmt {sarnmt.__version__}\n"
        f"torch {torch.__version__}, {cuda_line()}\n"
        f"python {platform.python_version()} ({platform.system().lower()} {platform.machine()})\n"
    )


def main(args: Sequence[str] = (), prog: str = "sarnmt version") -> int:
    """Print :func:`version_text`; it takes no arguments."""
    from sarnmt.errors import USER_ERROR_STATUS

    if list(args) in (["-h"], ["--help"]):
        print(f"usage: {prog}\n\nsarnmt's version, torch's, and CUDA's (or cpu).\n\n{EXAMPLES}")
        return 0
    if list(args):
        print(f"error: {prog} takes no arguments, got {' '.join(args)}", file=sys.stderr, flush=True)
        return USER_ERROR_STATUS
    print(version_text(), end="", flush=True)
    return 0
