"""Training curves: the training loss per logged update and the dev cost and dev BLEU (or perplexity) per validation,
with the selected checkpoint marked, drawn from a run's CSV metrics.

- :class:`Curves`, a callback of every training run (``callbacks.curves``): at the end of ``fit`` it draws
  ``<run folder>/curves.png`` from the CSV logger's ``metrics.csv`` and, where W&B logs the run, sends it the image
  too (W&B has the series themselves already: the same ``self.log`` calls feed every logger).
- ``sarnmt curves RUN...`` (:mod:`sarnmt.cli.curves`) draws several runs in one figure, one colour each.

What is read: ``train/loss`` (the per-update loss, every ``trainer.log_every_n_steps``), ``val/loss`` (the dev cost:
mean NLL per sentence), ``val/bleu`` (dev BLEU) or, for a language model, ``val/ppl``, each against the update
(``step``). A resumed run writes one ``csv/version_<k>/metrics.csv`` per start; they are read in order of ``k``, a
later start's value of a step replacing an earlier one's. The selected checkpoint is the one in
``checkpoints/`` whose file name holds its update (``...-step000120-...``: every ``validation=`` file name does),
marked on each dev panel at the validation nearest that update. A run with no validation yet is drawn as its loss
curve alone, with a note saying so; a run with nothing logged yet, as a note.
"""

from __future__ import annotations

import csv
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger, WandbLogger

from sarnmt.errors import InputError

log = logging.getLogger("sarnmt")
SERIES = {"train/loss": "training loss", "val/loss": "dev cost (NLL per sentence)", "val/bleu": "dev BLEU"}
PPL = ("val/ppl", "dev perplexity")
STEP_IN_NAME = re.compile(r"step[=_-]?(\d+)")
SMOOTH_FROM = 40  # loss points from which the curve is drawn as its running mean over the raw points


@dataclass
class RunCurves:
    """One run's series: metric → ``[(update, value), ...]`` in update order, and the selected checkpoint's update."""

    label: str
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    selected_step: int | None = None

    @property
    def validations(self) -> int:
        return max((len(self.series.get(key, [])) for key in ("val/loss", "val/bleu", PPL[0])), default=0)


def metrics_files(run: Path) -> list[Path]:
    """The CSV logger's ``metrics.csv`` files of a run folder, oldest start first (or ``run`` itself, a CSV file)."""
    if run.is_file():
        return [run]
    files = list(run.rglob("metrics.csv"))

    def order(path: Path) -> tuple[int, str]:
        number = path.parent.name.removeprefix("version_")
        return (int(number) if number.isdigit() else -1, str(path))

    return sorted(files, key=order)


def read_series(files: list[Path]) -> dict[str, list[tuple[int, float]]]:
    """The series of :data:`SERIES` and :data:`PPL` in CSV metrics files (a later file's value of a step wins)."""
    values: dict[str, dict[int, float]] = {}
    for path in files:
        with open(path, newline="") as handle:
            for row in csv.DictReader(handle):
                step = row.get("step", "")
                if not step.strip().isdigit():
                    continue
                for key in (*SERIES, PPL[0]):
                    text = (row.get(key) or "").strip()
                    if text:
                        try:
                            values.setdefault(key, {})[int(step)] = float(text)
                        except ValueError as err:
                            raise InputError(f"{path}: {key} at step {step} is {text!r}, not a number") from err
    return {key: sorted(points.items()) for key, points in values.items()}


def selected_step(checkpoint: str | Path | None) -> int | None:
    """The update in a checkpoint's file name (``epoch003-step000120-bleu12.30.ckpt`` → 120), None if it has none."""
    if not checkpoint:
        return None
    found = STEP_IN_NAME.findall(Path(checkpoint).name)
    return int(found[-1]) if found else None


def run_curves(run: Path, label: str | None = None) -> RunCurves:
    """A run folder's curves (its CSV metrics and its selected checkpoint in ``checkpoints/``).

    :raises InputError: the folder does not exist or holds no ``metrics.csv`` (no CSV logger: ``logger=csv``).
    """
    if not run.exists():
        raise InputError(f"{run}: no such run folder")
    files = metrics_files(run)
    if not files:
        raise InputError(f"{run}: no metrics.csv under it (curves are read from the CSV logger: logger=csv or many)")
    kept = [p for p in sorted(run.glob("checkpoints/*.ckpt")) if p.name != "last.ckpt" and "average" not in p.name]
    steps = [s for s in (selected_step(p) for p in kept) if s is not None]
    name = label or (run.name if run.is_dir() else run.parent.name)
    return RunCurves(name, read_series(files), steps[-1] if len(steps) == 1 else None)


