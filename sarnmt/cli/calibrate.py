"""``sarnmt calibrate [cells=N] [resamples=R] [sentences=S] [seed=K] [runs=[3v3,5v5]] [real_cells=M]
[regimes=[synthetic,real]] [records=DIR]``: the seed-aware tests' error rates under a true null, simulated
(:func:`sarnmt.sweep.calibration.calibrate`), printed as Markdown: docs/reproducing.md's calibration table. Every
setting is checked here, before any simulation (:func:`parse_runs`, :func:`parse_regimes`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hydra.utils import to_absolute_path
from omegaconf import DictConfig

from sarnmt.errors import InputError, check_range, reported
from sarnmt.sweep.calibration import calibrate
from sarnmt.sweep.null_regimes import RECORDS
from sarnmt.utils.compose import hydra_main


def parse_runs(value: str | Iterable[object]) -> tuple[tuple[int, int], ...]:
    """``["2v2", "3v5"]`` (or one ``"2v2"``) -> ``((2, 2), (3, 5))``: run counts of the row and the baseline, 2 or
    more a side (Welch's test needs a variance on each side).

    :raises InputError: naming ``runs``, for anything else."""
    items = [value] if isinstance(value, str | int) else list(value)
    sizes = []
    for item in items:
        counts = str(item).strip().split("v")
        if len(counts) != 2 or not all(c.isdecimal() and c.isascii() and int(c) >= 2 for c in counts):
            raise InputError(f"runs={item!r}: give run counts as NvM, 2 or more a side, in a list (runs=[3v3,3v5])")
        sizes.append((int(counts[0]), int(counts[1])))
    if not sizes:
        raise InputError("runs=[]: give run counts as NvM, 2 or more a side, in a list (runs=[3v3,3v5])")
    return tuple(dict.fromkeys(sizes))


def parse_regimes(value: str | Iterable[object]) -> tuple[str, ...]:
    """``"real"`` or ``["synthetic", "real"]`` -> the kinds of regime to run, each once.

    :raises InputError: naming ``regimes``, for an empty list or another name."""
    kinds = tuple(dict.fromkeys(str(k).strip() for k in ([value] if isinstance(value, str) else value)))
    if not kinds:
        raise InputError("regimes=[]: give synthetic, real or both (regimes=[synthetic,real])")
    for kind in kinds:
        if kind not in ("synthetic", "real"):
            raise InputError(f"regimes: {kind!r} is not a regime; give synthetic, real or both")
    return kinds


@hydra_main("calibrate")
def main(cfg: DictConfig) -> None:
    with reported():
        records = Path(to_absolute_path(str(cfg.records))) if cfg.records is not None else RECORDS
        for key, minimum in (("cells", 10), ("resamples", 50), ("sentences", 10), ("seed", 0), ("real_cells", 100)):
            check_range(key, cfg[key], minimum, whole=True)
        kinds = parse_regimes(cfg.regimes)
        sizes = parse_runs(cfg.runs) if cfg.runs is not None else None
        table = calibrate(kinds, sizes, cfg.cells, cfg.resamples, cfg.sentences, cfg.seed, cfg.real_cells, records)
        print(table, flush=True)
