"""Training curves: ``sarnmt train`` leaves ``curves.png`` in its run folder, drawn from the CSV logger's metrics with
the selected checkpoint marked; a run with no validation yet gets its loss curve alone (or a note), never an error;
``sarnmt curves RUN...`` draws several runs in one figure."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sarnmt import cli
from sarnmt.training.curves import RunCurves, draw, read_series, run_curves, selected_step, smoothed
from sarnmt.training.run import train
from tests.cli_helpers import TINY
from tests.conftest import compose_train

PNG = b"\x89PNG\r\n\x1a\n"


def _png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == PNG and path.stat().st_size > 5000


@pytest.fixture(scope="module")
def validated_run(tmp_path_factory) -> Path:
    """12 updates with a validation (dev cost) every 4 and the loss logged every update."""
    out = tmp_path_factory.mktemp("curves") / "validated"
    overrides = [*TINY, "trainer.max_steps=12", "validation.val_check_interval=4", "trainer.log_every_n_steps=1"]
    train(compose_train(overrides, output_dir=out))
    return out


def test_train_leaves_curves_with_the_selected_checkpoint_marked(validated_run):
    assert _png(validated_run / "curves.png")
    run = run_curves(validated_run)
    losses, costs = run.series["train/loss"], run.series["val/loss"]
    assert len(losses) == 12 and len(costs) == 3 and run.validations == 3
    (kept,) = [p for p in (validated_run / "checkpoints").glob("*.ckpt") if p.name != "last.ckpt"]
    assert run.selected_step == selected_step(kept) and run.selected_step in (4, 8, 12)
    best_cost = min(value for _, value in costs)
    assert min(costs, key=lambda point: abs(point[0] - run.selected_step))[1] == best_cost  # marked at the best


def test_a_run_without_validation_gets_its_loss_curve_and_no_error(tmp_path):
    out = tmp_path / "early"
    train(compose_train([*TINY, "trainer.max_steps=3", "trainer.log_every_n_steps=1"], output_dir=out))
    assert _png(out / "curves.png")  # validation=cost validates every 5,000 updates: none in 3
    run = run_curves(out)
    assert run.validations == 0 and len(run.series["train/loss"]) == 3 and run.selected_step is None


def test_nothing_logged_yet_is_a_note_not_an_error(tmp_path):
    metrics = tmp_path / "run" / "csv" / "version_0" / "metrics.csv"
    metrics.parent.mkdir(parents=True)
    metrics.write_text("epoch,step,train/loss\n")
    assert _png(draw([run_curves(tmp_path / "run")], tmp_path / "empty.png"))


def test_a_resumed_run_reads_every_start_in_order(tmp_path):
    run = tmp_path / "run" / "csv"
    for version, rows in enumerate([[(1, 5.0), (2, 4.0)], [(2, 3.5), (3, 3.0)]]):
        (run / f"version_{version}").mkdir(parents=True)
        with open(run / f"version_{version}" / "metrics.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["epoch", "step", "train/loss", "val/loss"])
            writer.writerows([0, step, loss, ""] for step, loss in rows)
    files = sorted(run.rglob("metrics.csv"))
    assert read_series(files)["train/loss"] == [(1, 5.0), (2, 3.5), (3, 3.0)]  # the later start's step 2 wins


def test_curves_command_draws_several_runs_in_one_figure(validated_run, tmp_path, capsys):
    other = RunCurves("other", {"train/loss": [(1, 9.0), (2, 8.0)]})
    assert _png(draw([run_curves(validated_run), other], tmp_path / "direct.png"))
    output = tmp_path / "both.png"
    assert cli.main(["curves", str(validated_run), str(validated_run / "csv"), "-o", str(output)]) == 0
    printed = capsys.readouterr().out
    assert _png(output) and f"wrote {output}" in printed and "12 loss points, 3 validations" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent/run"], "error: /nonexistent/run: no such run folder"),
        (["{empty}"], "no metrics.csv under it"),
        (["{run}", "-o", "{tmp}/curves.pdf"], "expected a .png file"),
    ],
)
def test_curves_command_bad_input_is_one_error_line(validated_run, tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    args = [a.format(empty=tmp_path / "empty", run=validated_run, tmp=tmp_path) for a in args]
    with pytest.raises(SystemExit) as exit_:
        cli.main(["curves", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_the_loss_trend_is_a_running_mean_over_a_twentieth_of_the_points():
    assert smoothed([4.0, 2.0, 6.0]) == [4.0, 2.0, 6.0]  # fewer than 20 points: the points themselves
    values = [float(k % 2) for k in range(40)]  # 0, 1, 0, 1, ...: a window of 2
    assert smoothed(values)[0] == 0.0 and smoothed(values)[1:] == [0.5] * 39
