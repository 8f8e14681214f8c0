"""Records and score inputs from elsewhere are data: a job record with a formula for a commit, a
backslash that would reach the LaTeX caption, 200,000 levels of nesting, ``10**400`` parameters, a gzip bomb for
its statistics, another row's record under the baseline's name, a duplicate seed, the seed ``"one"``, a negative or
boolean parameter count, a NaN wall time or a NaN score. ``tables`` prints the table, names each broken record and
counts it in its cells, escapes what it writes, and never shows a traceback; a gzip bomb given to ``tables``,
``score ref=`` or ``evaluate data=files`` stops at its documented limit, under 1 GB of peak memory.

Each case is bounded: the in-process ones render smoke Table 3 (6 records, 80 sentences), the process ones are
killed after 300 s, and the peak resident memory of every process is its own (``VmHWM``, see ``run_measured``)."""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from sarnmt.data.text.reading import read_lines
from sarnmt.errors import InputError
from sarnmt.sweep import formats
from sarnmt.sweep.job import JobSettings, job_config
from sarnmt.sweep.plan import plan_jobs
from sarnmt.sweep.records import gzip_bytes
from sarnmt.sweep.spec import load_scale, load_table
from sarnmt.sweep.stats import METRIC_SETTINGS, sentence_statistics
from sarnmt.utils import json_bounds
from sarnmt.utils.gzip_bounds import MAX_TEXT_BYTES, GzipLimitError, read_gzip
from tests.cli_helpers import run_measured
from tests.conftest import ROOT
from tests.test_table_significance import digests, render3, write_records  # noqa: F401 (digests: a fixture)

pytestmark = pytest.mark.faults
FORMULA = '+cmd|"/c calc"!A1'
TEX_COMMAND = r"\input{/etc/passwd}"


def gzip_bomb(path: Path, gib: float = 3.0) -> Path:
    """A gzip file of about 3 MB that decompresses to ``gib`` GiB of spaces: one 1 MiB member (about 1 KB
    compressed) repeated; gzip readers read concatenated members as one stream."""
    member = gzip.compress(b" " * 2**20, compresslevel=9)
    path.write_bytes(member * int(gib * 1024))
    return path


# --- the bounded readers ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,says",
    [
        pytest.param("[" * 200_000, "nests deeper than 64 levels (200000)", id="200,000 levels of nesting"),
        pytest.param('{"a": ' * 65 + "1" + "}" * 65, "nests deeper than 64 levels (65)", id="65 levels of objects"),
        pytest.param('{"parameters": ' + str(10**400) + "}", "a whole number of 401 digits", id="10**400"),
        pytest.param('{"a": "x"', "not valid JSON", id="truncated"),
    ],
)
def test_a_json_file_beyond_its_bounds_is_one_error_naming_it(tmp_path, text, says):
    """The one JSON reader of the package refuses a file too deep, a whole number too long or broken JSON with one
    error naming the file, never a RecursionError or OverflowError."""
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(json_bounds.JsonError) as caught:
        json_bounds.load_file(path)
    assert str(caught.value).startswith(str(path)) and says in str(caught.value)


def test_the_depth_scan_is_linear_in_an_unterminated_string_of_escaped_quotes(tmp_path):
    """A file of one quote and 60,000 escaped quotes (a string that never ends) is refused as broken JSON in well
    under a second: blanking the strings never rescans from each quote (that took 110 s for this file)."""
    path = tmp_path / "quotes.json"
    path.write_bytes(b'"' + b'\\"' * 60_000)
    start = time.perf_counter()
    with pytest.raises(json_bounds.JsonError, match="truncated or not valid JSON"):
        json_bounds.load_file(path)
    assert time.perf_counter() - start < 5


