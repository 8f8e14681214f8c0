"""Where the time to the selected checkpoint goes: updates needed, CPU per update, and work re-done after resumes.

A run's measured CPU time to its selected checkpoint (``training.cpu_to_selected_s``, summed over its attempts)
mixes three things: how many updates the tool needs, what one update costs (with its share of the validations),
and the work each resume re-does since the tool's last checkpoint (JoeyNMT saves one only at a validation, sarnmt
every few minutes) together with each attempt's start-up. They are taken apart here, per run:

- **CPU per update** r: over every two consecutive validations of one attempt in the dev series (``series``, whose
  ``cpu_s`` runs on across attempts), Δ``cpu_s`` ÷ Δ``update``, the median over those intervals. Every tool
  validates every 100 updates, so the validation's cost is in it. An interval across two attempts is not one (the
  kill, the start-up and the re-done updates lie in it); a run where no attempt validated twice has no r (None).
- **Updates to the selected checkpoint** u: ``training.selected_update``.
- **Uninterrupted CPU time to the selected checkpoint** T = u · r: the time with no kill (start-up left out).
- **Re-done share**: measured ÷ T − 1 (the re-done work and the start-ups, as a share of T).

A system (the seeds of one configuration): ū and T̄ the means over its seeds, and its CPU per update r̄ = T̄ ÷ ū
(the runs' rates weighted by their updates), so that between sarnmt s and a peer p the time ratio factorises
exactly:

    T̄_s ÷ T̄_p = (ū_s ÷ ū_p) · (r̄_s ÷ r̄_p)

A system's T̄ (and r̄) is None unless every one of its runs has an r.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunTime:
    """One run's decomposition (seconds; None where not measured)."""

    job: str
    updates: int  # u: updates to the selected checkpoint
    per_update: float | None  # r: median CPU seconds per update within an attempt
    uninterrupted: float | None  # T = u · r
    measured: float | None  # cpu_to_selected_s as recorded

    @property
    def redone(self) -> float | None:
        """measured ÷ T − 1."""
        if self.measured is None or not self.uninterrupted:
            return None
        return self.measured / self.uninterrupted - 1.0


@dataclass(frozen=True)
class SystemTime:
    """A system's decomposition over its seeds: ū, r̄ = T̄ ÷ ū, T̄, and the mean measured time."""

    runs: tuple[RunTime, ...]
    updates: float  # ū
    uninterrupted: float | None  # T̄: None unless every run has an r
    measured: float | None  # mean cpu_to_selected_s: None unless every run measured it

    @property
    def per_update(self) -> float | None:
        """r̄ = T̄ ÷ ū: the runs' CPU per update weighted by their updates."""
        return None if self.uninterrupted is None or not self.updates else self.uninterrupted / self.updates

    @property
    def redone(self) -> float | None:
        """mean measured ÷ T̄ − 1."""
        if self.measured is None or not self.uninterrupted:
            return None
        return self.measured / self.uninterrupted - 1.0

    @property
    def without_rate(self) -> list[str]:
        """The runs with no two validations in one attempt."""
        return [r.job for r in self.runs if r.per_update is None]


@dataclass(frozen=True)
class Factors:
    """sarnmt's time ÷ a peer's = updates ratio × CPU-per-update ratio (each sarnmt's ÷ the peer's)."""

    updates: float  # ū_s ÷ ū_p
    per_update: float  # r̄_s ÷ r̄_p

    @property
    def time(self) -> float:
        """T̄_s ÷ T̄_p."""
        return self.updates * self.per_update


def cpu_per_update(series: list[dict[str, Any]]) -> float | None:
    """r: the median of Δcpu_s ÷ Δupdate over consecutive validations of one attempt (the series in update order);
    None where no attempt has two validations with their CPU time."""
    points = sorted(series, key=lambda p: p["update"])
    rates = [
        (b["cpu_s"] - a["cpu_s"]) / (b["update"] - a["update"])
        for a, b in zip(points, points[1:], strict=False)
        if a.get("attempt") is not None
        and a.get("attempt") == b.get("attempt")
        and a.get("cpu_s") is not None
        and b.get("cpu_s") is not None
        and b["update"] > a["update"]
    ]
    return statistics.median(rates) if rates else None


def run_time(record: dict[str, Any]) -> RunTime:
    """One record's decomposition."""
    training = record["training"]
    updates = int(training["selected_update"])
    rate = cpu_per_update(record.get("series", []))
    return RunTime(
        job=record.get("job", f"{record.get('system')}.s{record.get('seed')}"),
        updates=updates,
        per_update=rate,
        uninterrupted=None if rate is None else rate * updates,
        measured=training.get("cpu_to_selected_s"),
    )


def system_time(records: list[dict[str, Any]]) -> SystemTime:
    """A system's decomposition (means over its seeds); ``records`` non-empty."""
    runs = tuple(run_time(r) for r in records)
    times = [r.uninterrupted for r in runs]
    measured = [r.measured for r in runs]
    return SystemTime(
        runs=runs,
        updates=statistics.fmean(r.updates for r in runs),
        uninterrupted=None if any(t is None for t in times) else statistics.fmean(times),
        measured=None if any(m is None for m in measured) else statistics.fmean(measured),
    )


def factors(mine: SystemTime, peer: SystemTime) -> Factors | None:
    """sarnmt's uninterrupted time ÷ the peer's as (updates ratio) × (CPU-per-update ratio); None where either lacks
    T̄."""
    if mine.per_update is None or not peer.per_update or not peer.updates:
        return None
    return Factors(updates=mine.updates / peer.updates, per_update=mine.per_update / peer.per_update)
