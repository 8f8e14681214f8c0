"""``sarnmt curves RUN... [-o curves.png]``: the training curves of several runs in one figure
(:mod:`sarnmt.training.curves`): training loss, dev cost and dev BLEU (or perplexity) against the update, one colour
per run, each run's selected checkpoint marked. Not a Hydra application: its arguments are run folders (or their
``metrics.csv`` files), which argparse takes as a list.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from sarnmt.errors import InputError, reported

EXAMPLES = "Examples:\n  sarnmt curves outputs/2026-11-27/10-00-00\n  sarnmt curves runs/base runs/sa -o base-vs-sa.png"


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Training loss, dev cost and dev BLEU (or perplexity) of one or more runs against the update, in "
        "one PNG, one colour per run, each run's selected checkpoint marked.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="+", type=Path, help="run folders (outputs/<date>/<time>) or metrics.csv files")
    p.add_argument("-o", "--output", type=Path, default=Path("curves.png"), help="the PNG (default: ./curves.png)")
    p.add_argument("--title", default="", help="the figure's title (default: the runs' names)")
    return p


def labels(runs: list[Path]) -> list[str]:
    """Each run's name in the legend: its folder's name, with its parent's where two runs share a name."""
    names = [run.name if run.is_dir() else run.parent.name for run in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{run.resolve().parent.name}/{run.name}" if run.is_dir() else str(run) for run in runs]


def main(args: Sequence[str], prog: str = "sarnmt curves") -> int:
    options = parser(prog).parse_args(list(args))  # --help prints and exits here, before Lightning is imported
    from sarnmt.training.curves import draw, run_curves

    with reported():
        runs = [run_curves(run, label) for run, label in zip(options.runs, labels(options.runs), strict=True)]
        if options.output.suffix.lower() != ".png":
            raise InputError(f"--output {options.output}: expected a .png file")
        path = draw(runs, options.output, options.title)
    for run in runs:
        note = "" if run.validations else " (no validation yet)"
        print(f"{run.label}: {len(run.series.get('train/loss', []))} loss points, {run.validations} validations{note}")
    print(f"wrote {path}", flush=True)
    return 0
