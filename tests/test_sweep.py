"""The table sweeps: specs, plans, jobs, records, resumption after SIGKILL, tables, launchers, W&B, errors.

The smoke scale (toy corpus, seconds per job) runs the real machinery: Hydra multiruns of ``sarnmt sweep-job``
started by ``reproduce``, each job training, checkpointing, evaluating with beam search and writing its record.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hydra.utils import get_class
from omegaconf import OmegaConf

import sarnmt
from sarnmt.cli.reproduce import reproduce
from sarnmt.cli.tables import render_tables, shown_path
from sarnmt.data.text.reading import read_lines
from sarnmt.sweep import code as code_module
from sarnmt.sweep import stats
from sarnmt.sweep.job import JobSettings, job_config
from sarnmt.sweep.launch import SweepError
from sarnmt.sweep.plan import job_from_id, make_job, plan_jobs
from sarnmt.sweep.records import config_hash, gzip_bytes, read_record, write_atomic, write_json
from sarnmt.sweep.spec import SCALES_DIR, TABLES_DIR, SpecError, load_scale, load_table
from sarnmt.utils.compose import compose, specs_dir
from sarnmt.utils.hash_view import MOVED_TARGETS
from tests.conftest import ROOT

VOLATILE_RECORD_KEYS = ("wall_seconds", "finished", "hardware", "config", "commit", "dirty", "source_hash")
# the tests run from a developer's working tree, which may have uncommitted changes: the refusal of a dirty checkout
# is tested on its own (tests/test_code_pinning.py)
DIRTY_OK = "allow_dirty=true"


@pytest.fixture(scope="module", autouse=True)
def one_thread_per_job():
    """Every job this module starts trains on one thread, as in ``tests/test_faults_resume.py``: a resumed job equals
    the uninterrupted one bit for bit only where every part of both ran with the same thread count (the measured
    values are in docs/reliability.md, "A killed run resumes exactly")."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        patch.setenv("MKL_DYNAMIC", "FALSE")
        yield


def reproduce_cfg(tmp: Path, *overrides: str):
    return compose(
        "reproduce",
        [f"runs_dir={tmp / 'runs'}", f"results_dir={tmp / 'results'}", "progress=false", DIRTY_OK, *overrides],
        return_hydra_config=True,
    )


def comparable(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k not in VOLATILE_RECORD_KEYS}
    out["tests"] = {
        t: {k: v for k, v in test.items() if k != "decoding_seconds"} for t, test in record["tests"].items()
    }
    return out


def run_sweep(tmp: Path, table: str = "3", *overrides: str) -> dict:
    return reproduce(reproduce_cfg(tmp, f"table={table}", "scale=smoke", *overrides), out=open(os.devnull, "w"))


@pytest.fixture(scope="module")
def smoke_table3(tmp_path_factory) -> Path:
    """An uninterrupted smoke sweep of Table 3 (6 jobs)."""
    tmp = tmp_path_factory.mktemp("smoke3")
    result = run_sweep(tmp)
    assert result["returncode"] == 0
    return tmp


# --- specs and plans -----------------------------------------------------------------------------------------------
def test_every_table_plans_at_every_scale_and_shared_runs_train_once():
    tables = [load_table(n) for n in (1, 2, 3, 4)]
    # per corpus: 3 main rows x the main seeds + 2 rows x the extra seeds; Table 4 adds content+scope (extra seeds)
    # on its two pairs. mini: Multi30K En->De serves En-Zh and En-De (same_as), so two corpora instead of three
    for scale, corpora in (("smoke", 3), ("mini", 2), ("paper", 3)):
        jobs = plan_jobs(tables, load_scale(scale))
        ids = [j.id for j in jobs]
        assert len(ids) == len(set(ids))
        main, extra = (len(load_scale(scale).seeds[k]) for k in ("main", "extra"))
        assert len(jobs) == corpora * (3 * main + 2 * extra) + 2 * extra, scale
    assert len(plan_jobs(tables, load_scale("mini"))) == 48  # 5 seeds x 3 rows, 3 x 3, two directions
    jobs = {j.id: j for j in plan_jobs(tables, load_scale("paper"))}
    assert jobs["en_de.baseline.s1"].tables == (2, 3)  # Tables 2 and 3 share their En-De runs
    assert jobs["es_en.self_attentive_content.s1"].tables == (1, 4)  # Table 4's content row is Table 1's
    assert jobs["es_en.self_attentive_content_scope.s1"].tables == (4,)
    mini = {j.id: j for j in plan_jobs(tables, load_scale("mini"))}
    assert mini["en_de.baseline.s1"].tables == (1, 2, 3, 4) and "en_zh.baseline.s1" not in mini
    assert "decoder=self_attentive_content" in mini["es_en.self_attentive_content.s1"].train
    assert mini["en_de.baseline.s1"].tests == {"nt14": "test", "nt15": "test_2017", "nt16": "test_2018"}
    assert load_scale("mini").job_test("en_zh", "test") == "nt14"


