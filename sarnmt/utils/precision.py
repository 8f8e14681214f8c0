"""Numeric precision of decoding and of the benchmark: ``fp32``, or ``bf16`` autocast.

``bf16`` runs matrix products in bfloat16 (softmax, log-softmax and losses stay in fp32 under autocast). It pays on
GPUs and on CPUs with AMX or AVX-512 BF16 (``lscpu | grep amx``); elsewhere it can be slower. Translations can
differ from fp32 ones in a few words (docs/training.md gives the BLEU of both on Multi30K).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from sarnmt.errors import InputError, check_one_of

PRECISIONS = ("fp32", "bf16")


def check_precision(precision: str) -> str:
    """:raises InputError: for an unknown precision, in the one form of a choice check (call it before opening
    outputs).  :returns: ``precision``."""
    check_one_of("precision", precision, PRECISIONS)
    return precision


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices in hardware: a CUDA device of compute capability 8.0 or more
    (Ampere on), or a CPU with AVX-512 BF16 or AMX. Elsewhere PyTorch emulates bfloat16 products, more slowly than
    fp32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    cpu = getattr(torch, "cpu", None)
    probes = [getattr(cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(probe() for probe in probes if probe is not None)


def bf16_missing(device: torch.device) -> str | None:
    """What ``device`` lacks to multiply bfloat16 natively (``AVX-512 BF16 or AMX``, ``compute capability 8.0``),
    or None when it has it (:func:`native_bf16`)."""
    if native_bf16(device):
        return None
    return "compute capability 8.0" if device.type == "cuda" else "AVX-512 BF16 or AMX"


def check_native_bf16(device: torch.device, value: str, key: str = "precision") -> None:
    """Refuse bfloat16 on a device that only emulates its products: slower than fp32, so never what was meant.

    :param value: the setting (``bf16``, ``bf16-mixed``, ``bf16-true``, ``fp32``, ``32-true``, ...).
    :raises InputError: one line naming the key and the instruction set (or compute capability) the device lacks.
    """
    what = bf16_missing(device) if "bf16" in str(value) else None
    if what is not None:
        fp32 = "32-true" if key.startswith("trainer.") else "fp32"
        raise InputError(
            f"{key}={value}: this {device.type} has no {what}, so bfloat16 products would be emulated, slower "
            f"than fp32; use {key}={fp32} (lscpu | grep -o 'avx512_bf16\\|amx_bf16' shows what a CPU has)"
        )


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The autocast dtype in force for ``device_type`` ("cpu", "cuda"), or None (also on PyTorch < 2.4, which
    lacks the query)."""
    if not hasattr(torch, "get_autocast_dtype") or not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


@contextmanager
def precision_context(device: torch.device, precision: str) -> Iterator[None]:
    """Run the body in ``precision`` on ``device``: one of :data:`PRECISIONS`, trusted (a command checks its
    ``precision`` where it enters: :func:`check_precision`)."""
    assert precision in PRECISIONS, f"precision={precision!r} reached the run unchecked (check_precision)"
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        yield
