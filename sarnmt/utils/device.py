"""Which device a command runs on."""

from __future__ import annotations

import torch

from sarnmt.errors import InputError

COMPUTE = ("cpu", "cuda", "mps")  # the device types a command can run on


def pick_device(name: str) -> torch.device:
    """``auto``: CUDA when available, else CPU; ``cpu``, ``cuda`` or ``cuda:N`` only when the machine has it.

    :raises InputError: naming ``device=`` for a device this machine does not have, a name torch does not know, or
        one sarnmt does not compute on (``meta``: tensors without data).
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as err:
        raise InputError(f"device={name}: not a device; use auto, cpu, cuda or cuda:N") from err
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"device={name}: this machine has no CUDA device; use device=cpu or device=auto")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise InputError(
                f"device={name}: this machine has {torch.cuda.device_count()} CUDA device(s), cuda:0 to "
                f"cuda:{torch.cuda.device_count() - 1}"
            )
    elif device.type not in COMPUTE:  # meta (no data), xla, hpu ...: nothing sarnmt decodes or trains on
        raise InputError(f"device={name}: not a device sarnmt computes on; use auto, cpu, cuda or cuda:N")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"device={name}: MPS is not available on this machine; use device=cpu or device=auto")
    return device