def test_bad_names_list_the_valid_ones():
    with pytest.raises(SpecError, match=r"unknown table .7.; valid tables: \[1, 2, 3, 4, 6\]"):
        load_table(7)
    with pytest.raises(SpecError, match=r"unknown scale 'huge'; valid scales: \['mini', 'mini8', 'paper', 'smoke'\]"):
        load_scale("huge")
    with pytest.raises(SpecError, match=r"no table has a row 'transformer'; rows: \['baseline', .*\]"):
        job_from_id(load_scale("smoke"), "es_en.transformer.s1")
    with pytest.raises(SpecError, match="is not <pair>.<row>.s<seed>"):
        job_from_id(load_scale("smoke"), "es_en-baseline")
    with pytest.raises(SweepError, match=r"unknown launcher 'pbs'; valid launchers: \['local', 'joblib', 'slurm'\]"):
        reproduce(reproduce_cfg(Path("/nonexistent"), "table=1", "launcher=pbs"))


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("also_against: [self_attentive_content]", None),
        ("also_against: [baseline]", "also_against: expected a list of rows other than the baseline"),
        ("also_against: [transformer]", "also_against: expected a list of rows other than the baseline"),
        ("also_against: mean_residual", "also_against: expected a list of rows other than the baseline"),
        ("also_agianst: [mean_residual]", r"unknown keys \['also_agianst'\]"),
    ],
)
def test_a_table_file_names_its_other_reference_rows_or_fails_by_key(tmp_path, line, error):
    text = (TABLES_DIR / "table3.yaml").read_text()
    text = "\n".join(row for row in text.splitlines() if not row.startswith("also_against"))
    (tmp_path / "table3.yaml").write_text(f"{text}\n{line}\n")
    if error is None:
        assert load_table(3, tmp_path).also_against == ("self_attentive_content",)
        return
    with pytest.raises(SpecError, match=f"table3.yaml: {error}"):
        load_table(3, tmp_path)


def test_reproduce_command_reports_bad_names_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "sarnmt", "reproduce", "table=9", "scale=smoke"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    # the child imports the installed sarnmt, which need not be this checkout's: its folder is not compared
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1
    assert message.startswith("error: unknown table '9'; valid tables: [1, 2, 3, 4, 6] (the table files in ")
    assert message.endswith(f"{Path('sarnmt', 'sweep', 'specs', 'tables')})")


def test_the_table_specs_ship_in_the_package_and_a_missing_folder_says_where_it_looked(tmp_path):
    """The specs are package data (found as the configs are), not files of the checkout; a folder without them
    names itself and the installed sarnmt, never an empty list of valid tables."""
    assert TABLES_DIR == specs_dir() / "tables" and specs_dir().is_relative_to(Path(sarnmt.__file__).parent)
    assert (specs_dir() / "human" / "table5.yaml").is_file() and not (ROOT / "sweeps" / "table1.yaml").exists()
    for folder in (tmp_path, tmp_path / "missing"):
        with pytest.raises(SpecError) as err:
            load_table(1, folder)
        message = str(err.value)
        assert f"no table (table<N>.yaml) files in {folder}" in message and "valid tables: []" not in message
        assert f"sarnmt {sarnmt.__version__} is installed at {Path(sarnmt.__file__).resolve().parent}" in message
    with pytest.raises(SpecError, match=r"no scale \(<scale>.yaml\) files in .*: its own are in "):
        load_scale("smoke", tmp_path)


def test_config_hash_ignores_paths_and_devices_but_not_the_model():
    scale = load_scale("smoke")
    job = job_from_id(scale, "es_en.baseline.s1")
    settings = JobSettings(Path("/a"), Path("/b"))
    digest = job_config(job, settings)[1]
    assert job_config(job, JobSettings(Path("/elsewhere"), Path("/b"), logger="wandb"))[1] == digest
    assert (
        job_config(job_from_id(scale, "es_en.baseline.s1", ("trainer.devices=2", "data.eval_batch_size=7")), settings)[
            1
        ]
        == digest
    )
    assert job_config(job_from_id(scale, "es_en.baseline.s1", ("model.hidden_dim=64",)), settings)[1] != digest
    assert job_config(job_from_id(scale, "es_en.baseline.s2"), settings)[1] != digest


