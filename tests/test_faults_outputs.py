"""Where outputs go, how much input is held, whether warnings are seen, and settings out of range, run
as a user runs the commands: an output is complete or absent and goes only where it should (a FIFO or a character
device written through, a symlink's target replaced and the link kept, the input never overwritten); input is read
in bounded memory (``/dev/zero``, a 30 MB line, a billion resamples); warnings reach stderr one line each; every bad
setting is one ``error:`` line naming the key, exit status 2. The checkpoint is the first release's (9,850
parameters, ``tests/fixtures``): nothing is trained here."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import threading

import pytest
import torch

from sarnmt.utils import atomic
from tests.cli_helpers import one_error, run_cli, run_measured
from tests.conftest import ROOT

pytestmark = pytest.mark.faults
CKPT = ROOT / "tests" / "fixtures" / "release-0ee4d47.ckpt"
TEXT = b"ta brin blorp\nnu gorm\n\nta vosk\n"
LONG = " ".join(["ta", "brin", "blorp", "nu", "gorm"] * 2000)  # 10,000 tokens, 49,999 characters
GB = 1 << 30


def _translate(capsys, *args: str, stdin: bytes | None = TEXT):
    return run_cli(capsys, "translate", [f"ckpt_path={CKPT}", "progress=false", *args], stdin)


def _expected(capsys) -> str:
    """What translate prints for TEXT on stdout."""
    outcome = _translate(capsys)
    assert outcome.code == 0 and outcome.out.count("\n") == 4, outcome
    return outcome.out


def _measured(module: str, args: list[str], stdin, tmp_path) -> tuple[int, str, str, float]:
    """``python -m sarnmt <module> args`` as a process (:func:`run_measured`, 600 s at most): its exit status, stdout,
    stderr and peak resident memory in GB."""
    done = run_measured([module, *args], ROOT, tmp_path, stdin, timeout=600)
    return done.code, done.out, done.err, done.peak_bytes / GB


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


# --- 2. outputs: complete or absent, only where they should go ------------------------------------------------------
def test_translate_writes_through_a_fifo_and_leaves_it_a_fifo(capsys, tmp_path):
    """translate output=<FIFO> writes the translation into the reader of the FIFO and leaves the FIFO in place (the
    atomic write's rename used to put a regular file there)."""
    expected = _expected(capsys)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    outcome = _translate(capsys, f"output={fifo}")
    reader.join(timeout=60)  # it ends once translate's write side is closed (a reader just ending has no FIFO open)
    if reader.is_alive():  # translate never opened it: the reader still waits in open(); let it go
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=60)
    assert outcome.code == 0, outcome.err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and received == [expected.encode()]


