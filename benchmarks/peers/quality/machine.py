"""What every record says about where it ran: the CPU (model, cores, the instruction sets that decide bf16) and the
harness's own commit."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


@functools.cache
def machine() -> dict[str, Any]:
    """CPU model, logical cores, memory, and which of :data:`FLAGS` ``/proc/cpuinfo`` lists."""
    model, flags = platform.processor() or "?", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model in ("?", "", platform.processor()):
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": memory,
        "flags": {flag: flag in flags for flag in FLAGS},
        "threads_per_job": 1,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def harness_code() -> dict[str, Any]:
    """The checkout's commit and whether the harness or the package differ from it (``git status``)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--", "benchmarks", "sarnmt")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}
