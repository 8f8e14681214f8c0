"""GPU measurement a reader can trust: CUDA-event times, their spread, the GPU-busy fraction,
now ÷ before, and the hash of the code that ran.

- :func:`event_seconds`: ``repeats`` (>= 20 in ``make gpu-check``) times of one call after ``warmup`` untimed ones,
  each between two CUDA events recorded on the stream around it (the GPU's own clock: what the device took from the
  first launch to the last kernel's end, host gaps included), the host waiting only once per repeat, after it; on a
  CPU the host's clock.
- :class:`Spread`: median, quartiles and extremes of those times, and the relative spread (q3 − q1) / median, which
  says whether two figures differ by more than their noise.
- :func:`busy_fraction`: one profiled call (``torch.profiler``, CUDA activity): the time the device ran kernels or
  copies (the union of their intervals, so overlapping streams are not counted twice) ÷ the wall time of the call.
  A host-bound step shows as a low fraction; the issue's target is >= 0.7.
- :func:`ratios`: now ÷ before for every figure both records have.
- :func:`imported_source_hash`: 16 hex digits over the package files *imported* in this process (path and bytes),
  plus the package's configs: a device copy has no clean commit, so a record names the code by what ran.
"""

from __future__ import annotations

import hashlib
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from sarnmt.errors import check_range


@dataclass(frozen=True)
class Spread:
    """Summary of repeated times (seconds).  :param n: repeats.  :param relative: (q3 − q1) / median."""

    n: int
    median: float
    q1: float
    q3: float
    low: float
    high: float
    relative: float

    @classmethod
    def of(cls, samples: list[float]) -> Spread:
        """:raises ValueError: on fewer than two samples (no spread to tell)."""
        if len(samples) < 2:
            raise ValueError(f"a spread needs at least two repeats, got {len(samples)}")
        q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        return cls(len(samples), median, q1, q3, min(samples), max(samples), (q3 - q1) / median if median else 0.0)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def event_seconds(fn: Callable[[], object], device: torch.device, repeats: int = 20, warmup: int = 3) -> list[float]:
    """Seconds per call of ``fn``, ``repeats`` times after ``warmup`` untimed calls (module docstring).

    :raises InputError: ``repeats`` below 1 or ``warmup`` below 0 (:func:`~sarnmt.errors.check_range`)."""
    check_range("repeats", repeats, 1, whole=True)
    check_range("warmup", warmup, 0, whole=True)
    for _ in range(warmup):
        fn()
    out = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        return out
    for _ in range(repeats):
        begin = time.perf_counter()
        fn()
        out.append(time.perf_counter() - begin)
    return out


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` intervals (any unit): time covered at least once."""
    total, reach = 0.0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def busy_fraction(fn: Callable[[], object], device: torch.device) -> tuple[float | None, str]:
    """The share of one call's wall time in which the GPU ran kernels or copies (module docstring).

    :returns: (the fraction, how it was measured); (None, why) off CUDA, where there is no device to be busy."""
    if device.type != "cuda":
        return None, f"no GPU-busy fraction on {device.type}: it is kernel time on a CUDA device over wall time"
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        begin = time.perf_counter()
        fn()
        torch.cuda.synchronize(device)
        wall = time.perf_counter() - begin
    intervals = [
        (e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
    ]
    busy = union_seconds(intervals) / 1e6  # the profiler's times are microseconds
    return busy / wall if wall > 0 else None, "torch.profiler: union of CUDA kernel and copy intervals / wall time"


def ratios(now: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, float]:
    """now ÷ before for every key whose values are positive numbers in both (rates: above 1 is faster now)."""
    out = {}
    for key, value in now.items():
        old = before.get(key)
        if _number(value) and _number(old) and old > 0:
            out[key] = value / old
    return out


def ratio_lines(now: Mapping[str, Any], before: Mapping[str, Any], before_name: str) -> list[str]:
    """One line per figure: ``key: now (before at <name>: before) = ratio×``, aligned."""
    width = max((len(k) for k in now), default=0)
    lines = []
    for key, ratio in ratios(now, before).items():
        lines.append(f"{key:<{width}}  {now[key]:>12,.1f}  ({before_name}: {before[key]:,.1f})  now/before {ratio:.3f}")
    return lines


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def imported_source_hash(package: str = "sarnmt", modules: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A hash of the code that ran: the source files of ``package``'s modules imported so far (``sys.modules``),
    each as its path relative to the package folder and its bytes, sorted, and the package's YAML configs.

    :returns: ``{"source_hash": 16 hex digits, "files": count, "package_dir": folder}``."""
    modules = sys.modules if modules is None else modules
    root_module = modules.get(package)
    if root_module is None or getattr(root_module, "__file__", None) is None:
        raise ValueError(f"{package} is not imported")
    root = Path(root_module.__file__).resolve().parent
    files = set()
    for name, module in list(modules.items()):
        path = getattr(module, "__file__", None)
        if (name == package or name.startswith(package + ".")) and path and path.endswith(".py"):
            files.add(Path(path).resolve())
    files |= {p.resolve() for p in root.rglob("*.yaml") if "__pycache__" not in p.parts}
    digest = hashlib.sha256()
    for path in sorted(files):
        if not path.is_relative_to(root):
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return {"source_hash": digest.hexdigest()[:16], "files": len(files), "package_dir": str(root)}