def test_json_bounds_count_brackets_inside_strings_as_text_and_keep_nan_for_the_schema(tmp_path):
    """Brackets and escaped quotes inside strings do not count as nesting; NaN and 1e400 parse (the schema judges
    them); a file larger than its limit is refused before it is parsed."""
    text = '{"a": "[[[[\\"]]]]", "b": [NaN, 1e400, -12345678901234567890]}'
    assert json_bounds.depth(text.encode()) == 2
    value = json_bounds.loads(text, "t", max_depth=2)
    assert math.isnan(value["b"][0]) and value["b"][1] == math.inf and value["b"][2] == -12345678901234567890
    (tmp_path / "big.json").write_text("[" + "0," * 600 + "0]")
    with pytest.raises(json_bounds.JsonError, match=r"big.json is larger than 1 KiB"):
        json_bounds.load_file(tmp_path / "big.json", max_bytes=1024)


def test_a_gzip_bomb_stops_at_the_limit_named_in_the_message(tmp_path):
    """A 3 MB gzip file that inflates to 3 GiB is read in blocks and refused past its limit (256 MiB for text read
    whole), naming the file and the limit; a broken gzip file is named too."""
    bomb = gzip_bomb(tmp_path / "ref.txt.gz")
    assert bomb.stat().st_size < 4 * 2**20
    with pytest.raises(GzipLimitError) as caught:
        read_lines(bomb)
    assert str(caught.value).startswith(f"{bomb}: decompresses to more than 256 MiB") and "gunzip it" in str(
        caught.value
    )
    assert MAX_TEXT_BYTES == 256 * 2**20
    with pytest.raises(GzipLimitError, match=r"ref.txt.gz: decompresses to more than 8 MiB"):
        read_gzip(bomb, limit=8 * 2**20)
    (tmp_path / "small.gz").write_bytes(gzip.compress(b"a b\n"))
    assert read_gzip(tmp_path / "small.gz", limit=4) == b"a b\n"  # exactly at the limit: read
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b not gzip")
    with pytest.raises(InputError, match="bad.gz: not a valid gzip file"):
        read_lines(tmp_path / "bad.gz")


def test_score_refuses_a_gzip_bomb_reference_in_one_line_under_1_gb(tmp_path):
    """``score ref=<3 MB gzip bomb>`` (3 GiB inflated: it took 3 GB and ended in a MemoryError) prints one error
    line naming the file and the limit, exit 2, at under 1 GB peak memory."""
    bomb = gzip_bomb(tmp_path / "ref.txt.gz")
    (tmp_path / "hyp.txt").write_text("a b c\n")
    done = run_measured(["score", f"ref={bomb}", f"hyps=[{tmp_path / 'hyp.txt'}]"], tmp_path, tmp_path)
    lines = done.err.strip().splitlines()
    assert done.code == 2 and len(lines) == 1 and "Traceback" not in done.err, done.err
    assert lines[0].startswith(f"error: {bomb}: decompresses to more than 64 MiB")  # score's limit for a test set
    assert done.peak_bytes < 2**30, f"peak {done.peak_bytes / 2**30:.2f} GiB"


# --- tables: one case at a time (smoke Table 3, in this process) ----------------------------------------------------
def _record(path: Path) -> dict:
    return json.loads(path.read_text())


def _rewrite(path: Path, change) -> None:
    record = _record(path)
    change(record)
    path.write_text(json.dumps(record))


def _copy_record(source: Path, target: Path) -> None:
    shutil.copy(source, target)
    shutil.copy(_sentences(source), _sentences(target))


def _sentences(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(".json") + ".sentences.json.gz")


def _wall(record: dict) -> None:
    record["wall_seconds"]["total"] = float("nan")


def _score(value: float):
    def change(record: dict) -> None:
        record["tests"]["nt15"]["scores"]["bleu"]["score"] = value

    return change