def smoothed(values: tuple[float, ...] | list[float]) -> list[float]:
    """The running mean of ``values`` over the last ``max(1, len/20)`` points (fewer at the start): the loss curve's
    trend, drawn over the faint raw points."""
    width = max(1, len(values) // 20)
    cumulative = [0.0]
    for value in values:
        cumulative.append(cumulative[-1] + value)
    return [(cumulative[k + 1] - cumulative[max(0, k + 1 - width)]) / min(k + 1, width) for k in range(len(values))]


def _nearest(points: list[tuple[int, float]], step: int) -> tuple[int, float]:
    return min(points, key=lambda point: (abs(point[0] - step), point[0]))


def draw(runs: list[RunCurves], output: Path, title: str = "") -> Path:
    """Draw ``runs`` into the PNG ``output``: a panel for the training loss and one for each dev series any run has
    (cost; BLEU, or perplexity where no run has BLEU), the selected checkpoint of each run marked with a ring and
    a dotted line; a note where a run has no validation yet or nothing logged at all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dev = [key for key in ("val/loss", "val/bleu") if any(run.series.get(key) for run in runs)]
    if not any(run.series.get("val/bleu") for run in runs) and any(run.series.get(PPL[0]) for run in runs):
        dev.append(PPL[0])
    keys = ["train/loss", *dev]
    names = {**SERIES, PPL[0]: PPL[1]}
    fig, axes = plt.subplots(1, len(keys), figsize=(5.0 * len(keys), 3.8), squeeze=False)
    notes = []
    for k, run in enumerate(runs):
        color = f"C{k % 10}"
        if not run.series:
            notes.append(f"{run.label}: nothing logged yet")
            continue
        if not run.validations:
            notes.append(f"{run.label}: no validation yet (training loss only)")
        for ax, key in zip(axes[0], keys, strict=True):
            points = run.series.get(key, [])
            if not points:
                continue
            steps, values = zip(*points, strict=True)
            if key == "train/loss" and len(points) >= SMOOTH_FROM:  # per-batch losses are noisy: the trend over them
                ax.plot(steps, values, color=color, lw=0.6, alpha=0.3)
                ax.plot(steps, smoothed(values), color=color, label=run.label, lw=1.6)
            else:
                marker = None if key == "train/loss" else "o"
                ax.plot(steps, values, color=color, label=run.label, lw=1.2, marker=marker)
            if run.selected_step is not None and key != "train/loss":
                step, value = _nearest(points, run.selected_step)
                ax.axvline(step, color=color, ls=":", lw=1)
                ax.plot([step], [value], marker="o", ms=11, mfc="none", mec=color, mew=2)
    for ax, key in zip(axes[0], keys, strict=True):
        ax.set_title(names[key])
        ax.set_xlabel("update")
        ax.grid(alpha=0.3)
    if len(runs) > 1:
        axes[0][0].legend(fontsize=8)
    if any(run.selected_step is not None for run in runs) and dev:
        axes[0][-1].plot([], [], marker="o", ms=9, mfc="none", mec="k", ls=":", color="k", label="selected checkpoint")
        axes[0][-1].legend(fontsize=8)
    if notes:
        fig.text(0.5, 0.01, "; ".join(notes), ha="center", va="bottom", fontsize=9, color="#a00")
    fig.suptitle(title or ", ".join(run.label for run in runs), fontsize=10)
    fig.tight_layout(rect=(0, 0.05 if notes else 0, 1, 1))
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output


class Curves(Callback):
    """Draw the run's curves into ``path`` at the end of ``fit`` (global rank 0), from the CSV logger's metrics.

    :param path: the PNG (``${paths.output_dir}/curves.png``).
    """

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.drawn: Path | None = None

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        csv_loggers = [logger for logger in trainer.loggers if isinstance(logger, CSVLogger)]
        if not csv_loggers:
            log.info("no curves drawn: the run has no CSV logger (logger=csv or many)")
            return
        logger = csv_loggers[0]
        logger.save()  # the metrics still buffered
        files = metrics_files(Path(logger.log_dir).parent)  # every start of the run (csv/version_*)
        best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else None
        try:  # a figure is not worth a run: what goes wrong is one warning, the run's results stay
            run = RunCurves(self.path.parent.name, read_series(files), selected_step(best))
            self.drawn = draw([run], self.path)
        except (OSError, ValueError, InputError) as err:
            log.warning("no curves drawn (%s): %s", self.path, err)
            return
        log.info("curves: %s", self.drawn)
        for wandb in (logger for logger in trainer.loggers if isinstance(logger, WandbLogger)):
            wandb.log_image(key="curves", images=[str(self.drawn)])
