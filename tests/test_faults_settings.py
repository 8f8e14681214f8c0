"""Every setting has a range: decoding lengths, beam size and length penalty (:func:`sarnmt.decoding.search.
check_decoding`, :class:`sarnmt.decoding.penalties.LengthPenalty`), the learning rate and the seeds
(:mod:`sarnmt.training.settings`), and the yaml files of a config folder of one's own (:mod:`sarnmt.utils.yaml_bounds`)
are refused out of range with one ``error:`` line naming the key and its range, exit status 2, before any work
(``nan`` passed every comparison before, ``1e30`` overflowed into one-token outputs)."""

from __future__ import annotations

import time

import pytest

from sarnmt.errors import InputError, check_range
from sarnmt.utils.compose import config_dir
from sarnmt.utils.yaml_bounds import MAX_VALUES, check_yaml_file
from tests.cli_helpers import TINY, one_error, run_cli

pytestmark = pytest.mark.faults
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{before}'] * 9)}]\n" for before, name in zip("abcdefgh", "bcdefghi", strict=True)
)  # 9^9 values: a billion laughs


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_check_range_refuses_values_that_are_not_finite(value):
    """check_range refuses nan (which passes every comparison) and ±inf, naming the key and its range."""
    with pytest.raises(InputError, match=rf"^k={value}: must be a finite number, between 0 and 10$"):
        check_range("k", value, 0, 10)


def test_check_range_gives_each_bound_its_own_reason():
    """``why_below`` is said when the value is below the minimum, ``why`` when it is above the maximum: neither
    reason reads beside the other bound."""
    says = "the vocabulary counts <eos> and <unk>"
    with pytest.raises(InputError, match=rf"^k=1: must be 2 or more \({says}\)$"):
        check_range("k", 1, 2, 10, "memory", why_below=says)
    with pytest.raises(InputError, match=r"^k=11: must be at most 10 \(memory\)$"):
        check_range("k", 11, 2, 10, "memory", why_below=says)
    with pytest.raises(InputError, match=r"^k=1: must be 2 or more$"):
        check_range("k", 1, 2, 10, "memory")


def _translate(capsys, *args):
    return run_cli(capsys, "translate", ["ckpt_path=none.ckpt", "progress=false", *args], b"ta brin\n")


@pytest.mark.parametrize(
    "args,says",
    [
        pytest.param(
            ["decoding.max_len_a=1e30"],
            "decoding.max_len_a=1e+30: must be at most 10.0 (an output more than ten times its source is no "
            "translation)",
            id="max_len_a=1e30",
        ),
        pytest.param(
            ["decoding.max_len_a=nan"], "decoding.max_len_a=nan: must be a finite number, between 0 and 10.0", id="nan"
        ),
        pytest.param(
            ["decoding.max_len_b=1000000000"],
            "decoding.max_len_b=1,000,000,000: must be at most 10,000 (every output token attends over the ones "
            "before)",
            id="max_len_b=1e9",
        ),
        pytest.param(
            ["decoding.min_len=100000"],
            "decoding.min_len=100,000: must be at most 10,000 (every output token attends over the ones before)",
            id="min_len=100000",
        ),
        pytest.param(
            ["decoding.min_len=813"],
            "decoding.min_len=813: more than any output can have, so none could end: the longest is 812 tokens, EOS "
            "included (decoding.max_len_a=2.0 × (max_input_tokens=400 + 1) + decoding.max_len_b=10); lower min_len",
            id="min_len above any output",
        ),
        pytest.param(
            ["decoding=beam", "decoding.beam_size=100000"],
            "decoding.beam_size=100,000: must be at most 256 (memory and time grow with the beam: 2k candidates per "
            "sentence and step)",
            id="beam_size=100000",
        ),
        pytest.param(
            ["decoding=beam", "decoding.length_penalty.alpha=nan"],
            "decoding.length_penalty.alpha=nan: must be a finite number, between 0 and 5.0",
            id="alpha=nan",
        ),
        pytest.param(
            ["decoding=beam", "decoding.length_penalty.alpha=50"],
            "decoding.length_penalty.alpha=50: must be at most 5.0 (a larger power of a long output's length "
            "overflows)",
            id="alpha=50",
        ),
        pytest.param(
            ["decoding=beam", "decoding.length_penalty.offset=-1"],
            "decoding.length_penalty.offset=-1: must be 0 or more",
            id="offset=-1",
        ),
        pytest.param(
            ["max_input_tokens=100000"],
            "max_input_tokens=100,000: must be at most 4,096 (decoding memory and time grow with the source's length)",
            id="max_input_tokens=100000",
        ),
        pytest.param(
            ["max_input_tokens=nan"], "max_input_tokens=nan: must be a finite number, between 1 and 4,096", id="nan"
        ),
        pytest.param(
            ["max_line_bytes=1099511627776"],
            "max_line_bytes=1,099,511,627,776: must be at most 1,073,741,824 (a line is held in memory up to it)",
            id="max_line_bytes=1 TiB",
        ),
    ],
)
def test_translate_refuses_decoding_settings_out_of_range(capsys, args, says):
    """translate refuses each decoding setting out of its range in one line naming the key and the range, before it
    reads the checkpoint."""
    assert one_error(_translate(capsys, *args)) == f"error: {says}"


def test_the_largest_allowed_settings_pass_the_check(capsys):
    """The bounds themselves are allowed: the refusal is for the checkpoint, which comes after the settings."""
    args = ["decoding=beam", "decoding.beam_size=256", "decoding.max_len_a=10", "decoding.max_len_b=10000"]
    args += ["decoding.min_len=10000", "decoding.length_penalty.alpha=5", "max_input_tokens=4096"]
    assert "none.ckpt does not exist" in one_error(_translate(capsys, *args))