def test_translate_replaces_a_symlinks_target_and_keeps_the_link(capsys, tmp_path):
    """translate output=<symlink> replaces the link's target atomically and keeps the link (also a dangling one,
    whose target it creates)."""
    expected = _expected(capsys)
    (tmp_path / "real.txt").write_text("old\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    (tmp_path / "dangling.txt").symlink_to("sub/new.txt")
    for link, target in (("link.txt", "real.txt"), ("dangling.txt", "sub/new.txt")):
        assert _translate(capsys, f"output={tmp_path / link}").code == 0
        assert (tmp_path / link).is_symlink() and os.readlink(tmp_path / link) == target
        assert (tmp_path / target).read_text() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.txt", "link.txt", "real.txt", "sub"]


def test_translate_and_average_write_through_a_character_device(capsys, tmp_path):
    """translate output= and average output= a character device (a copy of /dev/null: as root, output=/dev/null
    used to replace the system's /dev/null with a regular file) write through it and leave it a device; average
    output=<symlink> keeps the link and replaces its target."""
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod is not permitted here")
    assert _translate(capsys, f"output={device}", "attention=" + str(tmp_path / "att.jsonl")).code == 0
    assert run_cli(capsys, "average", [f"checkpoints=[{CKPT},{CKPT}]", f"output={device}"]).code == 0
    assert stat.S_ISCHR(os.lstat(device).st_mode) and os.major(os.lstat(device).st_rdev) == 1
    (tmp_path / "avg.ckpt").symlink_to(tmp_path / "target.ckpt")
    assert run_cli(capsys, "average", [f"checkpoints=[{CKPT}]", f"output={tmp_path / 'avg.ckpt'}"]).code == 0
    assert (tmp_path / "avg.ckpt").is_symlink()
    assert torch.load(tmp_path / "target.ckpt", weights_only=True)["sarnmt"]["averaged_from"] == [str(CKPT)]


def test_translate_refuses_to_write_over_its_input(capsys, tmp_path):
    """translate input=x output=x (or output= a link to x, or attention=x) is refused before decoding: x keeps its
    text (it used to be replaced by its own translation)."""
    source = tmp_path / "x.txt"
    source.write_bytes(TEXT)
    (tmp_path / "link.txt").symlink_to(source)
    for key, path in (("output", source), ("output", tmp_path / "link.txt"), ("attention", source)):
        line = one_error(_translate(capsys, f"input={source}", f"{key}={path}", stdin=None))
        assert line == (
            f"error: {key}={path} is the input file {source}: writing it would replace the text being translated; "
            "give another file"
        )
    assert source.read_bytes() == TEXT and sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "x.txt"]


def test_translate_refuses_one_file_or_stdout_for_both_outputs(capsys, tmp_path):
    """output=o.txt attention=o.txt (it used to leave 40 lines of translations and JSON mixed in o.txt) and
    attention=- with the translations on stdout (interleaved) are refused before decoding, writing nothing."""
    out = tmp_path / "o.txt"
    assert one_error(_translate(capsys, f"output={out}", f"attention={out}")) == (
        f"error: output and attention are the same file ({out}); give attention another name"
    )
    assert not out.exists()
    outcome = _translate(capsys, "attention=-")
    assert one_error(outcome).startswith("error: output and attention=- both go to stdout") and outcome.out == ""
    records = _translate(capsys, f"output={out}", "attention=-")  # JSON alone on stdout is fine
    assert records.code == 0 and [json.loads(line)["line"] for line in records.out.splitlines()] == [0, 1, 2, 3]


def test_no_failure_leaves_a_partial_output(capsys, tmp_path, monkeypatch):
    """A failure while translating (a bad byte on line 3) leaves neither output nor attention file; a full disk
    when the second of them is committed leaves both previous files unchanged (they are renamed together)."""
    bad, out, att = tmp_path / "in.txt", tmp_path / "out.txt", tmp_path / "att.jsonl"
    bad.write_bytes(b"ta brin\nnu gorm\n\xff\n")
    line = one_error(_translate(capsys, f"input={bad}", f"output={out}", f"attention={att}", stdin=None))
    assert line.startswith(f"error: {bad}:3: invalid UTF-8") and os.listdir(tmp_path) == ["in.txt"]
    out.write_text("previous\n")
    att.write_text("{}\n")
    calls = []

    def second_fails(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "fsync", second_fails)
    line = one_error(_translate(capsys, f"output={out}", f"attention={att}"))
    assert line == (
        f"error: could not write {att}: No space left on device; the previous att.jsonl is unchanged; free some "
        "space and run again"
    )
    assert out.read_text() == "previous\n" and att.read_text() == "{}\n"
    assert sorted(os.listdir(tmp_path)) == ["att.jsonl", "in.txt", "out.txt"]