# job damaged -> (what is done to its files, a phrase of the reason tables gives)
MUTATIONS = {
    "200,000 levels of nesting": (
        "en_de.mean_residual.s2",
        lambda p, paths: p.write_text("[" * 200_000),
        "nests deeper than 64 levels (200000)",
    ),
    "parameters 10**400": (
        "en_de.mean_residual.s2",
        lambda p, paths: _rewrite(p, lambda r: r.update(parameters=10**400)),
        "a whole number of 401 digits (at most 20)",
    ),
    "parameters -5": (
        "en_de.mean_residual.s2",
        lambda p, paths: _rewrite(p, lambda r: r.update(parameters=-5)),
        "its parameters -5 is not a whole number >= 0",
    ),
    "parameters true": (
        "en_de.mean_residual.s2",
        lambda p, paths: _rewrite(p, lambda r: r.update(parameters=True)),
        "its parameters True is not a whole number >= 0",
    ),
    'seed "one"': (
        "en_de.mean_residual.s2",
        lambda p, paths: _rewrite(p, lambda r: r.update(seed="one")),
        "its seed 'one' is not a whole number",
    ),
    "NaN wall time": ("en_de.mean_residual.s2", lambda p, paths: _rewrite(p, _wall), "are not finite numbers >= 0"),
    "a config that is not a mapping": (
        "en_de.mean_residual.s2",
        lambda p, paths: _rewrite(p, lambda r: r.update(config=["model"])),
        "['config'] are not mappings",
    ),
    "NaN score": (
        "en_de.mean_residual.s2",
        lambda p, paths: _rewrite(p, _score(float("nan"))),
        "its bleu score on test set 'nt15' is nan, not a finite number",
    ),
    "score 1e400": (
        "en_de.mean_residual.s2",
        lambda p, paths: p.write_text(p.read_text().replace('"score": ', '"score": 1e400, "was": ', 1)),
        "is inf, not a finite number",
    ),
    "the mean residual row's record named baseline": (
        "en_de.baseline.s1",
        lambda p, paths: _copy_record(paths["en_de.mean_residual.s1"], p),
        "its content is job 'en_de.mean_residual.s1'",
    ),
    "a duplicate seed (seed 1's record as seed 2's)": (
        "en_de.baseline.s2",
        lambda p, paths: _copy_record(paths["en_de.baseline.s1"], p),
        "its content is job 'en_de.baseline.s1'",
    ),
    "a gzip bomb as its sentence statistics": (
        "en_de.baseline.s2",
        lambda p, paths: gzip_bomb(_sentences(p), gib=0.1),
        "decompresses to more than 16 MiB",
    ),
}
ROWS = {"mean_residual": "+ Mean residual connections", "baseline": "NMT baseline"}


@pytest.mark.parametrize("case", list(MUTATIONS))
def test_tables_names_and_counts_a_hostile_record_as_broken_and_renders_the_rest(digests, tmp_path, case):  # noqa: F811
    """tables renders smoke Table 3 with one hostile record: the record is named under the table ("Not counted")
    with why, counted as broken in each of its row's cells, never averaged, and the other runs fill their cells."""
    job, damage, says = MUTATIONS[case]
    paths = write_records(tmp_path, digests)
    damage(paths[job], paths)
    text, rows, csv_lines = render3(tmp_path)
    row = rows[ROWS[job.split(".")[1]]]
    assert row.count("(1 of 2 seeds); 1 broken") == 3, row
    reasons = [line for line in text.splitlines() if line.startswith("- Not counted: ") and str(paths[job]) in line]
    assert len(reasons) == 1 and says in reasons[0], reasons
    assert rows["+ Self-attentive residual connections"].count(" (2) |") == 3
    header = csv_lines[0].split(",")
    broken = [dict(zip(header, line.split(","), strict=False))["broken"] for line in csv_lines[1:]]
    assert broken.count("1") == 3