@pytest.mark.parametrize("data", ["multi30k_en_de", "toy", "files"])
def test_a_moved_data_class_keeps_the_config_hash_of_its_first_path(data):
    """A DataModule that moved to another module trains the same thing: the config naming it by its new path hashes
    as the same config naming it by the path the records were written with (MOVED_TARGETS)."""
    cfg = compose("train", [f"data={data}", "paths.output_dir=/runs/x"])
    new = cfg.data._target_
    assert new in MOVED_TARGETS and get_class(new).__name__ == MOVED_TARGETS[new].rsplit(".", 1)[1]
    old = cfg.copy()
    old.data._target_ = MOVED_TARGETS[new]
    tests = {"nt14": "test"}
    assert config_hash(cfg, tests) == config_hash(old, tests)
    other = cfg.copy()
    other.data._target_ = "sarnmt.data.loading.somewhere_else.Other"  # an unknown path is hashed as it is
    assert config_hash(other, tests) != config_hash(cfg, tests)


@pytest.mark.parametrize("name", ["mini8", "mini"])
def test_the_committed_mini_records_keep_their_hashes(name):
    """The records of the mini sweeps (hours of training each) keep their hashes: the 8-epoch scale's 63 (``mini8``,
    superseded by the converged scale) were hashed before sarnmt.data was split into subpackages, the converged scale's
    (``mini``) at 59bab30; their jobs' configs, composed now from the overrides each record lists, still give their
    hashes. (Whether a record is current for today's scale file is the table's business: a record of an older scale
    shows as stale.)"""
    scale = load_scale(name)
    records = sorted((ROOT / "sweeps" / "results" / name / "records").glob("*.json"))
    assert records
    for path in records:
        record = json.loads(path.read_text())
        job = dataclasses.replace(job_from_id(scale, record["job"]), train=tuple(record["overrides"]))
        assert job_config(job, JobSettings(Path("/a"), Path("/b")))[1] == record["config_hash"], path.name


def test_data_order_per_seed_gives_each_seed_its_own_batch_order_and_fixed_one_for_all():
    """A scale's ``data_order``: ``fixed`` (every scale's, so that the published columns stay one experiment): two
    seeds of a job train on the same batches in the same order, and their configs hold no order seed (their hashes
    are the records'); ``per_seed``: each job's ``data.order_seed`` is its seed, and two seeds' batch orders differ,
    on the same corpus. A language model's job reads one stream in corpus order and is left as it is."""
    from hydra.utils import instantiate

    smoke, row = load_scale("smoke"), load_table(3).row("baseline")
    settings = JobSettings(Path("/a"), Path("/b"))
    orders = {}
    for data_order in ("fixed", "per_seed"):
        scale = dataclasses.replace(smoke, data_order=data_order)
        batches = []
        for seed in (1, 2):
            job = make_job(scale, "en_de", row, seed, extra=("data.n_train=300", "data.n_dev=5", "data.n_test=5"))
            cfg = job_config(job, settings)[0]
            assert cfg.data.order_seed == (seed if data_order == "per_seed" else None)
            module = instantiate(cfg.data)
            module.setup("fit")
            batches.append(([b.ids.tolist() for b in module.train_dataloader()], module.references("train")))
        orders[data_order] = batches
    (fixed_1, corpus), (fixed_2, corpus_2) = orders["fixed"]
    (seeded_1, corpus_3), (seeded_2, _) = orders["per_seed"]
    assert corpus == corpus_2 == corpus_3  # the toy corpus's own seed (data.seed) is left alone
    assert fixed_1 == fixed_2 and seeded_1 != seeded_2
    assert sorted(i for b in seeded_1 for i in b) == sorted(i for b in seeded_2 for i in b)  # the same examples
    lm = load_table(6).rows[0]
    assert not any(
        "order_seed" in o for o in make_job(dataclasses.replace(smoke, data_order="per_seed"), "lm_text", lm, 2).train
    )


# --- the smoke sweep -----------------------------------------------------------------------------------------------
def test_smoke_sweep_writes_records_tables_and_skips_finished_jobs(smoke_table3):
    results = smoke_table3 / "results"
    records = sorted((results / "records").glob("*.json"))
    assert [p.name for p in records] == sorted(
        f"en_de.{r}.s{s}.json" for r in ("baseline", "mean_residual", "self_attentive_content") for s in (1, 2)
    )
    record = json.loads(records[0].read_text())
    assert record["steps"] == 60 and record["selected_checkpoint"]["monitor"] == "val/loss"
    assert record["decoding"]["beam_size"] == 5 and record["decoding"]["length_penalty"]["alpha"] == 1.0
    for test in ("nt14", "nt15", "nt16"):
        scores = record["tests"][test]["scores"]
        assert "tok:13a" in scores["bleu"]["signature"] and "tok:none" in scores["bleu_tok"]["signature"]
        hyps = gzip.decompress((results / record["tests"][test]["hypotheses"]).read_bytes()).decode().splitlines()
        assert len(hyps) == record["tests"][test]["sentences"] == 40
    table = (results / "tables" / "table3.md").read_text()
    assert "| NMT baseline |" in table and "(2)" in table and "21.0" in table  # the paper's number beside
    for suffix in ("tex", "csv", "png"):
        assert (results / "tables" / f"table3.{suffix}").stat().st_size > 0
    again = run_sweep(smoke_table3)
    assert {j["state"] for j in again["jobs"]} == {"complete"} and again["returncode"] is None