def test_evaluate_checks_its_output_folder_before_decoding(capsys, tmp_path, monkeypatch):
    """evaluate output_dir=<a file> (or a folder under a file) is refused before the checkpoint is even loaded (it
    used to fail with "File exists" after decoding)."""
    import sarnmt.cli.evaluate

    def not_reached(*args, **kwargs):
        raise AssertionError("decoding started")

    monkeypatch.setattr(sarnmt.cli.evaluate, "load_model", not_reached)
    file = tmp_path / "results"
    file.write_text("a file\n")
    common = [f"ckpt_path={CKPT}", f"hydra.run.dir={tmp_path / 'run'}"]
    assert one_error(run_cli(capsys, "evaluate", [*common, f"output_dir={file}"])) == (
        f"error: output_dir={file} is a file; give a folder"
    )
    assert one_error(run_cli(capsys, "evaluate", [*common, f"output_dir={file / 'sub'}"])) == (
        f"error: output_dir={file / 'sub'} cannot be created: {file} is a file; give a folder"
    )
    assert file.read_text() == "a file\n"


# --- 3. every input bounded -----------------------------------------------------------------------------------------
def test_a_measured_peak_is_the_childs_own_not_what_its_parent_held(tmp_path):
    """``run_measured`` reads the child's own high-water mark: with 1 GiB held (and touched) here, ``sarnmt --help``
    still reads far below it. ``os.wait4``'s ``ru_maxrss`` counted the parent's memory at the fork, and two of CI's
    memory tests read 1.00 GiB for commands that peak far lower."""
    held = bytearray(GB)
    held[::4096] = b"\x01" * len(range(0, GB, 4096))
    done = run_measured(["--help"], ROOT, tmp_path)
    assert done.code == 0 and "usage" in done.out.lower(), done.err
    assert done.peak_bytes < GB / 4, f"peak {done.peak_bytes / GB:.2f} GB with {len(held) / GB:.0f} GB held here"


def test_translate_of_dev_zero_stops_in_bounded_memory(tmp_path):
    """translate < /dev/zero (one line that never ends: it used to pass 3.2 GB in 11 s and keep growing) reads at
    most a GiB past max_line_bytes, translates the start of the line with a warning naming it, and stops, under
    1 GB."""
    code, out, err, peak = _measured("translate", [f"ckpt_path={CKPT}", "progress=false"], "/dev/zero", tmp_path)
    assert code == 0 and out.count("\n") == 1, err
    assert _warnings(err) == [
        "warning: <stdin>:1: no line end in its first 1,074,790,401 bytes: translating its first 1 tokens only; "
        "the input is read no further",
        # the one token of NULs is no word the model knows, and translate says so
        "warning: <stdin>: 1 of 1 source tokens (100.0%) are unknown to the model (<unk>): is the input in the "
        "checkpoint's source language and preprocessing? (unknown_warning=0.1)",
    ]
    assert peak < 1.0, f"peak {peak:.2f} GB"


def test_translate_cuts_long_lines_in_bounded_memory_and_warns_on_stderr(tmp_path):
    """translate, as a process, translates a 10,000-token line, a 200,000-character line and a 30 MB line from their
    first 400 tokens (the 30 MB line took 1.16 GB, read and encoded whole), keeps the line count, stays under 1 GB,
    and prints one warning per truncated line on stderr (Hydra's disabled logging used to swallow them)."""
    source = tmp_path / "in.txt"
    with open(source, "w") as handle:
        handle.write(f"ta brin\n{LONG}\n{'ta brin ' * 25_000}\n{'nu gorm ' * 3_932_160}\nnu gorm\n")
    args = [f"ckpt_path={CKPT}", "progress=false", f"input={source}"]
    code, out, err, peak = _measured("translate", args, None, tmp_path)
    assert code == 0 and out.count("\n") == 5, err
    assert _warnings(err) == [
        f"warning: {source}:2: 10,000 tokens, more than max_input_tokens=400: translating its first 400 tokens only",
        f"warning: {source}:3: 200,000 characters, more than the 51,200 read for max_input_tokens=400: translating "
        "its first 400 tokens only",
        f"warning: {source}:4: 31,457,280 bytes, more than max_line_bytes=1,048,576: translating its first 400 "
        "tokens only",
    ]
    assert peak < 1.0, f"peak {peak:.2f} GB"