def test_a_formula_commit_reaches_the_csv_as_text_and_a_backslash_reaches_the_caption_escaped(digests, tmp_path):  # noqa: F811
    """A record whose commit is ``+cmd|"/c calc"!A1`` is written to the CSV as text (``'+cmd...``: the OWASP rule),
    one whose commit is ``\\input{/etc/passwd}`` reaches the LaTeX caption (a mixed-code note) escaped."""

    def code(job):
        second = job.row == "mean_residual" and job.seed == 2
        commit = TEX_COMMAND if second else FORMULA
        return {"commit": commit, "dirty": False, "source_hash": ("b" if second else "a") * 64, "allow_dirty": False}

    write_records(tmp_path, digests, code)
    text, rows, csv_lines = render3(tmp_path)
    assert "mixed code: 2 commits" in rows["+ Mean residual connections"]
    table = (tmp_path / "tables" / "table3.csv").read_text()
    assert '\'+cmd|""/c c' in table
    cells = [cell for row in csv.reader(csv_lines) for cell in row]
    assert not [c for c in cells if c.startswith(formats.FORMULA_START) and not formats._NUMBER.fullmatch(c)]
    tex = (tmp_path / "tables" / "table3.tex").read_text()
    caption = tex[tex.index(r"\caption{") :]
    assert r"\textbackslash{}input\{/et" in caption and r"\input{" not in caption


def test_record_text_reaches_markdown_and_the_terminal_inert(digests, tmp_path):  # noqa: F811
    """A commit with an ANSI escape, a line break that would start a forged note, a ``|`` that would end a cell and
    a ``<script>`` tag, and a CPU name with the same, reach the table's Markdown (what the terminal shows) as text:
    no ESC, no new line, no tag; a full-width ＝HYPERLINK is made text in the CSV."""
    hostile = "\x1b[31mred\n- forged note | x <script>alert(1)</script>"

    def code(job):
        commit = "\uff1dHYPERLINK(1)" if job.seed == 2 else hostile
        return {"commit": commit, "dirty": False, "source_hash": "a" * 64, "allow_dirty": False}

    write_records(tmp_path, digests, code)
    for path in (tmp_path / "records").glob("*.json"):
        _rewrite(path, lambda record: record["hardware"].__setitem__("cpu", hostile))
    text, rows, csv_lines = render3(tmp_path)
    assert "\x1b" not in text and "<script>" not in text and "\n- forged" not in text
    assert "\\x1b[31mred\\x0a- forged note \\| x &lt;script&gt;" in text
    cells = [cell for row in csv.reader(csv_lines) for cell in row]
    assert not [c for c in cells if c.startswith("\uff1d")]
    assert formats.record_text("a_b*c`d") == "a\\_b\\*c\\`d"


def test_tex_and_csv_escape_every_special_character():
    """Every LaTeX special character of plain text is escaped once; CSV cells starting ``= + - @``, a tab or a
    carriage return are made text, numbers are kept."""
    assert formats.tex(r"\ { } $ & # ^ _ ~ %") == (
        r"\textbackslash{} \{ \} \$ \& \# \textasciicircum{} \_ \textasciitilde{} \%"
    )
    assert [formats.csv_cell(v) for v in ("=1+2", "+a", "-a", "@a", "\ta", "\ra", "-0.52", "+1e-3", -3, "a=b")] == [
        "'=1+2",
        "'+a",
        "'-a",
        "'@a",
        "'\ta",
        "'\ra",
        "-0.52",
        "+1e-3",
        -3,
        "a=b",
    ]