def test_broken_and_stale_records_are_reported_never_averaged(smoke_table3, tmp_path):
    tmp = tmp_path / "copy"
    shutil.copytree(smoke_table3, tmp)
    records = tmp / "results" / "records"
    broken = records / "en_de.mean_residual.s2.json"
    broken.write_text(broken.read_text()[:200])  # truncated
    stale = records / "en_de.self_attentive_content.s1.json"
    data = json.loads(stale.read_text())
    stale.write_text(json.dumps({**data, "config_hash": "0123456789abcdef"}))
    plan = run_sweep(tmp, "3", "dry_run=true")
    states = {j["job"]: j for j in plan["jobs"]}
    assert states["en_de.mean_residual.s2"]["state"] == "evaluate"  # trained already: only evaluated again
    assert (
        str(broken) in states["en_de.mean_residual.s2"]["note"]
        and "truncated" in states["en_de.mean_residual.s2"]["note"]
    )
    assert "config hash 0123456789abcdef" in states["en_de.self_attentive_content.s1"]["note"]
    text = render_tables([3], "smoke", tmp / "results", write=False, out=open(os.devnull, "w"))[3]
    row = next(line for line in text.splitlines() if line.startswith("| + Self-attentive residual"))
    assert "(1 of 2 seeds); 1 stale" in row
    assert "(1 of 2 seeds); 1 broken" in next(
        line for line in text.splitlines() if line.startswith("| + Mean residual")
    )
    assert f"Not counted: record {stale} has config hash 0123456789abcdef" in text
    rerun = run_sweep(tmp)  # the broken record's job is evaluated again; the stale one is retrained
    assert rerun["returncode"] == 0
    assert read_record(broken).state == "complete"
    assert comparable(json.loads(broken.read_text())) == comparable(
        json.loads((smoke_table3 / "results" / "records" / broken.name).read_text())
    )


def test_records_of_other_code_run_again_where_their_cell_would_be_mixed(smoke_table3, tmp_path):
    """A sweep leaves every cell one code: a record of other code is run again when its cell has seeds to run now or
    runs of this code, kept when its whole cell is one code (or allow_mixed_code=true); the run folder other code
    started is moved aside, and the record written again is the one this code gives."""
    tmp = tmp_path / "copy"
    shutil.copytree(smoke_table3, tmp)
    records, runs = tmp / "results" / "records", tmp / "runs"
    old = "0" * 16

    def set_source(job: str, source: str | None) -> None:
        path = records / f"{job}.json"
        data = {k: v for k, v in json.loads(path.read_text()).items() if k != "source_hash"}
        path.write_text(json.dumps({**data, **({"source_hash": source} if source else {})}))

    set_source("en_de.baseline.s1", old)  # beside s2 of this code
    marker = json.loads((runs / "en_de.baseline.s1" / "job.json").read_text())
    marker["code"]["source_hash"] = old  # and trained by that code: its folder is set aside
    (runs / "en_de.baseline.s1" / "job.json").write_text(json.dumps(marker))
    set_source("en_de.mean_residual.s1", old)
    set_source("en_de.mean_residual.s2", old)  # the whole cell one (other) code: kept
    set_source("en_de.self_attentive_content.s1", None)  # unpinned, and its cell's s2 runs now
    (records / "en_de.self_attentive_content.s2.json").unlink()

    with open(tmp / "plan.txt", "w") as handle:
        result = reproduce(reproduce_cfg(tmp, "table=3", "scale=smoke", "dry_run=true"), out=handle)
    assert "3 complete, 2 evaluate, 1 new\n" in (tmp / "plan.txt").read_text()  # how far the sweep is, in one line
    plan = {j["job"]: j for j in result["jobs"]}
    assert plan["en_de.baseline.s1"]["state"] == "new" and plan["en_de.baseline.s2"]["state"] == "complete"
    assert f"ran on commit {marker['code']['commit'][:10]}" in plan["en_de.baseline.s1"]["note"]
    assert "runs again on this code" in plan["en_de.baseline.s1"]["note"]
    assert {plan[f"en_de.mean_residual.s{s}"]["state"] for s in (1, 2)} == {"complete"}
    assert "kept, its cell is one code" in plan["en_de.mean_residual.s1"]["note"]
    sac = [plan[f"en_de.self_attentive_content.s{s}"] for s in (1, 2)]
    assert [j["state"] for j in sac] == ["evaluate", "evaluate"]  # this code trained both: evaluated again
    assert "unpinned" in sac[0]["note"]
    mixed = {j["job"]: j for j in run_sweep(tmp, "3", "dry_run=true", "allow_mixed_code=true")["jobs"]}
    assert mixed["en_de.baseline.s1"]["state"] == "complete"
    assert "kept, allow_mixed_code=true" in mixed["en_de.baseline.s1"]["note"]

    assert run_sweep(tmp, "3", "render=false")["returncode"] == 0
    now = code_module.source_hash()
    for path in sorted(records.glob("*.json")):
        record = json.loads(path.read_text())
        assert record["source_hash"] == (old if "mean_residual" in path.name else now), path.name
        original = json.loads((smoke_table3 / "results" / "records" / path.name).read_text())
        assert comparable(record) == comparable(original), path.name
    aside = runs / f"en_de.baseline.s1.other-code-{old}"
    assert (aside / "fit.json").is_file() and (runs / "en_de.baseline.s1" / "fit.json").is_file()
    assert {j["state"] for j in run_sweep(tmp, "3", "dry_run=true")["jobs"]} == {"complete"}