@pytest.mark.parametrize(
    "args,says",
    [
        pytest.param(["optim.lr=nan"], "optim.lr=nan: must be a finite number, 0 or more", id="lr=nan"),
        pytest.param(["optim.lr=0"], "optim.lr=0: must be more than 0 (nothing would be learned)", id="lr=0"),
        pytest.param(["optim.lr=-1"], "optim.lr=-1: must be 0 or more", id="lr=-1"),
        pytest.param(
            ["seed=1234567890123456789012"],
            "seed=1,234,567,890,123,456,789,012: must be at most 4,294,967,295 (the seeds NumPy and Lightning accept: "
            "an unsigned 32-bit integer)",
            id="a 22-digit seed",
        ),
        pytest.param(["seed=-1"], "seed=-1: must be 0 or more", id="seed=-1"),
        pytest.param(["data.seed=4294967296"], "data.seed=4,294,967,296: must be at most 4,294,967,295", id="2^32"),
        pytest.param(
            ["val_decoding.max_len_a=inf"],
            "val_decoding.max_len_a=inf: must be a finite number, between 0 and 10.0",
            id="val_decoding.max_len_a=inf",
        ),
        pytest.param(
            ["decoding=beam", "decoding.beam_size=0"], "decoding.beam_size=0: must be 1 or more", id="beam_size=0"
        ),
    ],
)
def test_train_refuses_settings_out_of_range_before_reading_data(capsys, tmp_path, args, says):
    """train refuses a learning rate that is nan, 0 or negative, a seed outside NumPy's range and a decoding setting
    out of range in one line naming the key, before any data is read or checkpoint written."""
    run = tmp_path / "run"
    line = one_error(run_cli(capsys, "train", [*TINY, *args, f"hydra.run.dir={run}"]))
    assert line.startswith(f"error: {says}"), line
    assert not list(run.rglob("*.ckpt"))


def test_lm_refuses_a_seed_out_of_range(capsys, tmp_path):
    """The language model's training refuses the same seeds."""
    line = one_error(run_cli(capsys, "lm", ["seed=99999999999", f"hydra.run.dir={tmp_path / 'run'}"]))
    assert line.startswith("error: seed=99,999,999,999: must be at most 4,294,967,295")


# --- config folders -------------------------------------------------------------------------------------------------
def test_an_alias_bomb_in_a_config_folder_is_refused_at_once(capsys, tmp_path):
    """A config folder holding a yaml "billion laughs" (9^9 values from 10 lines) is refused in one line naming the
    file, in well under a second, before Hydra reads it (it took minutes and 2 GB)."""
    (tmp_path / "decoding").mkdir()
    (tmp_path / "decoding" / "bomb.yaml").write_text(BOMB)
    start = time.perf_counter()
    line = one_error(_translate(capsys, "--config-dir", str(tmp_path), "decoding=bomb"))
    assert time.perf_counter() - start < 5
    assert line == (
        f"error: {tmp_path / 'decoding' / 'bomb.yaml'}: its aliases expand to more than {MAX_VALUES:,} values (a "
        "config is far smaller; YAML anchors repeated within repeats grow exponentially, or contain themselves), "
        "refused before it is read"
    )


@pytest.mark.parametrize(
    "text,says",
    [
        pytest.param("a: [1, 2\nb: 3\n", "x.yaml:2: not valid YAML (expected ',' or ']', but got ':')", id="malformed"),
        pytest.param("a: &a [*a]\n", "x.yaml: its aliases expand to more than", id="an alias of itself"),
        pytest.param("a: " + "[" * 5000 + "]" * 5000 + "\n", "x.yaml: not valid YAML (RecursionError)", id="deep"),
        pytest.param("a: \xff\n", "x.yaml: not UTF-8", id="not UTF-8"),
    ],
)
def test_a_bad_yaml_file_is_named(tmp_path, text, says):
    """Malformed yaml, an alias of itself, 5,000 nested brackets and non-UTF-8 bytes are one error naming the file."""
    path = tmp_path / "x.yaml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError) as err:
        check_yaml_file(path)
    assert str(err.value).startswith(f"{tmp_path}/{says}"), str(err.value)


def test_every_packaged_yaml_is_within_the_bound():
    """The packaged configs pass the check with room to spare."""
    files = sorted(config_dir().rglob("*.yaml"))
    assert len(files) > 50
    for path in files:
        check_yaml_file(path)


def test_a_device_without_data_is_refused(capsys):
    """device=meta (tensors without data) is one line, not autocast's traceback."""
    assert one_error(_translate(capsys, "device=meta")) == (
        "error: device=meta: not a device sarnmt computes on; use auto, cpu, cuda or cuda:N"
    )


FLAGS = {
    "truncate_long_input=maybe": "error: truncate_long_input='maybe': must be true or false",
    "progress=2": "error: progress=2: must be true or false",
}


@pytest.mark.parametrize("command", ["translate", "evaluate"])
@pytest.mark.parametrize("setting", sorted(FLAGS))
def test_a_flag_that_is_not_true_or_false_is_one_line(capsys, tmp_path, command, setting):
    """truncate_long_input=maybe was taken as true, progress=2 as on: now one line naming the key, before the
    checkpoint (here missing) is read."""
    args = [f"ckpt_path={tmp_path / 'missing.ckpt'}", setting, f"output_dir={tmp_path / 'eval'}"]
    assert one_error(run_cli(capsys, command, args if command == "evaluate" else args[:2], b"x\n")) == FLAGS[setting]