# --- tables: every case at once, as a user runs it ------------------------------------------------------------------
def _table1_folder(results: Path) -> tuple[dict[str, Path], list[str]]:
    """Smoke Table 1's 16 records, 11 of them hostile (one a commit that is a TeX command, beside a good run of
    other code: a mixed-code cell, named in the caption); the paths and the ids of the 10 broken ones."""
    scale = load_scale("smoke")
    jobs = {job.id: job for job in plan_jobs([load_table(1)], scale)}
    settings = JobSettings(Path("/nonexistent"), results)
    (results / "records").mkdir(parents=True)
    perfect = ["a b c d e f"]
    paths = {}
    for job_id, job in jobs.items():
        path = settings.record_path(job)
        stats = {t: {m: sentence_statistics(perfect, perfect, m) for m in METRIC_SETTINGS} for t in job.tests}
        _sentences(path).write_bytes(gzip_bytes(json.dumps(stats).encode()))
        record = {
            "version": 1,
            "job": job.id,
            "scale": "smoke",
            "pair": job.pair,
            "row": job.row,
            "seed": job.seed,
            "config_hash": job_config(job, settings)[1],
            "tests": {t: {} for t in job.tests},
            "finished": "now",
            "parameters": 1000,
            "wall_seconds": {"total": 1.0},
            "commit": FORMULA,
            "source_hash": "a" * 64,
            "dirty": False,
        }
        path.write_text(json.dumps(record))
        paths[job_id] = path
    hostile = {
        "en_zh.memory_rnn.s1": lambda p: p.write_text("[" * 200_000),
        "en_zh.self_attentive_rnn.s1": lambda p: _rewrite(p, lambda r: r.update(parameters=10**400)),
        "en_zh.mean_residual.s1": lambda p: gzip_bomb(_sentences(p)),
        "en_zh.baseline.s2": lambda p: _copy_record(paths["en_zh.mean_residual.s2"], p),
        "en_zh.self_attentive_content.s2": lambda p: _copy_record(paths["en_zh.self_attentive_content.s1"], p),
        "es_en.baseline.s1": lambda p: _rewrite(p, lambda r: r.update(seed="one")),
        "es_en.memory_rnn.s1": lambda p: _rewrite(p, lambda r: r.update(parameters=-1)),
        "es_en.self_attentive_rnn.s1": lambda p: _rewrite(p, lambda r: r.update(parameters=False)),
        "es_en.baseline.s2": lambda p: _rewrite(p, lambda r: r["tests"]["test"].update(scores={"bleu_tok": math.nan})),
        "es_en.mean_residual.s2": lambda p: _rewrite(p, lambda r: r.update(commit=TEX_COMMAND, source_hash="b" * 64)),
        "es_en.self_attentive_content.s2": lambda p: _rewrite(p, _wall),
    }
    for job_id, damage in hostile.items():
        damage(paths[job_id])
    return paths, [j for j in hostile if j != "es_en.mean_residual.s2"]  # the TeX commit is a good record


def test_tables_on_a_folder_of_every_hostile_record_prints_the_table_under_1_gb(tmp_path):
    """``tables`` (a process) on smoke Table 1 with every hostile record above at once: exit 0, no traceback, the
    table printed with each broken record named and counted, the CSV and caption escaped, the gzip bomb's 3 GiB
    refused at 16 MiB: peak memory under 1 GB."""
    paths, broken = _table1_folder(tmp_path)
    assert os.path.getsize(_sentences(paths["en_zh.mean_residual.s1"])) < 4 * 2**20
    done = run_measured(["tables", "table=1", "scale=smoke", f"results_dir={tmp_path}", "plot=false"], ROOT, tmp_path)
    code, out, err, peak = done.code, done.out, done.err, done.peak_bytes / 2**30
    assert code == 0 and "Traceback" not in err and "error" not in err, err
    first = out.split("written: ")[0].splitlines()  # Table 1; then the table against its also_against row
    not_counted = [line for line in first if line.startswith("- Not counted: ")]
    for job_id in broken:
        assert sum(str(paths[job_id]) in line for line in not_counted) == 1, (job_id, not_counted)
    assert len(not_counted) == len(broken)
    counts = re.findall(r"(\d+) broken", "".join(line for line in first if line.startswith("| ")))
    assert sum(map(int, counts)) == len(broken)  # each record counted in the one cell of its pair
    with open(tmp_path / "tables" / "table1.csv", newline="") as handle:
        commits = {row["commits"] for row in csv.DictReader(handle) if row["commits"]}
    assert "'+cmd|\"/c c" in commits and not any(c.startswith(formats.FORMULA_START) for c in commits), commits
    tex = (tmp_path / "tables" / "table1.tex").read_text()
    assert r"\textbackslash{}input\{/et" in tex and r"\input{" not in tex
    assert peak < 1.0, f"peak {peak:.2f} GiB"