def test_sigkill_mid_job_then_rerun_resumes_and_equals_the_uninterrupted_sweep(smoke_table3, tmp_path):
    cfg = reproduce_cfg(tmp_path, "table=3", "scale=smoke", "render=false")
    killed_job = "en_de.self_attentive_content.s1"  # the third job of the plan
    process = subprocess.Popen(
        [sys.executable, "-m", "sarnmt", "reproduce", *(a for a in _args(cfg))],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    last = tmp_path / "runs" / killed_job / "checkpoints" / "last.ckpt"
    deadline, step = time.monotonic() + 240, None
    while time.monotonic() < deadline and process.poll() is None:
        if last.is_file():
            try:
                step = torch.load(last, map_location="cpu", weights_only=True)["global_step"]
            except Exception:  # noqa: BLE001 - being replaced right now: look again
                step = None
            if step is not None and 10 <= step < 50 and step % 8:  # mid-epoch (8 batches an epoch)
                os.killpg(process.pid, signal.SIGKILL)
                break
        time.sleep(0.02)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the sweep was not killed in the middle of a job"
    assert not (tmp_path / "results" / "records" / f"{killed_job}.json").exists()
    log = tmp_path / "resumed.log"
    with open(log, "w") as handle:
        rerun = reproduce(cfg, out=handle)
    states = {j["job"]: j["state"] for j in rerun["jobs"]}
    assert states["en_de.baseline.s1"] == states["en_de.mean_residual.s1"] == "complete"  # skipped
    assert states[killed_job] == "resume"
    assert rerun["returncode"] == 0
    for record in sorted((smoke_table3 / "results" / "records").glob("*.json")):
        mine = tmp_path / "results" / "records" / record.name
        assert comparable(json.loads(mine.read_text())) == comparable(json.loads(record.read_text())), record.name
        assert (
            mine.with_name(mine.name[:-5] + ".sentences.json.gz").read_bytes()
            == record.with_name(record.name[:-5] + ".sentences.json.gz").read_bytes()
        )
    for hyps in (smoke_table3 / "results" / "hypotheses").rglob("*.gz"):
        assert (tmp_path / "results" / hyps.relative_to(smoke_table3 / "results")).read_bytes() == hyps.read_bytes()


def _args(cfg) -> list[str]:
    return [
        f"table={cfg.table}",
        f"scale={cfg.scale}",
        f"runs_dir={cfg.runs_dir}",
        f"results_dir={cfg.results_dir}",
        "progress=false",
        "render=false",
        DIRTY_OK,
    ]


# --- tables from the paper's released outputs ----------------------------------------------------------------------
def test_table1_from_the_released_outputs_gives_the_papers_numbers(shared_data, tmp_path):
    released = {
        "es_en": ("es-en/newstest2013", "en", "bleu_tok_lc"),
        "en_zh": ("en-zh/unCorpus.test", "zh", "bleu_tok"),
    }
    scale = load_scale("paper")
    settings = JobSettings(tmp_path / "runs", tmp_path / "results")
    for pair, (stem, lang, metric) in released.items():
        refs = read_lines(shared_data / "released-outputs" / f"{stem}.{lang}.gz")
        for row, system in (
            ("baseline", "baseline"),
            ("mean_residual", "average"),
            ("self_attentive_content", "attentive"),
        ):
            hyps = read_lines(shared_data / "released-outputs" / f"{stem}.{system}.{lang}.gz")
            job = job_from_id(scale, f"{pair}.{row}.s1")
            _, digest = job_config(job, settings)
            sentence = stats.sentence_statistics(hyps, refs, metric)
            score = stats.corpus_score(sentence, metric)
            path = settings.record_path(job)
            write_atomic(
                path.with_name(f"{job.id}.sentences.json.gz"),
                gzip_bytes(json.dumps({"test": {metric: sentence}}).encode()),
            )
            write_json(
                path,
                {
                    "version": 1,
                    "job": job.id,
                    "scale": "paper",
                    "pair": pair,
                    "row": row,
                    "seed": 1,
                    "config_hash": digest,
                    "parameters": 108_725_885,
                    "finished": "released",
                    "hardware": {"cpu": "K40"},
                    "wall_seconds": {"total": 0.0},
                    "tests": {"test": {"scores": {metric: {"score": score}}}},
                },
            )
    text = render_tables([1], "paper", settings.results_dir, write=True, out=open(os.devnull, "w"))[1]
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "25.43 (1 of 3 seeds)" in rows["NMT baseline"] and "22.43 (1 of 3 seeds)" in rows["NMT baseline"]
    assert "25.70 (1 of 3 seeds)" in rows["+ Mean residual connections"]
    # one released run per system: no seed-aware test ("n/a (1 run)", never replaced by the sentence-level one); the
    # self-attentive row keeps the paper's t-test marker, sentence-level (t-test p = 0.0054)
    attentive = rows["+ Self-attentive residual connections"]
    assert "26.26** (1 of 3 seeds)" in attentive and "| +0.83, n/a (1 run) |" in attentive
    assert "23.86 (1 of 3 seeds)" in attentive and "†" not in attentive and "‡" not in attentive
    assert "3 not run" in rows["+ Memory RNN"] or "1 not run" in rows["+ Memory RNN"]
    assert (
        "| 25.4 |" in rows["NMT baseline"]
        and "| 26.3 |" in attentive
        and "| 25.7 |" in rows["+ Mean residual connections"]
    )
    assert "1 unpinned" in rows["NMT baseline"]  # records without a source hash: counted, averaged
    csv_rows = (settings.results_dir / "tables" / "table1.csv").read_text().splitlines()
    header = csv_rows[0].split(",")
    cells = {
        (r["row"], r["column"]): r for r in (dict(zip(header, line.split(","), strict=True)) for line in csv_rows[1:])
    }
    es_en = cells["self_attentive_content", "es_en"]
    assert es_en["mean"] == "26.2566" and es_en["seeds_done"] == "1" and es_en["seed_test"] == "n/a (1 run)"
    assert es_en["p_seed"] == "" and float(es_en["p_t"]) < 0.01 and es_en["markers"] == "**"
    en_zh = cells["self_attentive_content", "en_zh"]  # the sentence-level bootstrap alone finds this one
    assert float(en_zh["p_boot_sentence"]) < 0.01 and float(en_zh["p_t"]) > 0.05 and en_zh["markers"] == ""


# --- launchers -----------------------------------------------------------------------------------------------------
def test_slurm_dry_run_prints_the_jobs_and_the_submitit_settings(tmp_path):
    cfg = reproduce_cfg(
        tmp_path,
        "table=1",
        "scale=paper",
        "launcher=slurm",
        "dry_run=true",
        "launcher_overrides=['hydra.launcher.gpus_per_node=4','hydra.launcher.partition=gpu']",
    )
    log = tmp_path / "out.txt"
    with open(log, "w") as handle:
        result = reproduce(cfg, out=handle)
    text = log.read_text()
    assert len(result["jobs"]) == 22 and "en_zh.baseline.s1" in text and "dry run: nothing is run" in text
    command = result["command"]
    assert "hydra/launcher=slurm" in command
    assert any(a.startswith("overrides=['trainer=slurm'") for a in command)
    launcher = result["launcher"]
    assert launcher["_target_"].endswith("SlurmLauncher")
    assert launcher["gpus_per_node"] == 4 and launcher["tasks_per_node"] == 4  # one DDP rank per GPU
    assert launcher["partition"] == "gpu" and launcher["timeout_min"] == 2880 and launcher["max_num_timeout"] == 20
    assert '"max_num_timeout": 20' in text and '"gpus_per_node": 4' in text
    trainer = compose("train", ["trainer=slurm"]).trainer
    assert trainer.strategy == "ddp" and trainer.accelerator in ("gpu", "cpu")  # as allocated: test_slurm_launcher.py
    assert trainer.plugins[1]._target_.endswith("SLURMEnvironment") and trainer.plugins[1].auto_requeue is False
    os.environ["SLURM_NTASKS_PER_NODE"], os.environ["SLURM_JOB_NUM_NODES"] = "4", "2"
    try:
        trainer = compose("train", ["trainer=slurm"]).trainer
        assert (trainer.devices, trainer.num_nodes) == (4, 2)  # SLURM's tasks are the DDP ranks
    finally:
        del os.environ["SLURM_NTASKS_PER_NODE"], os.environ["SLURM_JOB_NUM_NODES"]


def test_joblib_dry_run_runs_jobs_in_parallel_processes(tmp_path):
    result = reproduce(
        reproduce_cfg(tmp_path, "table=3", "launcher=joblib", "n_jobs=3", "dry_run=true"), out=open(os.devnull, "w")
    )
    assert "hydra/launcher=joblib" in result["command"] and "hydra.launcher.n_jobs=3" in result["command"]
    assert "gpu_per_job=false" in result["command"]  # no GPU here: CPU jobs side by side, sharing the cores
    assert f"cpu_threads={max(1, (os.cpu_count() or 1) // 3)}" in result["command"]
    assert result["launcher"]["_target_"].endswith("JoblibLauncher") and result["launcher"]["n_jobs"] == 3


def test_multirun_of_ddp_sim_jobs_runs_each_job_once(tmp_path):
    command = [
        sys.executable,
        "-m",
        "sarnmt",
        "sweep-job",
        "--multirun",
        "scale=smoke",
        "job=en_de.baseline.s1,en_de.mean_residual.s1",
        f"runs_dir={tmp_path / 'runs'}",
        f"results_dir={tmp_path / 'results'}",
        "progress=false",
        DIRTY_OK,
        "overrides=['trainer=ddp_sim','trainer.enable_progress_bar=false','callbacks.progress_bar=null']",
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "results" / "records").glob("*.json")) == [
        "en_de.baseline.s1.json",
        "en_de.mean_residual.s1.json",
    ]
    assert sorted(p.name for p in (tmp_path / "runs" / ".launch").iterdir() if p.is_dir()) == [
        "en_de.baseline.s1",
        "en_de.mean_residual.s1",
    ]  # one multirun, not relaunched by a second rank
    assert not (tmp_path / "multirun").exists()
    record = json.loads((tmp_path / "results" / "records" / "en_de.baseline.s1.json").read_text())
    assert record["config"]["trainer"]["strategy"] == "ddp_spawn" and record["steps"] > 0


