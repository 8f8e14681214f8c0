"""Configs of one's own beside the packaged ones (``sarnmt/conf``, :func:`sarnmt.utils.compose.config_dir`): added
with ``--config-dir DIR`` or ``hydra.searchpath=[file://DIR]``; a folder that is not there is one ``error:`` line, a
config that has the group and name of a packaged one is one ``warning:`` line saying that the packaged one is used."""

from __future__ import annotations

from pathlib import Path

import pytest

from sarnmt.cli import params
from sarnmt.utils.compose import check_user_configs, config_dir
from tests.cli_helpers import one_error, run_cli

BASELINE = "108,725,885"  # Table 1's baseline at model=paper (tests/test_entrypoints.py)


@pytest.fixture
def user_dir(tmp_path) -> Path:
    """A folder of configs of one's own: a new ``decoder=mine`` option (the baseline under another name)."""
    (tmp_path / "decoder").mkdir()
    (tmp_path / "decoder" / "mine.yaml").write_text((config_dir() / "decoder" / "baseline.yaml").read_text())
    return tmp_path


def _params(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = params.main(argv)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_packaged_configs_are_inside_the_package():
    import sarnmt

    assert config_dir() == Path(sarnmt.__file__).resolve().parent / "conf"
    assert (config_dir() / "train.yaml").is_file() and (config_dir() / "decoder" / "baseline.yaml").is_file()


def test_a_user_decoder_is_picked_up_through_hydra_searchpath(capsys, user_dir):
    code, out, err = _params(capsys, ["model=paper", "decoder=mine", f"hydra.searchpath=[file://{user_dir}]"])
    assert code == 0 and out.strip() == BASELINE and err == ""


def test_a_user_decoder_is_picked_up_through_config_dir(capsys, user_dir):
    outcome = run_cli(capsys, "train", ["--cfg", "job", "--config-dir", str(user_dir), "decoder=mine"])
    assert outcome.code == 0, outcome.err  # Hydra would not find decoder/mine without the folder
    assert "_target_: sarnmt.models.variants.Baseline" in outcome.out
    assert outcome.err == ""


@pytest.mark.faults
def test_a_config_dir_that_is_not_there_is_one_error_line(capsys, tmp_path):
    missing = tmp_path / "nowhere"
    line = one_error(run_cli(capsys, "train", ["--cfg", "job", "--config-dir", str(missing)]))
    assert line.startswith(f"error: --config-dir {missing}: no such folder")


@pytest.mark.faults
def test_a_searchpath_folder_that_is_not_there_is_one_error_line(capsys, tmp_path):
    missing = tmp_path / "nowhere"
    code, out, err = _params(capsys, ["model=paper", f"hydra.searchpath=[file://{missing}]"])
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: hydra.searchpath {missing}: no such folder (a folder of configs of your own, laid out as "
        f"{config_dir()})"
    ]


@pytest.mark.faults
def test_a_user_config_that_shadows_a_packaged_one_is_one_warning_and_the_packaged_one_wins(capsys, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "paper.yaml").write_text((config_dir() / "model" / "tiny.yaml").read_text())
    code, out, err = _params(capsys, ["model=paper", "decoder=baseline", f"hydra.searchpath=[file://{tmp_path}]"])
    assert code == 0 and out.strip() == BASELINE  # the packaged paper model, not the user's tiny one
    assert err.strip().splitlines() == [
        f"warning: {tmp_path / 'model' / 'paper.yaml'} has the group and name of the packaged config "
        f"{config_dir() / 'model' / 'paper.yaml'}, which Hydra uses instead: give yours another name (model/paper)"
    ]


@pytest.mark.faults
def test_an_installation_without_the_packaged_configs_is_one_error_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr("sarnmt.utils.compose.config_dir", lambda: tmp_path / "conf")
    code, out, err = _params(capsys, ["model=paper"])
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: sarnmt's configs are missing from {tmp_path / 'conf'}: this installation lacks its package data"
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["--config-dir", "{d}"],
        ["--config-dir={d}"],
        ["-cd", "{d}"],
        ["hydra.searchpath=[file://{d}]"],
        ["hydra.searchpath=[{d}]"],
        ["+hydra.searchpath=[pkg://sarnmt.conf,file://{d}]"],
    ],
)
def test_every_way_of_adding_a_folder_is_checked(tmp_path, argv):
    missing = tmp_path / "nowhere"
    with pytest.raises(Exception, match="no such folder"):
        check_user_configs([arg.format(d=missing) for arg in argv])
    assert check_user_configs([arg.format(d=tmp_path) for arg in argv]) == []
