"""Short names of systems from their output files' names, for tables that compare them (``sarnmt score``) and for the
human evaluation's tasks (``sarnmt human create`` without ``names=``)."""

from __future__ import annotations

from pathlib import Path


def system_names(paths: list[str]) -> list[str]:
    """Short names: the dot-separated parts of the file names that are not shared by every system
    (``newstest2013.baseline.en.gz`` → ``baseline``); the full file names when that leaves nothing."""
    parts = [Path(p).name.split(".") for p in paths]
    if len(paths) < 2:
        return [Path(p).name for p in paths]
    head = 0
    while all(len(q) > head and q[head] == parts[0][head] for q in parts):
        head += 1
    tail = 0
    while all(len(q) - head > tail and q[-1 - tail] == parts[0][-1 - tail] for q in parts):
        tail += 1
    names = [".".join(q[head : len(q) - tail]) for q in parts]
    return names if all(names) and len(set(names)) == len(names) else [Path(p).name for p in paths]