# --- corpora checked before any job --------------------------------------------------------------------------------
def test_missing_corpus_fails_before_any_job(tmp_path):
    closed = "http://127.0.0.1:9"  # nothing listens: the download fails at once
    cfg = reproduce_cfg(
        tmp_path,
        "table=2",
        "scale=paper",
        f"overrides=['data.root={tmp_path / 'corpora'}','paths.cache_dir={tmp_path / 'cache'}',"
        f"'data.url_base={closed}']",
    )
    with pytest.raises(SweepError, match=r"language pair en_de of scale paper needs corpus en_de.*download") as err:
        reproduce(cfg, out=open(os.devnull, "w"))
    assert "europarl-v7-de-en" in str(err.value) and "\n" not in str(err.value).strip()
    assert not (tmp_path / "runs").exists()  # no job started
    cfg = reproduce_cfg(tmp_path, "table=1", "scale=paper", f"overrides=['data.root={tmp_path / 'corpora'}']")
    with pytest.raises(SweepError, match=r"en_zh .*un-en-zh/train.en.*UN Parallel Corpus"):
        reproduce(cfg, out=open(os.devnull, "w"))
    assert not (tmp_path / "runs").exists()


# --- W&B ---------------------------------------------------------------------------------------------------------
def _wandb_records(path: Path):
    """The protobuf records of an offline run file (LevelDB log format: 32 KiB blocks, 7-byte record headers)."""
    from wandb.proto import wandb_internal_pb2

    data, pos, buffer = path.read_bytes(), 7, b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            break
        buffer = chunk if kind in (1, 2) else buffer + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(buffer)
            yield record


