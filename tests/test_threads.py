"""``threads=`` for train, translate, evaluate and lm (:mod:`sarnmt.utils.threads`): a count sets PyTorch's threads,
null keeps its default, and 0, a negative count or a word is one ``error:`` line, exit 2, before anything is read."""

from __future__ import annotations

import pytest
import torch

from sarnmt.errors import InputError
from sarnmt.utils.threads import apply_threads, check_threads
from tests.cli_helpers import one_error, run_cli


def test_a_count_sets_the_threads_and_null_keeps_the_default(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        assert apply_threads(None) is None and torch.get_num_threads() == before
        assert apply_threads(1) == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("value", [0, -2, 1.5, "two", True, 10**6])
def test_what_is_no_count_of_threads_is_refused(value):
    with pytest.raises(InputError, match=r"^threads=.*: must be a whole number of threads from 1 to 1024, or null"):
        check_threads(value)


@pytest.mark.parametrize("command", ["train", "translate", "evaluate", "lm"])
def test_every_command_refuses_threads_0_in_one_line(capsys, tmp_path, command):
    args = ["threads=0"] + ([f"ckpt_path={tmp_path / 'missing.ckpt'}"] if command in ("translate", "evaluate") else [])
    line = one_error(run_cli(capsys, command, [*args, f"hydra.run.dir={tmp_path / 'run'}"], b"x\n"))
    says = "must be a whole number of threads from 1 to 1024, or null (PyTorch's default: one per core)"
    assert line == f"error: threads=0: {says}"
