"""The machine a benchmark runs on: the device it asks for, refused before any timing when the machine lacks it or
only emulates the precision asked for, and the description that goes into every record."""

from __future__ import annotations

import platform
from typing import Any

import torch

from sarnmt.errors import InputError
from sarnmt.utils.device import pick_device
from sarnmt.utils.precision import bf16_missing, check_precision


def resolve_device(name: str) -> torch.device:
    """:func:`~sarnmt.utils.device.pick_device`, refusing a CUDA device the machine does not have."""
    if name.split(":")[0] == "cuda" and not torch.cuda.is_available():
        raise ValueError("bench: device=cuda but no CUDA device is available (use device=cpu or device=auto)")
    try:
        return pick_device(name)
    except InputError as err:  # a name torch does not know, a CUDA index the machine lacks
        raise ValueError(f"bench: {err}") from err


def check_hardware(device: torch.device, precision: str) -> None:
    """Refuse, before any timing, a precision the device only emulates (its figures would say nothing).
    :raises ValueError: naming the device and what it lacks."""
    check_precision(precision)
    what = bf16_missing(device) if precision == "bf16" else None
    if what is not None:
        raise ValueError(
            f"bench: precision=bf16 but this {device.type} has no {what} (bfloat16 products would be "
            "emulated); use precision=fp32"
        )


def machine(device: torch.device) -> dict[str, Any]:
    """The device, torch version, threads, CPU (and GPU) and Python version of a record."""
    info = {
        "device": device.type,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info