def test_wandb_offline_run_per_job_with_group_tags_and_scores(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    command = [
        sys.executable,
        "-m",
        "sarnmt",
        "sweep-job",
        "scale=smoke",
        "job=es_en.mean_residual.s1",
        "logger=wandb",
        f"runs_dir={tmp_path / 'runs'}",
        f"results_dir={tmp_path / 'results'}",
        "progress=false",
        DIRTY_OK,
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "results" / "records" / "es_en.mean_residual.s1.json").read_text())
    (run_file,) = (tmp_path / "runs" / "es_en.mean_residual.s1" / "wandb").glob("offline-run-*/run-*.wandb")
    runs, summary = [], {}
    for item in _wandb_records(run_file):
        kind = item.WhichOneof("record_type")
        if kind == "run":
            runs.append(item.run)
        elif kind == "summary":
            summary.update({u.key: json.loads(u.value_json) for u in item.summary.update})
    assert runs[0].run_group == "table1-smoke" and runs[0].job_type == "train"  # mean residual: Table 1 only
    assert runs[0].run_id == f"smoke-es-en-mean-residual-s1-{record['config_hash'][:8]}"
    assert set(runs[0].tags) == {"smoke", "es_en", "mean_residual", "seed1", "table1"}
    assert summary["final/test/bleu_tok"] == pytest.approx(record["tests"]["test"]["scores"]["bleu_tok"]["score"])
    assert "final/test/bleu" in summary and "final/test/chrf" in summary


