"""Hostile input to ``translate``, ``score``, ``average`` and ``evaluate``, run as a user runs them: every case is
either handled as documented (line count kept, empty lines kept empty, long lines truncated within the limit) or
refused with one ``error:`` line naming the file and line, exit status 2, no traceback, no half-written output, and
no code run from a checkpoint. ``prepare`` and ``tables`` are in ``test_faults_data.py``."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys

import pytest
import torch

from sarnmt.utils import atomic
from tests.cli_helpers import hostile_checkpoints, one_error, run_cli, train_tiny
from tests.conftest import ROOT

pytestmark = pytest.mark.faults
LONG = " ".join(["ta", "brin", "blorp", "nu", "gorm"] * 2000)  # 10,000 tokens
UTF8_ERROR = "invalid UTF-8 (byte b'\\xff' at column 4: invalid start byte); convert it to UTF-8 first"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, ckpt):
    return hostile_checkpoints(tmp_path_factory.mktemp("hostile"), ckpt)


def _translate(capsys, ckpt, stdin: bytes, *args: str):
    """At least one output token for a non-empty line (the tiny model often ends at once)."""
    return run_cli(capsys, "translate", [f"ckpt_path={ckpt}", "progress=false", "decoding.min_len=1", *args], stdin)


# --- translate ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            b"ta\x00brin\n\x1b[31mnu\x0b gorm\x0c\n\x1c\x1d\x1e\n ta\xc2\x85brin \xe2\x80\xa8 nu\n\x00\n",
            id="NUL, escape and other control characters, U+0085 and U+2028 inside lines",
        ),
        pytest.param(b"ta brin\n\n   \nnu gorm\n\n", id="empty and blank lines"),
        pytest.param(b"", id="an empty input"),
        pytest.param(b"ta brin\nnu gorm", id="no newline at the end"),
    ],
)
def test_translate_keeps_every_line(capsys, ckpt, text):
    """translate writes exactly one line per input line, in order; empty and blank lines stay empty."""
    outcome = _translate(capsys, ckpt, text)
    assert outcome.code == 0, outcome.err
    lines = text.split(b"\n")
    expected = len(lines) - (lines[-1] == b"")
    out = outcome.out.split("\n")
    assert len(out) - 1 == expected and out[-1] == ""
    for number, line in enumerate(lines[:expected]):
        assert (out[number] == "") == (line.decode().strip() == ""), number  # blank: str.isspace, \x1c-\x1f too


def test_translate_reads_crlf_as_lf(capsys, ckpt):
    """translate gives a CRLF file the same translations as the LF file."""
    crlf = _translate(capsys, ckpt, b"ta brin blorp\r\nnu gorm\r\n\r\n")
    lf = _translate(capsys, ckpt, b"ta brin blorp\nnu gorm\n\n")
    assert crlf.code == lf.code == 0 and crlf.out == lf.out and crlf.out.count("\n") == 3


def test_translate_truncates_a_10000_token_line_within_the_limit(capsys, ckpt, caplog):
    """translate decodes a 10,000-token line from its first max_input_tokens tokens (a warning names the line) and
    keeps the line count; with truncate_long_input=false it refuses the line by number."""
    caplog.set_level(logging.WARNING, logger="sarnmt")
    longest = 2 * (400 + 1) + 10  # the longest output the limit allows (EOS included), which min_len may not reach
    outcome = _translate(capsys, ckpt, f"ta brin\n{LONG}\nnu gorm\n".encode(), f"decoding.min_len={longest - 1}")
    assert outcome.code == 0 and outcome.out.count("\n") == 3
    assert len(outcome.out.split("\n")[1].split()) in (longest - 1, longest)  # EOS only at the last step, if at all
    assert any(
        r.getMessage() == "<stdin>:2: 10,000 tokens, more than max_input_tokens=400: translating its first "
        "400 tokens only"
        for r in caplog.records
    )
    refused = one_error(_translate(capsys, ckpt, f"ta brin\n{LONG}\n".encode(), "truncate_long_input=false"))
    assert refused.startswith("error: <stdin>:2: 10,000 tokens, more than max_input_tokens=400; split the line")


def test_translate_refuses_non_utf8_on_stdin_naming_the_line(capsys, ckpt):
    """translate refuses a byte that is not UTF-8 on stdin, naming <stdin> and the line."""
    assert (
        one_error(_translate(capsys, ckpt, b"ta brin\nnu \xff gorm\n")) == f"error: <stdin>:2: {UTF8_ERROR} "
        "(e.g. iconv -f latin1 -t utf-8)"
    )


def test_translate_refuses_bad_files_and_writes_no_half_output(capsys, ckpt, tmp_path):
    """translate refuses a non-UTF-8 file (naming file and line), a folder and a missing file, and leaves no output
    file behind."""
    bad, out = tmp_path / "in.txt", tmp_path / "out.txt"
    bad.write_bytes(b"ta brin\nnu\n\xff\n")
    assert one_error(_translate(capsys, ckpt, None, f"input={bad}", f"output={out}")).startswith(
        f"error: {bad}:3: invalid UTF-8"
    )
    assert not out.exists() and os.listdir(tmp_path) == ["in.txt"]
    assert one_error(_translate(capsys, ckpt, None, f"input={tmp_path}")) == (
        f"error: {tmp_path} is a folder, but an input file is expected here"
    )
    assert one_error(_translate(capsys, ckpt, None, f"input={tmp_path / 'nope.txt'}")) == (
        f"error: no such file: {tmp_path / 'nope.txt'}"
    )


@pytest.mark.parametrize(
    "case",
    [
        "truncated",
        "another project's",
        "pickle running code",
        "bare pickle running code",
        "a folder",
        "empty",
        "missing",
    ],
)
def test_translate_refuses_a_hostile_checkpoint_without_running_it(capsys, hostile, case):
    """translate refuses a checkpoint that is truncated, empty, missing, a folder, another project's, or a pickle
    that would run code, in one line that never suggests weights_only=False, and runs none of its content."""
    path, says = hostile[case]
    line = one_error(_translate(capsys, path, b"ta brin\n"))
    assert line.startswith(f"error: checkpoint {path} ") and says in line and "weights_only" not in line
    assert not (path.parent / "pwned").exists()


def test_a_real_process_prints_one_line_and_a_trace_with_hydra_full_error(ckpt):
    """As a real process: non-UTF-8 on stdin gives exit status 2 and one error line; HYDRA_FULL_ERROR=1 gives the
    traceback instead."""
    command = [sys.executable, "-m", "sarnmt", "translate", f"ckpt_path={ckpt}", "progress=false"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    plain = subprocess.run(command, input=b"ta\n\xff\n", capture_output=True, cwd=ROOT, env=env, timeout=300)
    assert plain.returncode == 2 and plain.stderr.decode().strip().splitlines() == [
        f"error: <stdin>:2: {UTF8_ERROR.replace('column 4', 'column 1')} (e.g. iconv -f latin1 -t utf-8)"
    ]
    full = subprocess.run(
        command, input=b"ta\n\xff\n", capture_output=True, cwd=ROOT, timeout=300, env={**env, "HYDRA_FULL_ERROR": "1"}
    )
    assert full.returncode != 0 and "Traceback" in full.stderr.decode() and "InputError" in full.stderr.decode()


# --- score ----------------------------------------------------------------------------------------------------------
def _score(capsys, tmp_path, ref: bytes, hyp: bytes, *args: str):
    (tmp_path / "ref.txt").write_bytes(ref)
    (tmp_path / "hyp.txt").write_bytes(hyp)
    return run_cli(
        capsys,
        "score",
        [
            f"ref={tmp_path / 'ref.txt'}",
            f"hyps=[{tmp_path / 'hyp.txt'}]",
            "n_bootstrap=20",
            "n_randomization=20",
            *args,
        ],
    )


@pytest.mark.parametrize(
    "ref,hyp",
    [
        pytest.param(b"a b c\n\nd e\n", b"a b c\n\nd\n", id="empty lines on both sides"),
        pytest.param(
            b"a\x00b c\x1b d\n\xe2\x80\xa8x\x0cy\n", b"a\x00b c\n\xe2\x80\xa8x y\n", id="NUL and control chars"
        ),
        pytest.param(f"{LONG}\nb\n".encode(), f"{LONG}\nb\n".encode(), id="a 10,000-token line"),
    ],
)
def test_score_handles_odd_but_aligned_files(capsys, tmp_path, ref, hyp):
    """score scores aligned files with empty lines, control characters or a 10,000-token line."""
    outcome = _score(capsys, tmp_path, ref, hyp)
    assert outcome.code == 0 and "| hyp.txt |" in outcome.out, outcome.err


def test_score_reads_crlf_as_lf(capsys, tmp_path):
    """score gives a CRLF hypothesis file the scores of the LF file."""
    crlf = _score(capsys, tmp_path, b"a b c d\ne f g\n", b"a b c\r\ne f g\r\n")
    lf = _score(capsys, tmp_path, b"a b c d\ne f g\n", b"a b c\ne f g\n")
    assert crlf.code == lf.code == 0 and crlf.out == lf.out


@pytest.mark.parametrize(
    "ref,hyp,says",
    [
        pytest.param(b"a\nb\n", b"a\nb \xff\n", "hyp.txt:2: invalid UTF-8", id="non-UTF-8 hypothesis"),
        pytest.param(
            b"a\nb\nc\n",
            b"a\nb\n",
            "line counts differ: hypotheses {hyp} have 2 lines, reference {ref} has 3",
            id="reference and hypothesis of different lengths",
        ),
        pytest.param(b"", b"", "reference {ref} is empty: there is nothing to score", id="empty files"),
    ],
)
def test_score_refuses_bad_files_naming_them(capsys, tmp_path, ref, hyp, says):
    """score refuses non-UTF-8 bytes, misaligned files and an empty reference in one line naming the files."""
    line = one_error(_score(capsys, tmp_path, ref, hyp))
    assert says.format(hyp=tmp_path / "hyp.txt", ref=tmp_path / "ref.txt") in line


def test_score_refuses_a_huge_file_before_reading_it_and_two_systems_of_one_name(capsys, tmp_path):
    """A sparse 5 GB reference (and hypothesis) is refused at its limit, naming the file, without reading 5 GB; two
    systems of one name are refused, never two table rows named alike."""
    (tmp_path / "hyp.txt").write_text("a\n")
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as handle:
        handle.truncate(5 * 2**30)  # sparse: no disk used
    line = one_error(run_cli(capsys, "score", [f"ref={huge}", f"hyps=[{tmp_path / 'hyp.txt'}]"]))
    assert line == f"error: {huge} is larger than 64 MiB, the limit for a file read here"
    (tmp_path / "ref.txt").write_text("a\n")
    line = one_error(run_cli(capsys, "score", [f"ref={tmp_path / 'ref.txt'}", f"hyps=[{huge}]"]))
    assert line == f"error: {huge} is larger than 64 MiB, the limit for a file read here"
    hyp = tmp_path / "hyp.txt"
    line = one_error(run_cli(capsys, "score", [f"ref={tmp_path / 'ref.txt'}", f"hyps=[{hyp},{hyp}]", "names=[a,a]"]))
    assert line == "error: names: 'a' names two systems; each row of the table needs its own name"


def test_score_refuses_folders(capsys, tmp_path):
    """score refuses a folder given as the reference, or as its output file."""
    (tmp_path / "hyp.txt").write_text("a\n")
    line = one_error(run_cli(capsys, "score", [f"ref={tmp_path}", f"hyps=[{tmp_path / 'hyp.txt'}]"]))
    assert line == f"error: {tmp_path} is a folder, but a file is expected here"
    (tmp_path / "out.md").mkdir()
    line = one_error(_score(capsys, tmp_path, b"a\n", b"a\n", f"output={tmp_path / 'out'}"))
    assert line == f"error: {tmp_path / 'out.md'} is a folder; give a file name to write to"


# --- average --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["truncated", "another project's", "pickle running code", "a folder", "missing"])
def test_average_refuses_a_hostile_checkpoint_without_running_it(capsys, ckpt, hostile, tmp_path, case):
    """average refuses a truncated, foreign, missing or code-running checkpoint among its inputs, naming it, and
    writes nothing."""
    path, says = hostile[case]
    out = tmp_path / "avg.ckpt"
    line = one_error(run_cli(capsys, "average", [f"checkpoints=[{ckpt},{path}]", f"output={out}"]))
    assert f"checkpoint {path} " in line and says in line and "weights_only" not in line
    assert not out.exists() and not (path.parent / "pwned").exists()


def test_average_refuses_bad_folders_and_keeps_the_old_output_on_a_full_disk(capsys, ckpt, tmp_path, monkeypatch):
    """average refuses dir= that is a file or holds no checkpoint and output= that is a folder; a full disk while
    writing leaves the previous average loadable."""
    assert one_error(run_cli(capsys, "average", [f"dir={ckpt}", "output=x.ckpt"])) == (
        f"error: dir={ckpt} is a file; give the folder that holds the checkpoints"
    )
    (tmp_path / "none").mkdir()
    assert "asked for the last 5 checkpoints but" in one_error(
        run_cli(capsys, "average", [f"dir={tmp_path / 'none'}", "output=x.ckpt"])
    )
    assert one_error(run_cli(capsys, "average", [f"checkpoints=[{ckpt}]", f"output={tmp_path}"])) == (
        f"error: {tmp_path} is a folder; give a file name to write to"
    )
    out = tmp_path / "avg.ckpt"
    assert run_cli(capsys, "average", [f"checkpoints=[{ckpt},{ckpt}]", f"output={out}"]).code == 0
    before = out.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "fsync", full)
    assert one_error(run_cli(capsys, "average", [f"checkpoints=[{ckpt}]", f"output={out}"])) == (
        f"error: could not write {out}: No space left on device; the previous avg.ckpt is unchanged; free some "
        "space and run again"
    )
    assert out.read_bytes() == before and torch.load(out, weights_only=True)["sarnmt"]["averaged_from"]


# --- evaluate -------------------------------------------------------------------------------------------------------
def _evaluate(capsys, ckpt, tmp_path, test_src: bytes, test_ref: bytes, *args: str):
    lines = b"ta brin blorp\nnu gorm\nta vosk\n"
    files = {
        "train.src": lines,
        "train.tgt": lines,
        "dev.src": lines,
        "dev.tgt": lines,
        "test.src": test_src,
        "test.tgt": test_ref,
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if not (tmp_path / name).is_dir():
            (tmp_path / name).write_bytes(data)
    data = ["data=files", "data.vocab_size=60"] + [f"data.{k.replace('.', '_')}={tmp_path / k}" for k in files]
    return run_cli(
        capsys,
        "evaluate",
        [f"ckpt_path={ckpt}", *data, "decoding=greedy", "progress=false", f"hydra.run.dir={tmp_path / 'run'}", *args],
    )


def test_evaluate_keeps_line_count_and_truncates_a_long_line(capsys, ckpt, tmp_path):
    """evaluate decodes a test set with control characters, an empty line and a 10,000-token line: one hypothesis
    per line, the empty line empty, the long line truncated and listed in the record."""
    src = f"ta\x00brin\x0b\n\nnu gorm\n{LONG}\n".encode()
    outcome = _evaluate(capsys, ckpt, tmp_path, src, b"a\n\nb\nc\n")
    assert outcome.code == 0, outcome.err
    record = json.loads((tmp_path / "run" / "eval.test.json").read_text())
    assert record["sentences"] == 4 and record["truncated_lines"] == [4] and record["max_input_tokens"] == 400
    hyps = (tmp_path / "run" / "hypotheses.test.txt").read_text().split("\n")
    assert len(hyps) == 5 and hyps[1] == ""


def test_evaluate_reads_crlf_as_lf(capsys, ckpt, tmp_path):
    """evaluate gives a CRLF test set the hypotheses and BLEU of the LF one."""
    crlf = _evaluate(capsys, ckpt, tmp_path / "crlf", b"ta brin\r\nnu gorm\r\n", b"a\r\nb\r\n", "split=test")
    lf = _evaluate(capsys, ckpt, tmp_path / "lf", b"ta brin\nnu gorm\n", b"a\nb\n")
    assert crlf.code == lf.code == 0
    read = [(p / "run" / "hypotheses.test.txt").read_text() for p in (tmp_path / "crlf", tmp_path / "lf")]
    assert read[0] == read[1] and crlf.out.split("\n")[1] == lf.out.split("\n")[1]  # the BLEU line


@pytest.mark.parametrize(
    "src,ref,says",
    [
        pytest.param(b"ta brin\nnu \xff\n", b"a\nb\n", "test.src:2: invalid UTF-8", id="non-UTF-8 source"),
        pytest.param(
            b"ta brin\nnu gorm\n",
            b"a\n",
            "parallel files differ in length: {d}/test.src has 2 lines, {d}/test.tgt has 1 lines",
            id="source and reference of different lengths",
        ),
        pytest.param(b"", b"", "files/test has no sentences, so there is nothing to evaluate", id="empty files"),
    ],
)
def test_evaluate_refuses_bad_test_files_naming_them(capsys, ckpt, tmp_path, src, ref, says):
    """evaluate refuses non-UTF-8 bytes, misaligned files and an empty test set in one line naming them, and writes
    no output."""
    line = one_error(_evaluate(capsys, ckpt, tmp_path, src, ref))
    assert says.format(d=tmp_path) in line
    assert not (tmp_path / "run" / "eval.test.json").exists()


def test_evaluate_refuses_a_gzip_bomb_test_set_at_its_limit(capsys, ckpt, tmp_path):
    """evaluate data=files with a 3 MB gzip bomb as its test source (3 GiB inflated; it took 3 GB and ended in a
    MemoryError) refuses it in one line naming the file and the 256 MiB limit, and writes nothing."""
    from tests.test_faults_records import gzip_bomb

    files = {name: tmp_path / name for name in ("train.src", "train.tgt", "dev.src", "dev.tgt", "test.tgt")}
    for path in files.values():
        path.write_bytes(b"ta brin\nnu gorm\n")
    files["test.src"] = gzip_bomb(tmp_path / "test.src.gz")
    data = ["data=files", "data.vocab_size=60"] + [f"data.{k.replace('.', '_')}={v}" for k, v in files.items()]
    run = tmp_path / "run"
    args = [f"ckpt_path={ckpt}", *data, "decoding=greedy", "progress=false", f"hydra.run.dir={run}"]
    line = one_error(run_cli(capsys, "evaluate", args))
    assert line.startswith(f"error: {files['test.src']}: decompresses to more than 256 MiB, the limit for this input")
    assert not (run / "eval.test.json").exists()


@pytest.mark.parametrize("case", ["truncated", "pickle running code"])
def test_evaluate_refuses_a_hostile_checkpoint_without_running_it(capsys, hostile, tmp_path, case):
    """evaluate refuses a truncated or code-running checkpoint in one line, running none of it."""
    path, says = hostile[case]
    line = one_error(_evaluate(capsys, path, tmp_path, b"ta brin\n", b"a\n"))
    assert line.startswith(f"error: checkpoint {path} ") and says in line and not (path.parent / "pwned").exists()


def test_evaluate_refuses_a_folder_and_keeps_its_outputs_on_a_full_disk(capsys, ckpt, tmp_path, monkeypatch):
    """evaluate refuses a folder given as a test file; a full disk while it writes leaves the previous outputs."""
    (tmp_path / "test.src").mkdir()
    assert one_error(_evaluate(capsys, ckpt, tmp_path, b"", b"a\n")) == (
        f"error: {tmp_path / 'test.src'} is a folder, but a file is expected here"
    )
    (tmp_path / "test.src").rmdir()
    assert _evaluate(capsys, ckpt, tmp_path, b"ta brin\n", b"a\n").code == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "fsync", full)
    line = one_error(_evaluate(capsys, ckpt, tmp_path, b"ta brin\n", b"a\n", "decoding=beam"))
    assert line.endswith(
        "No space left on device; the previous hypotheses.test.txt is unchanged; free some space and run again"
    )
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()} == before