def test_translate_refuses_a_line_over_max_line_bytes_naming_it(capsys, tmp_path):
    """With truncate_long_input=false a line longer than max_line_bytes is refused by number; input=/dev/zero is read
    as a stream (it used to say "no such file"); a symlink loop as input is named as one."""
    line = one_error(_translate(capsys, "max_line_bytes=1000", "truncate_long_input=false", stdin=b"a\n" + b"b" * 5000))
    assert line == (
        "error: <stdin>:2: 5,000 bytes, more than max_line_bytes=1,000; split the line (or raise max_line_bytes and "
        "max_input_tokens), or set truncate_long_input=true to translate its first tokens"
    )
    zero = _translate(capsys, "input=/dev/zero", "max_line_bytes=1000", stdin=None)
    assert zero.code == 0 and zero.out.count("\n") == 1
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert one_error(_translate(capsys, f"input={tmp_path / 'loop'}", stdin=None)) == (
        f"error: {tmp_path / 'loop'} is a symlink loop, but an input file is expected here"
    )


def _score(capsys, tmp_path, *args: str, lines: int = 4):
    ref, base, system = (tmp_path / f"{name}.txt" for name in ("ref", "base", "sys"))
    ref.write_text("the cat sat on the mat\n" * lines)
    base.write_text("the cat sat on a mat\n" * lines)
    system.write_text("the cat sat on the mat\n" * lines)
    return run_cli(capsys, "score", [f"ref={ref}", f"hyps=[{base},{system}]", *args])


def test_score_refuses_resample_counts_out_of_range_and_signs_the_counts_used(capsys, tmp_path):
    """score n_randomization=1000000000 (it reached 14 GB before it was killed) and n_bootstrap=0 or -5 (1,000 were
    used, silently) are refused naming the key; the signature gives both counts used."""
    line = one_error(_score(capsys, tmp_path, "n_randomization=1000000000"))
    assert line.startswith("error: n_randomization=1,000,000,000: must be at most 1,000,000 (")
    for value in ("0", "-5"):
        assert one_error(_score(capsys, tmp_path, f"n_bootstrap={value}")) == (
            f"error: n_bootstrap={value}: must be 1 or more"
        )
    outcome = _score(capsys, tmp_path, "n_bootstrap=40", "n_randomization=70")
    assert outcome.code == 0 and "signature: nrefs:1|bs:40|ar:70|seed:12345|" in outcome.out


def test_score_resamples_in_bounded_memory(tmp_path):
    """score's paired bootstrap of 3,000 sentences × 10,000 resamples (sacrebleu's resampling holds them all at
    once: 1.48 GB) runs in blocks, as a process, under 0.5 GB (0.11 GB measured)."""
    for name, text in (("ref", "the cat sat on the mat"), ("base", "the cat sat on a mat"), ("sys", "a cat sat")):
        (tmp_path / f"{name}.txt").write_text("".join(f"{text} {k}\n" for k in range(3000)))
    hyps = f"hyps=[{tmp_path / 'base.txt'},{tmp_path / 'sys.txt'}]"
    args = [f"ref={tmp_path / 'ref.txt'}", hyps, "n_bootstrap=10000", "n_randomization=32"]
    code, out, err, peak = _measured("score", args, None, tmp_path)
    assert code == 0 and "bs:10000|ar:32" in out, err
    assert peak < 0.5, f"peak {peak:.2f} GB"


# --- 4. warnings reach the user -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command", ["translate", "score", "average", "human_annotators", "human_create", "human_export", "human_serve"]
)
def test_every_command_keeps_its_warnings_on_stderr(command):
    """Every command whose stdout is its output logs the sarnmt logger's warnings on stderr, one line each, with
    Hydra's own logging quiet (Hydra's "disabled" logging switched the sarnmt logger off too)."""
    from sarnmt.utils.compose import compose

    hydra = compose(command, return_hydra_config=True).hydra
    job = hydra.job_logging
    assert job.handlers.stderr.stream == "ext://sys.stderr" and job.root.handlers == ["stderr"]
    assert job.loggers.sarnmt.level == "WARNING" and job.disable_existing_loggers is False
    assert job.formatters.user["()"] == "sarnmt.utils.logs.UserFormatter"
    assert hydra.hydra_logging.root is None and hydra.hydra_logging.disable_existing_loggers is False