def test_rendered_table_logged_as_a_wandb_table_in_a_summary_run(smoke_table3, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    settings = {"project": "sarnmt", "offline": True, "save_dir": str(tmp_path)}
    render_tables(
        [3], "smoke", smoke_table3 / "results", write=False, out=open(os.devnull, "w"), wandb_settings=settings
    )
    runs = {}  # one summary run per rendered table: Table 3, and Table 3 against its also_against row
    for run_file in tmp_path.glob("wandb/offline-run-*/run-*.wandb"):
        kinds = {}
        for item in _wandb_records(run_file):
            kinds.setdefault(item.WhichOneof("record_type"), []).append(item)
        runs[kinds["run"][0].run.run_group] = (run_file, kinds)
    assert sorted(runs) == ["table3-smoke", "table3.vs-mean_residual-smoke"]
    run_file, kinds = runs["table3-smoke"]
    assert kinds["run"][0].run.job_type == "summary"
    logged = {
        ".".join(u.nested_key) or u.key: json.loads(u.value_json) for h in kinds["history"] for u in h.history.item
    }
    assert logged["table3._type"] == "table-file" and logged["table3.nrows"] == 9  # 3 rows x 3 columns
    table = json.loads(next(run_file.parent.glob("files/media/table/table3_*.table.json")).read_text())
    assert table["columns"][:4] == ["table", "scale", "row", "column"] and len(table["data"]) == 9


def test_concurrent_preparation_of_one_corpus_builds_it_once(tmp_path):
    """Two jobs that need the same corpus at once: one prepares it, the other waits for it and uses its cache."""
    script = tmp_path / "prepare.py"
    script.write_text(PREPARE_SCRIPT)
    for name in ("train", "val"):
        for lang, word in (("en", "cat"), ("de", "Katze")):
            (tmp_path / f"{name}.{lang}").write_text("".join(f"the {word} {i}\n" for i in range(300)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's sarnmt, not whichever one is installed
    procs = [
        subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outputs = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    assert sorted(o["cached"] for o in outputs) == [False, True]  # built once; the other process waited
    assert outputs[0]["cache"] == outputs[1]["cache"]
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")] == [
        Path(outputs[0]["cache"]).name
    ]


PREPARE_SCRIPT = """
import json, sys
from pathlib import Path
from sarnmt.data.corpora.catalog import Corpus, Part
from sarnmt.data.text.processor import SideSettings
from sarnmt.data.corpora.preparation import prepare_corpus
root = Path(sys.argv[1])
corpus = Corpus("tiny", {s: (Part(f"{s}.en", f"{s}.de", 300),) for s in ("train", "val")}, pair=("en", "de"))
side = dict(normalize=True, aggressive_dash_splits=True, case="lowercase", segmenter="moses")
report = prepare_corpus(corpus, root=root, cache_dir=root / "cache", src=SideSettings(lang="en", **side),
                        tgt=SideSettings(lang="de", **side), vocab_size=100, joint_vocab=False)
print(json.dumps({"cached": report["cached"], "cache": report["cache"]}))
"""


def test_smoke_scale_yaml_is_valid_omegaconf():
    assert OmegaConf.load(SCALES_DIR / "smoke.yaml").pairs.en_de.tests.nt16 == "test"


def test_systems_table_reads_evaluate_records_and_lists_unfinished_systems(tmp_path):
    from sarnmt.errors import InputError
    from sarnmt.sweep.systems import systems_table

    def record(folder, search, bleu):
        path = tmp_path / folder / search / "eval.test.json"
        path.parent.mkdir(parents=True)
        path.write_text(
            json.dumps(
                {
                    "parameters": 1234567,
                    "global_step": 678,
                    "bleu": {"score": bleu},
                    "bleu_tokenized": {"score": bleu + 0.5},
                    "chrf": {"score": 60.0},
                    "model": {
                        "model": {"_target_": "sarnmt.models.lstm.InputFeedingLSTM"},
                        "decoder": {"_target_": "sarnmt.models.variants.NoTargetContext"},
                    },
                }
            )
        )

    record("lstm_input_feeding", "beam5", 30.25)
    record("lstm_input_feeding", "greedy", 29.0)
    record("lstm_ff_attention", "beam5", 28.0)  # greedy not decoded yet
    table = systems_table(tmp_path)
    assert "| lstm_ff_attention | | | | | not finished | | | |" in table
    assert (
        "| lstm_input_feeding | InputFeedingLSTM | NoTargetContext | 1,234,567 | 678 | 30.25 | 29.00 | 30.75 | 60.00 |"
    ) in table
    with pytest.raises(InputError, match="nothing: no system folders"):
        systems_table(tmp_path / "nothing")


def test_published_footers_name_records_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shown_path("sweeps/results/mini") == Path("sweeps/results/mini")
    assert shown_path(str(tmp_path / "sweeps")) == Path("sweeps")
    outside = tmp_path.parent / "elsewhere"
    assert shown_path(str(outside)) == outside  # not under the working directory: absolute, as given
