"""GPU measurement (sarnmt/bench/device_timing.py): what the CPU can check of it (repeats, spread, the busy
fraction's arithmetic and its message off CUDA, now ÷ before, the imported code's hash); the CUDA events and the
profiler in the test marked ``gpu``."""

from __future__ import annotations

import importlib
import sys
import time

import pytest
import torch

from sarnmt.bench.device_timing import (
    Spread,
    busy_fraction,
    event_seconds,
    imported_source_hash,
    ratio_lines,
    ratios,
    union_seconds,
)
from sarnmt.errors import InputError

CPU = torch.device("cpu")


def test_repeats_come_after_the_warm_up():
    calls = []
    times = event_seconds(lambda: calls.append(time.sleep(0.001)), CPU, repeats=20, warmup=3)
    assert len(calls) == 23 and len(times) == 20 and all(t >= 0.001 for t in times)
    with pytest.raises(InputError, match=r"^repeats=0: must be 1 or more$"):
        event_seconds(lambda: None, CPU, repeats=0)
    with pytest.raises(InputError, match=r"^repeats=2\.5: must be a whole number, 1 or more$"):
        event_seconds(lambda: None, CPU, repeats=2.5)
    with pytest.raises(InputError, match=r"^warmup=-1: must be 0 or more$"):
        event_seconds(lambda: None, CPU, warmup=-1)


def test_the_spread_of_repeats():
    spread = Spread.of([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (spread.n, spread.median, spread.q1, spread.q3, spread.low, spread.high) == (5, 3.0, 2.0, 4.0, 1.0, 100.0)
    assert spread.relative == pytest.approx(2 / 3) and spread.as_dict()["median"] == 3.0
    with pytest.raises(ValueError, match="at least two repeats"):
        Spread.of([1.0])


def test_busy_time_counts_overlaps_once():
    assert union_seconds([(0, 2), (1, 3), (5, 6), (5.5, 5.8), (10, 10)]) == 4
    assert union_seconds([]) == 0
    fraction, how = busy_fraction(lambda: None, CPU)
    assert fraction is None and how.startswith("no GPU-busy fraction on cpu")


def test_now_over_before():
    now = {"beam5_sent_s": 2400.0, "train_tok_s": 150_000, "device": "H100", "missing": 3.0, "zero": 5.0}
    before = {"beam5_sent_s": 800.0, "train_tok_s": 100_000, "device": "H100", "zero": 0}
    assert ratios(now, before) == {"beam5_sent_s": 3.0, "train_tok_s": 1.5}
    lines = ratio_lines(now, before, "abc123")
    assert lines[0].split() == ["beam5_sent_s", "2,400.0", "(abc123:", "800.0)", "now/before", "3.000"]
    assert len(lines) == 2


def test_the_hash_follows_the_imported_files(tmp_path, monkeypatch):
    package = tmp_path / "h4pkg"
    (package / "conf").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "used.py").write_text("X = 1\n")
    (package / "unused.py").write_text("Y = 1\n")
    (package / "conf" / "a.yaml").write_text("a: 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("h4pkg.used")
    try:
        first = imported_source_hash("h4pkg")
        assert first["files"] == 3 and len(first["source_hash"]) == 16  # __init__, used, the config
        (package / "unused.py").write_text("Y = 2\n")
        assert imported_source_hash("h4pkg")["source_hash"] == first["source_hash"]  # not imported: not the code
        (package / "used.py").write_text("X = 2\n")
        second = imported_source_hash("h4pkg")["source_hash"]
        assert second != first["source_hash"]
        (package / "conf" / "a.yaml").write_text("a: 2\n")
        assert imported_source_hash("h4pkg")["source_hash"] not in (first["source_hash"], second)
    finally:
        for name in [n for n in sys.modules if n == "h4pkg" or n.startswith("h4pkg.")]:
            del sys.modules[name]
    with pytest.raises(ValueError, match="h4pkg is not imported"):
        imported_source_hash("h4pkg")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_events_and_the_busy_fraction_on_the_gpu():
    device = torch.device("cuda")
    a = torch.randn(4096, 4096, device=device)
    times = event_seconds(lambda: a @ a, device, repeats=20)
    assert len(times) == 20 and Spread.of(times).median > 0
    busy, _ = busy_fraction(lambda: [a @ a for _ in range(20)], device)
    assert 0.5 < busy <= 1.05  # large products back to back: the device is busy nearly all the time
    idle, _ = busy_fraction(lambda: [(a[:8, :8] + 1, time.sleep(0.002)) for _ in range(10)], device)
    assert idle < 0.2  # tiny kernels between host sleeps: mostly idle