# --- 5. no tracebacks -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,says",
    [
        pytest.param(["batch_size=0"], "error: batch_size=0: must be 1 or more", id="translate batch_size=0"),
        pytest.param(["decoding.max_len_b=-5"], "error: decoding.max_len_b=-5: must be 0 or more", id="max_len_b=-5"),
        pytest.param(
            ["decoding.max_len_a=0", "decoding.max_len_b=5", "decoding.min_len=50"],
            "error: decoding.min_len=50: more than any output can have, so none could end: the longest is 5 tokens, "
            "EOS included (decoding.max_len_a=0, decoding.max_len_b=5); lower min_len",
            id="min_len=50 with a maximum of 5",
        ),
        pytest.param(
            ["device=cuda"],
            "error: device=cuda: this machine has no CUDA device; use device=cpu or device=auto",
            id="device=cuda without CUDA",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA"),
        ),
        pytest.param(["device=tpu9"], "error: device=tpu9: not a device; use auto, cpu, cuda or cuda:N", id="bogus"),
    ],
)
def test_translate_refuses_bad_settings_in_one_line(capsys, args, says):
    """translate refuses a batch size of 0, a negative max_len_b (one-word outputs), a min_len no output can reach
    and a device the machine lacks, in one error line naming the key, before decoding."""
    assert one_error(_translate(capsys, *args)) == says


def test_translate_with_stdin_closed_says_so(capsys, monkeypatch):
    """translate with stdin closed (``<&-``: Python's sys.stdin is None) is one error line, not a traceback."""
    monkeypatch.setattr(sys, "stdin", None)
    assert one_error(_translate(capsys, stdin=None)) == (
        "error: standard input is closed: give input=FILE or pipe the text in"
    )


def test_score_refuses_an_unknown_tokenizer_in_one_line(capsys, tmp_path):
    """score tokenize=bogus is one error line naming the key and the tokenizers."""
    assert one_error(_score(capsys, tmp_path, "tokenize=bogus")) == (
        "error: tokenize='bogus' is not a choice: use one of none, 13a, intl, zh, char"
    )


def test_analyze_trees_reads_a_3000_deep_gold_tree(capsys, tmp_path):
    """analyze trees with a gold tree 3,000 brackets deep (a RecursionError traceback before) parses it without
    recursion, scores it and draws a panel saying it is too deep to draw."""
    from sarnmt.analysis.trees import parse_brackets
    from sarnmt.cli.analyze import main

    (tmp_path / "src.txt").write_text("ta brin blorp\n")
    (tmp_path / "ref.txt").write_text("novan hemimi tobi wiko\n")  # teacher-forced: these are the tree's words
    common = [
        "trees",
        f"ckpts=[{CKPT}]",
        "names=[m]",
        f"source={tmp_path / 'src.txt'}",
        f"target={tmp_path / 'ref.txt'}",
    ]
    assert main([*common, f"out_dir={tmp_path / 'plain'}", "draw=[]"]) == 0
    words = parse_brackets((tmp_path / "plain" / "m.algorithm1.trees").read_text().strip()).leaves()
    (tmp_path / "gold.trees").write_text("(X " * 3000 + " ".join(words) + ")" * 3000 + "\n")
    assert main([*common, f"gold={tmp_path / 'gold.trees'}", f"out_dir={tmp_path / 'deep'}"]) == 0, capsys.readouterr()
    record = json.loads((tmp_path / "deep" / "parseval.json").read_text())
    assert len(words) == 4 and record["m"]["algorithm1"]["whole"]["gold"] == 1  # one span: the whole sentence
    assert (tmp_path / "deep" / "m.tree_line1.png").is_file() and "Traceback" not in capsys.readouterr().err
