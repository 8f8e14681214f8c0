"""The quality comparison beside JoeyNMT and fairseq (benchmarks/peers/quality/, make peers-quality): the peers'
installers, matched configurations, the runner's resume and records (on a fake tool that trains in a second), the
log readers, and the renderer on synthetic records. The real trainings are not run here (hours); the end-to-end smoke
run is a slow test."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchmarks.peers.quality import breakdown, cli, render, runner, speed
from benchmarks.peers.quality.data import TESTS, at_form, export
from benchmarks.peers.quality.scoring import Scorer
from benchmarks.peers.quality.systems import (
    PEERS,
    SCALES,
    Event,
    Fairseq,
    Job,
    JoeyNMT,
    Sarnmt,
    System,
    mini_overrides,
)
from sarnmt.sweep.stats import sentence_statistics

ROOT = Path(__file__).resolve().parent.parent
MINI_RECORD = ROOT / "sweeps/results/mini/records/en_de.baseline.s1.json"


# ------------------------------------------------------------------------------------------------------ installers

INSTALLED = {
    "joeynmt": (JoeyNMT, PEERS / "joeynmt", ["-m", "joeynmt", "--help"]),
    "fairseq": (Fairseq, PEERS / "fairseq", ["-c", "import fairseq, fairseq_cli.train"]),
}


@pytest.mark.parametrize("tool", sorted(INSTALLED))
def test_an_installed_peer_is_the_version_with_its_patches_and_runs(tool):
    cls, venv, probe = INSTALLED[tool]
    if not (venv / "bin" / "python").exists():
        pytest.skip(f"{tool} is not installed in {venv} (benchmarks/peers/install_{tool}.sh {venv})")
    system = cls()
    assert system.unavailable() is None
    site = next((venv / "lib").glob("python3*/site-packages"))
    if tool == "joeynmt":
        assert '"verbose": False' not in (site / "joeynmt/builders.py").read_text()
        assert "weights_only=False" in (site / "joeynmt/helpers.py").read_text()
    else:
        assert "weights_only=False" in (site / "fairseq/checkpoint_utils.py").read_text()
    done = subprocess.run([str(venv / "bin" / "python"), *probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("tool", ["joeynmt", "fairseq"])
def test_an_installer_that_cannot_install_says_so_in_one_line(tmp_path, tool):
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_TORCH": "torch==0.0.1"}  # no index: as without a network
    done = subprocess.run(
        ["bash", str(ROOT / f"benchmarks/peers/install_{tool}.sh"), str(tmp_path / "venv")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"install_{tool}: ") and "not installed" in lines[0], done.stderr


def test_a_missing_peer_is_not_run_with_the_reason(tmp_path):
    assert "not run: JoeyNMT 2.3.0 not installed" in JoeyNMT(tmp_path / "none").unavailable()
    assert "not run: fairseq 0.12.2 not installed" in Fairseq(tmp_path / "none").unavailable()


def test_bf16_runs_only_where_the_cpu_multiplies_bf16(monkeypatch):
    import sarnmt.utils.precision as precision

    monkeypatch.setattr(precision, "native_bf16", lambda device: False)
    assert Sarnmt("bf16").unavailable() == "not run: CPU lacks bf16 (AVX-512 BF16 or AMX)"
    monkeypatch.setattr(precision, "native_bf16", lambda device: True)
    assert Sarnmt("bf16").unavailable() is None and Sarnmt("fp32").unavailable() is None


# ---------------------------------------------------------------------------------------------- matched configs


def _job(system: System, tmp_path: Path, scale: str = "full") -> Job:
    return Job(system, 2, SCALES[scale], tmp_path / "data", tmp_path / "work")


def test_the_configs_are_matched_to_sarnmts_mini_baseline(tmp_path):
    sarnmt = Sarnmt("fp32").config(_job(Sarnmt("fp32"), tmp_path))
    assert (sarnmt["model"]["emb_dim"], sarnmt["model"]["hidden_dim"]) == (128, 256)
    assert sarnmt["optim"]["lr"] == 0.001 and sarnmt["trainer"]["gradient_clip_val"] == 1.0
    assert sarnmt["data"]["max_tokens"] == 4096 and sarnmt["trainer"]["val_check_interval"] == 100
    assert sarnmt["early_stopping"]["patience"] == 4 and sarnmt["trainer"]["max_epochs"] == 60
    # the committed mini records were made with these overrides
    assert json.loads(MINI_RECORD.read_text())["overrides"] == mini_overrides(1)

    joey = JoeyNMT().config(_job(JoeyNMT(), tmp_path))
    enc, dec = joey["model"]["encoder"], joey["model"]["decoder"]
    assert (enc["rnn_type"], enc["bidirectional"], enc["hidden_size"], enc["embeddings"]["embedding_dim"]) == (
        "gru",
        True,
        256,
        128,
    )
    assert (dec["rnn_type"], dec["attention"], dec["hidden_size"], dec["embeddings"]["embedding_dim"]) == (
        "gru",
        "bahdanau",
        256,
        128,
    )
    assert enc["dropout"] == dec["dropout"] == enc["embeddings"]["dropout"] == 0.2
    t = joey["training"]
    assert (t["learning_rate"], t["clip_grad_norm"], t["batch_size"], t["batch_type"]) == (0.001, 1.0, 4096, "token")
    assert (t["validation_freq"], t["patience"], t["early_stopping_metric"], t["random_seed"]) == (100, 4, "loss", 2)
    assert joey["testing"]["beam_size"] == 5 and "updates" not in t

    fairseq = dict(a.removeprefix("--").split("=", 1) for a in Fairseq().args(_job(Fairseq(), tmp_path)) if "=" in a)
    assert fairseq["arch"] == "lstm" and "--encoder-bidirectional" in Fairseq().args(_job(Fairseq(), tmp_path))
    dims = ("encoder-embed-dim", "encoder-hidden-size", "decoder-embed-dim", "decoder-hidden-size")
    assert [fairseq[k] for k in dims] == ["128", "256", "128", "256"]
    assert (fairseq["lr"], fairseq["clip-norm"], fairseq["max-tokens"], fairseq["dropout"]) == (
        "0.001",
        "1.0",
        "4096",
        "0.2",
    )
    assert (fairseq["patience"], fairseq["validate-interval-updates"], fairseq["seed"]) == ("4", "100", "2")
    assert "max-update" not in fairseq  # to its own early stopping


def test_the_smoke_scale_stops_every_system_after_a_few_dozen_updates(tmp_path):
    n = SCALES["smoke"].max_updates
    assert n <= 60
    assert f"trainer.max_steps={n}" in Sarnmt("fp32").overrides(_job(Sarnmt("fp32"), tmp_path, "smoke"))
    assert JoeyNMT().config(_job(JoeyNMT(), tmp_path, "smoke"))["training"]["updates"] == n
    assert f"--max-update={n}" in Fairseq().args(_job(Fairseq(), tmp_path, "smoke"))
    assert "trainer.precision=bf16-mixed" in Sarnmt("bf16").overrides(_job(Sarnmt("bf16"), tmp_path))


# ------------------------------------------------------------------------------------------------- log readers


def test_joeynmt_and_fairseq_logs_are_read(tmp_path):
    job = _job(JoeyNMT(), tmp_path)
    job.state = {"step": 0}
    joey = JoeyNMT()
    lines = [
        "2026-12-07 11:21:00 - INFO - joeynmt.model - Total params: 5449472",
        "2026-12-07 11:21:18 - INFO - joeynmt.training - Epoch   1, Step:      100, Batch Loss:   130.1, Lr: 0.001",
        "2026-12-07 11:21:22 - INFO - joeynmt.prediction - Evaluation result (greedy): bleu:   0.16, loss: 142.38, "
        "ppl: 7406.74, acc:   0.10, 0.0156[sec]",
        "2026-12-07 11:21:22 - INFO - joeynmt.training - Hooray! New best validation result [loss]!",
        "2026-12-07 11:21:22 - INFO - joeynmt.training - Checkpoint saved in /x/model/100.ckpt.",
        "2026-12-07 11:21:51 - INFO - joeynmt.training - Training ended since minimum lr 0.0001 was reached.",
    ]
    events = [e for line in lines for e in joey.parse(job, line)]
    assert [(e.kind, e.step) for e in events] == [
        ("params", None),
        ("valid", 100),
        ("best", 100),
        ("saved", 100),
        ("end", 100),
    ]
    assert events[1].dev_loss == 142.38 and events[0].value == 5449472
    fairseq = Fairseq()
    lines = [
        "2026-12-07 11:26:02 | INFO | fairseq_cli.train | num. shared model params: 4,945,960 (num. trained: "
        "4,945,960)",
        '2026-12-07 11:26:52 | INFO | valid | {"epoch": 1, "valid_loss": "9.869", "valid_nll_loss": "9.869", '
        '"valid_bleu": "0.01", "valid_wps": "1", "valid_num_updates": "10"}',
        "2026-12-07 11:27:00 | INFO | fairseq.trainer | Loaded checkpoint /x/checkpoint_last.pt "
        "(epoch 2 @ 300 updates)",
        "2026-12-07 11:27:30 | INFO | fairseq_cli.train | early stop since valid performance hasn't improved for last "
        "4 runs",
        "2026-12-07 11:27:30 | INFO | fairseq_cli.train | done training in 87.5 seconds",
    ]
    events = [e for line in lines for e in fairseq.parse(job, line)]
    assert [(e.kind, e.step) for e in events] == [
        ("params", None),
        ("valid", 10),
        ("resumed", 300),
        ("stopped_early", None),
        ("end", None),
    ]
    assert (events[1].dev_loss, events[1].dev_bleu, events[0].value) == (9.869, 0.01, 4945960)


def test_sarnmts_early_stop_is_read_from_its_end_line(tmp_path):
    # the clock callback's end line says whether Lightning's EarlyStopping ended the run; a run it ended must not be
    # summarised as one that reached the epoch limit
    system = Sarnmt("fp32")
    job = _job(system, tmp_path)
    early = system.parse(job, 'PEERS-QUALITY {"kind": "end", "step": 3600, "stopped_early": true}')
    assert [e.kind for e in early] == ["stopped_early", "end"] and early[1].step == 3600
    capped = system.parse(job, 'PEERS-QUALITY {"kind": "end", "step": 6780, "stopped_early": false}')
    assert [e.kind for e in capped] == ["end"]
    points = [{"attempt": 1, "t": 10.0 * u, "kind": "valid", "step": u, "dev_loss": 5.0 - u / 1000} for u in (100, 200)]
    attempts = [{"n": 1, "start": 0.0, "end": 30.0, "resumed_from": None}]
    for events, stopped in ((early, "early stopping on dev"), (capped, "epoch limit")):
        logged = points + [{"attempt": 1, "t": 30.0, **e.as_dict()} for e in events]
        system.selected = lambda job, valid: (200, tmp_path / "x.ckpt")
        assert runner.summarise(job, attempts, logged)["stopped"] == stopped


def test_each_tool_selects_by_its_own_tie_rule(tmp_path):
    from benchmarks.peers.quality.systems import first_or_last_min

    valid = {100: 3.0, 200: 2.0, 300: 2.0, 400: 2.5}
    assert first_or_last_min(valid, JoeyNMT.tie) == 200  # strictly lower
    assert first_or_last_min(valid, Fairseq.tie) == 300  # lower or equal


def test_subword_pieces_take_subword_nmts_form():
    assert [at_form(p) for p in ["justific", "ation</w>", "</s>", "<unk>"]] == ["justific@@", "ation", "</s>", "<unk>"]


# ------------------------------------------------------------------------------- the runner, on a fake tool

FAKE_TOOL = r"""
import json, os, sys, time
work, updates, every, delay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
os.makedirs(work, exist_ok=True)
last = os.path.join(work, "last.json")
step = json.load(open(last))["step"] if os.path.exists(last) else 0
if step:
    print(f"RESUMED {step}", flush=True)
losses = {10: 5.0, 20: 4.0, 30: 4.5, 40: 4.2}
while step < updates:
    time.sleep(delay)
    step += 1
    if step % every == 0:
        print(f"VALID {step} {losses.get(step, 4.8)} {step / 2}", flush=True)
        with open(last + ".tmp", "w") as f:
            json.dump({"step": step}, f)
        os.replace(last + ".tmp", last)
print("END", step, flush=True)
"""

DECODE = r"""
import sys
src, out = sys.argv[1], sys.argv[2]
open(out, "w").write(open(src).read())
print("took 0.5 s")
"""


class FakeTool(System):
    """A tool that 'trains' by sleeping, validates every 10 updates, checkpoints at each validation, resumes from
    its checkpoint, and 'translates' by copying the reference (so its BLEU is 100)."""

    name, label, tool, tie = "fake", "fake tool", "fake", "first"

    def __init__(self, script: Path, decode: Path, delay: float = 0.02) -> None:
        self.script, self.decode_script, self.delay = script, decode, delay

    def version(self):
        return {"fake": "1.0"}

    def config(self, job):
        return {"updates": 40, "every": 10}

    def resume_point(self, job, attempts):
        last = job.work / "tool" / "last.json"
        return (json.loads(last.read_text())["step"], last) if last.is_file() else None

    def train_command(self, job, attempt, resume):
        return [sys.executable, str(self.script), str(job.work / "tool"), "40", "10", str(self.delay)]

    def parse(self, job, line):
        words = line.split()
        if words and words[0] == "VALID":
            return [Event("valid", int(words[1]), float(words[2]), float(words[3]))]
        if words and words[0] == "END":
            return [Event("end", int(words[1]))]
        if words and words[0] == "RESUMED":
            return [Event("resumed", int(words[1]))]
        return []

    def selected(self, job, valid):
        from benchmarks.peers.quality.systems import first_or_last_min

        return first_or_last_min(valid, self.tie), job.work / "tool" / "last.json"

    def test_command(self, job, checkpoint, split, out):
        out.mkdir(parents=True, exist_ok=True)
        return [sys.executable, str(self.decode_script), str(job.data / f"{split}.tok.de"), str(out / "hyp")]

    def test_output(self, out, split, log):
        lines = (out / "hyp").read_text().split("\n")[:-1]
        return {"tokenised": lines, "plain": lines}, 0.5


@pytest.fixture
def fake(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rng = random.Random(0)
    words = "ein Mann eine Frau ein Hund läuft über die Straße im Park .".split()
    for split in TESTS.values():
        lines = [" ".join(rng.choices(words, k=rng.randint(4, 9))) for _ in range(12)]
        for form in ("tok", "raw"):
            (data / f"{split}.{form}.de").write_text("".join(line + "\n" for line in lines))
    (tmp_path / "tool.py").write_text(FAKE_TOOL)
    (tmp_path / "decode.py").write_text(DECODE)
    system = FakeTool(tmp_path / "tool.py", tmp_path / "decode.py")
    job = Job(system, 1, SCALES["full"], data, tmp_path / "runs" / "fake.s1")
    return job, {"files": {"x": "0"}}, tmp_path / "results", Scorer(data)


def test_a_complete_run_leaves_a_record_with_the_series_and_the_selected_update(fake):
    job, manifest, results, scorer = fake
    record = runner.run_job(job, manifest, results, scorer, echo=lambda m: None)
    assert record["complete"] and record["training"]["selected_update"] == 20  # the lowest dev cost
    assert [p["update"] for p in record["series"]] == [10, 20, 30, 40]
    walls = [p["wall_s"] for p in record["series"]]
    assert walls == sorted(walls) and record["training"]["wall_to_selected_s"] == walls[1]
    cpus = [p["cpu_s"] for p in record["series"]]
    assert all(c is not None for c in cpus) and cpus == sorted(cpus)  # the child's CPU seconds, from /proc
    assert record["training"]["cpu_to_selected_s"] == cpus[1] <= record["training"]["cpu_total_s"]
    assert record["training"]["attempts"] == 1 and record["tests"]["test2016"]["bleu"]["score"] == 100.0
    assert record["machine"]["threads_per_job"] == 1 and "commit" in record["harness"]
    assert runner.run_job(job, manifest, results, scorer, echo=lambda m: None) == record  # complete: skipped


def test_speed_times_the_systems_with_a_complete_record_alone_and_says_when_there_is_none(fake):
    """``speed`` (the last step of ``run``, and a command of its own): each system with a complete record decodes
    test2016 with its own command, ``rounds`` times, and the median of the tool's own decoding time is the figure."""
    job, manifest, results, scorer = fake
    assert speed.measure([job], results, scorer, rounds=2, echo=lambda m: None) is None  # no record yet
    assert not (results / "speed.json").exists()
    runner.run_job(job, manifest, results, scorer, echo=lambda m: None)
    report = speed.measure([job], results, scorer, rounds=3, echo=lambda m: None)
    assert report == json.loads((results / "speed.json").read_text())
    timed = report["systems"]["fake"]
    assert timed["job"] == "fake.s1" and len(timed["runs"]) == 3 and timed["sentences"] == 12
    assert timed["decode_seconds_median"] == 0.5 and timed["sentences_per_s"] == 24.0  # the tool's own 0.5 s
    assert report["test"] == "test2016" and report["beam"] == 5 and "commit" in report["harness"]
    args = cli.parser().parse_args(["speed", "--speed-rounds", "3", "--systems", "fake"])
    assert (args.command, args.speed_rounds, args.systems, args.seeds) == ("speed", 3, ["fake"], [1, 2, 3])


def test_status_says_why_a_system_does_not_run_and_where_each_job_is(fake, monkeypatch, capsys):
    job, manifest, results, scorer = fake

    class Missing(FakeTool):
        name = "missing"

        def unavailable(self):
            return "not run: CPU lacks bf16 (AVX-512 BF16 or AMX)"

    runner.run_job(job, manifest, results, scorer, echo=lambda m: None)
    systems = [job.system, Missing(job.system.script, job.system.decode_script)]
    monkeypatch.setattr(cli, "all_systems", lambda: systems)
    work = job.work.parent.parent
    assert cli.main(["status", "--seeds", "1", "2", "--work", str(work), "--results", str(results)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "fake.s1: complete",
        "missing.s1: not run: CPU lacks bf16 (AVX-512 BF16 or AMX)",
        "fake.s2: not started",
        "missing.s2: not run: CPU lacks bf16 (AVX-512 BF16 or AMX)",
    ]


def _kill_after_first_validation(job: Job) -> None:
    events = job.work / "events.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if events.is_file() and '"valid"' in events.read_text():
            break
        time.sleep(0.05)
    for proc in list(runner.ACTIVE):
        os.killpg(proc.pid, signal.SIGKILL)


def test_a_killed_run_leaves_no_record_then_resumes_into_one_run(fake):
    job, manifest, results, scorer = fake
    job.system.delay = 0.05
    killer = threading.Thread(target=_kill_after_first_validation, args=(job,))
    killer.start()
    with pytest.raises(runner.JobFailed, match="exited with status"):
        runner.run_job(job, manifest, results, scorer, echo=lambda m: None)
    killer.join()
    assert not runner.record_path(results, job.id).exists()  # a killed run is never a record
    assert render.load(results) == {}
    assert "**The runs are pending**: no complete record yet." in render.render(results, echo=lambda m: None)
    # the next run resumes from the tool's checkpoint: one series, each update once, the two attempts' time
    record = runner.run_job(job, manifest, results, scorer, echo=lambda m: None)
    assert record["training"]["attempts"] == 2
    updates = [p["update"] for p in record["series"]]
    assert updates == sorted(set(updates)) == [10, 20, 30, 40]
    assert {p["attempt"] for p in record["series"]} == {1, 2}
    walls = [p["wall_s"] for p in record["series"]]
    assert walls == sorted(walls)
    assert record["training"]["wall_total_s"] >= walls[-1]
    cpus = [p["cpu_s"] for p in record["series"]]
    assert cpus == sorted(cpus) and record["training"]["cpu_total_s"] >= cpus[-1]


BUSY_TOOL = r"""
import time
end = time.process_time() + 0.6
while time.process_time() < end:  # CPU work with nothing printed, as a tool between two validations
    pass
time.sleep(0.3)
"""


def test_the_heartbeat_keeps_the_cpu_time_of_a_tool_that_prints_nothing(fake, monkeypatch, tmp_path):
    # a driver killed with its child never reaches wait4: the heartbeat's reading is all the attempt keeps
    job, _, _, _ = fake
    (tmp_path / "busy.py").write_text(BUSY_TOOL)
    monkeypatch.setattr(job.system, "train_command", lambda job, n, resume: [sys.executable, str(tmp_path / "busy.py")])
    monkeypatch.setattr(runner, "HEARTBEAT_S", 0.05)
    folder = runner.Folder(job)
    seen: list[float] = []
    real_save = folder.save_attempts

    def save(attempts):
        if attempts[-1].get("end") is None and attempts[-1].get("cpu_last") is not None:
            seen.append(attempts[-1]["cpu_last"])
        real_save(attempts)

    monkeypatch.setattr(folder, "save_attempts", save)
    with pytest.raises(runner.JobFailed, match="without saying it ended"):
        runner.train(job, folder, echo=lambda m: None)
    assert seen and max(seen) >= 0.4  # the busy second, read while the tool ran and printed nothing


def test_cpu_time_runs_on_across_attempts_and_is_unknown_where_one_was_not_measured():
    attempts = [
        {"n": 1, "start": 100.0, "end": 200.0, "resumed_from": None, "cpu_last": 40.0},  # killed: last value seen
        {"n": 2, "start": 1000.0, "end": 1100.0, "resumed_from": 20, "cpu_s": 90.0},
    ]
    events = [
        {"attempt": 1, "t": 150.0, "cpu": 30.0, "kind": "valid", "step": 20, "dev_loss": 4.0},
        {"attempt": 1, "t": 190.0, "cpu": 45.0, "kind": "valid", "step": 30, "dev_loss": 9.0},  # lost with the kill
        {"attempt": 2, "t": 1050.0, "cpu": 50.0, "kind": "valid", "step": 30, "dev_loss": 3.0},
    ]
    points = runner.series(attempts, events)
    # attempt 1 used 45 s (its last event's value is above the heartbeat's), so attempt 2's clock starts there
    assert [(p["update"], p["cpu_s"]) for p in points] == [(20, 30.0), (30, 95.0)]
    assert runner.cpu_total(attempts, events) == 135.0
    del attempts[0]["cpu_last"], events[0]["cpu"], events[1]["cpu"]
    assert [p["cpu_s"] for p in runner.series(attempts, events)] == [None, None]
    assert runner.cpu_total(attempts, events) is None


def test_systems_are_compared_by_cpu_time_where_every_run_measured_it():
    with_cpu = {"training": {"wall_to_selected_s": 100.0, "cpu_to_selected_s": 50.0}}
    without = {"training": {"wall_to_selected_s": 100.0}}
    assert render.clock({"sarnmt_fp32": [with_cpu], "joeynmt": [with_cpu]}) == "cpu"
    assert render.clock({"sarnmt_fp32": [with_cpu], "joeynmt": [without]}) == "wall"


def test_validations_after_the_resumed_checkpoint_are_the_later_attempts():
    attempts = [
        {"n": 1, "start": 100.0, "end": 200.0, "resumed_from": None},
        {"n": 2, "start": 1000.0, "end": 1100.0, "resumed_from": 20},
    ]
    events = [
        {"attempt": 1, "t": 150.0, "kind": "valid", "step": 20, "dev_loss": 4.0},
        {"attempt": 1, "t": 190.0, "kind": "valid", "step": 30, "dev_loss": 9.0},  # lost with the kill
        {"attempt": 2, "t": 1050.0, "kind": "valid", "step": 30, "dev_loss": 3.0},
    ]
    points = runner.series(attempts, events)
    assert [(p["update"], p["wall_s"], p["dev_loss"], p["attempt"]) for p in points] == [
        (20, 50.0, 4.0, 1),
        (30, 150.0, 3.0, 2),
    ]


def test_a_job_of_another_config_never_resumes_the_old_folder(fake):
    job, manifest, results, scorer = fake
    runner.run_job(job, manifest, results, scorer, echo=lambda m: None)
    job.system.config = lambda job: {"updates": 40, "every": 10, "changed": True}
    notes = []
    record = runner.run_job(job, manifest, results, scorer, echo=notes.append)
    assert record["training"]["attempts"] == 1 and record["config"]["changed"]
    assert any("moved" in n and "stale" in n for n in notes)
    assert list(job.work.parent.glob("fake.s1.stale-*"))


def test_half_written_or_incomplete_records_are_not_read(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    (records / "joeynmt.s1.json").write_text('{"complete": true, "system": "joeynmt", "se')
    (records / "joeynmt.s2.json").write_text(json.dumps({"complete": False, "system": "joeynmt", "seed": 2}))
    assert render.load(tmp_path) == {}


# ------------------------------------------------------------------ where the time goes, synthetic series


def _cpu_series(rate: float, last: int, resumes: tuple[int, ...] = ()) -> list[dict]:
    """A dev series every 100 updates to ``last`` at ``rate`` CPU s per update, killed and resumed after each update
    in ``resumes``: each resume costs a minute (start-up and re-done work) that lies only between two attempts."""
    series = []
    for u in range(100, last + 100, 100):
        lost = sum(1 for r in resumes if r < u)
        series.append({"update": u, "cpu_s": rate * u + 60.0 * lost, "attempt": 1 + lost})
    return series


def _timed(job: str, rate: float, selected: int, resumes: tuple[int, ...] = ()) -> dict:
    series = _cpu_series(rate, selected + 300, resumes)
    measured = next(p["cpu_s"] for p in series if p["update"] == selected)
    return {"job": job, "training": {"selected_update": selected, "cpu_to_selected_s": measured}, "series": series}


def test_cpu_per_update_is_the_median_within_one_attempt():
    series = [
        {"update": 100, "cpu_s": 10.0, "attempt": 1},
        {"update": 200, "cpu_s": 20.0, "attempt": 1},  # 0.1 s per update
        {"update": 300, "cpu_s": 40.0, "attempt": 1},  # 0.2
        {"update": 400, "cpu_s": 400.0, "attempt": 2},  # 3.6 across the resume: start-up and re-done work, not one
        {"update": 500, "cpu_s": 460.0, "attempt": 2},  # 0.6: the median of the three is 0.2, their mean 0.3
        {"update": 600, "cpu_s": None, "attempt": 2},  # no CPU time: no interval either side
        {"update": 700, "cpu_s": 999.0, "attempt": 2},
    ]
    assert breakdown.cpu_per_update(series) == pytest.approx(0.2)
    run = breakdown.run_time(
        {"job": "x.s1", "training": {"selected_update": 500, "cpu_to_selected_s": 460.0}, "series": series}
    )
    assert run.uninterrupted == pytest.approx(100.0) and run.redone == pytest.approx(3.6)


def test_a_run_with_one_validation_per_attempt_has_no_cpu_per_update():
    one_each = _timed("joeynmt.s2", 0.3, 1500, resumes=tuple(range(150, 1800, 100)))
    assert {p["attempt"] for p in one_each["series"]} == set(range(1, len(one_each["series"]) + 1))
    assert breakdown.cpu_per_update(one_each["series"]) is None
    system = breakdown.system_time([_timed("joeynmt.s1", 0.3, 1500), one_each])
    assert system.uninterrupted is None and system.per_update is None and system.without_rate == ["joeynmt.s2"]


def test_the_split_multiplies_back_to_the_time_ratio():
    sarnmt = breakdown.system_time(
        [_timed("s.s1", 0.40, 2700, (1000,)), _timed("s.s2", 0.50, 3000, (500, 2000)), _timed("s.s3", 0.45, 2400)]
    )
    joey = breakdown.system_time([_timed("j.s1", 0.25, 3600, (3000,)), _timed("j.s2", 0.20, 4100)])
    assert sarnmt.uninterrupted == pytest.approx((0.40 * 2700 + 0.50 * 3000 + 0.45 * 2400) / 3)
    assert sarnmt.redone == pytest.approx((60 + 120 + 0) / 3 / sarnmt.uninterrupted)  # a minute per resume
    f = breakdown.factors(sarnmt, joey)
    assert f.updates == pytest.approx(2700 / 3850)
    assert f.time == pytest.approx(sarnmt.uninterrupted / joey.uninterrupted)
    assert f.updates * f.per_update == pytest.approx(sarnmt.uninterrupted / joey.uninterrupted)


# ------------------------------------------------------------------------------------ the renderer, synthetic


def _synthetic(
    results: Path,
    system: str,
    seed: int,
    quality: float,
    minutes: float,
    sps: float,
    *,
    cpu_per_update: float | None = None,
    selected: int = 2700,
    resumes: tuple[int, ...] = (),
) -> None:
    rng = random.Random(hash((system, seed)) % 1000)
    words = "ein Mann eine Frau ein Hund läuft über die Straße im Park mit einem Ball".split()
    refs = [" ".join(rng.choices(words, k=8)) for _ in range(60)]
    hyps = [" ".join(w if rng.random() < quality else rng.choice(words) for w in r.split()) for r in refs]
    stats = {t: {m: sentence_statistics(hyps, refs, m) for m in ("bleu", "bleu_tok")} for t in TESTS}
    from sarnmt.evaluation.bleu import corpus_bleu

    score = corpus_bleu(hyps, refs).as_dict()
    record = {
        "complete": True,
        "job": f"{system}.s{seed}",
        "system": system,
        "seed": seed,
        "machine": {"cpu": "test CPU", "flags": {"avx512_bf16": False}},
        "training": {
            "updates": selected + 300,
            "selected_update": selected,
            "wall_to_selected_s": minutes * 60 * (1 + 0.02 * seed),
            "wall_total_s": minutes * 70,
            "peak_rss_mib": 900.0,
        },
        "series": [
            {"update": u, "wall_s": u * minutes * 60 / selected, "dev_loss": 40 - u / 100, "dev_bleu": 10 + u / 100}
            for u in range(100, selected + 400, 100)
        ],
        "tests": {t: {"bleu": score, "bleu_tok": score, "sentences_per_s": sps} for t in TESTS},
    }
    if cpu_per_update is not None:
        timed = _timed(record["job"], cpu_per_update, selected, resumes)
        for point, cpu in zip(record["series"], timed["series"], strict=True):
            point |= {"cpu_s": cpu["cpu_s"], "attempt": cpu["attempt"]}
        record["training"]["cpu_to_selected_s"] = timed["training"]["cpu_to_selected_s"]
    (results / "records").mkdir(parents=True, exist_ok=True)
    (results / "records" / f"{system}.s{seed}.json").write_text(json.dumps(record))
    with gzip.open(results / "records" / f"{system}.s{seed}.sentences.json.gz", "wt") as handle:
        json.dump(stats, handle)


def test_the_renderer_gives_the_table_tests_figure_and_not_run_rows(tmp_path):
    results = tmp_path / "results"
    for seed in (1, 2, 3):
        _synthetic(results, "sarnmt_fp32", seed, 0.8, 60, 100)
        _synthetic(results, "joeynmt", seed, 0.6, 150, 50)
    (results / "systems.json").write_text(
        json.dumps(
            {
                "systems": {
                    "sarnmt_bf16": {"status": "not run: CPU lacks bf16 (AVX-512 BF16 or AMX)"},
                    "fairseq": {"status": "not run: fairseq 0.12.2 not installed in /x (missing; ...)"},
                    "joeynmt": {"status": "run"},
                }
            }
        )
    )
    (results / "speed.json").write_text(
        json.dumps({"systems": {"sarnmt_fp32": {"sentences_per_s": 100.0}, "joeynmt": {"sentences_per_s": 50.0}}})
    )
    text = render.render(results, echo=lambda m: None)
    main = text.split("## The seed-aware test")[0]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in main.splitlines() if line.startswith("| ")}
    assert "not run: CPU lacks bf16" in rows["sarnmt baseline (bf16)"]
    assert "not run: fairseq 0.12.2 not installed" in rows["fairseq 0.12.2 (LSTM)"]
    joey = rows["JoeyNMT 2.3.0 (GRU)"].split(" | ")
    assert joey[1] == "3" and " ± " in joey[2]  # three seeds: mean ± sd
    assert joey[10] == "2.50" and joey[-1].rstrip(" |") == "2.00"  # Joey's time ÷ sarnmt's, sent/s sarnmt ÷ Joey
    assert "peer not better" in text and "BLEU: **met**" in text and "2.50× as fast" in text
    assert "(measured wall time" in text  # the synthetic records have no CPU time: the wall clock compares them
    assert (results / render.FIGURE).stat().st_size > 10_000
    assert "Against the wall time as it was measured (a run lacks its CPU time" in text  # one panel: wall


def _timed_results(tmp_path: Path) -> Path:
    """sarnmt: 2,700 updates at 0.4 CPU s each; JoeyNMT: 3,600 at 0.25; each run resumed once before its selected
    update (a minute re-done)."""
    results = tmp_path / "results"
    for seed in (1, 2, 3):
        _synthetic(results, "sarnmt_fp32", seed, 0.8, 60, 100, cpu_per_update=0.4, resumes=(1500,))
        _synthetic(results, "joeynmt", seed, 0.6, 150, 50, cpu_per_update=0.25, selected=3600, resumes=(1000,))
    return results


def test_where_the_time_goes_and_the_time_goal_by_the_uninterrupted_clock(tmp_path):
    text = render.render(_timed_results(tmp_path), echo=lambda m: None)
    section = text.split("## Where the time goes")[1]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in section.splitlines() if line.startswith("| ")}
    # 2,700 updates at 0.4 s = 18 min; measured: a minute more (one resume): +6%
    assert rows["sarnmt baseline (fp32)"] == "| sarnmt baseline (fp32) | 2,700 | 0.400 | 18.0 min | 19.0 min | +6% |"
    assert rows["JoeyNMT 2.3.0 (GRU)"] == "| JoeyNMT 2.3.0 (GRU) | 3,600 | 0.250 | 15.0 min | 16.0 min | +7% |"
    assert "is 1.20× JoeyNMT 2.3.0 (GRU)'s = 0.75× the updates (2,700 v 3,600) × 1.60× the CPU per update" in section
    goal = next(line for line in text.splitlines() if line.startswith("- Time to the selected checkpoint"))
    assert goal.startswith("- Time to the selected checkpoint (uninterrupted CPU time, which every run has")
    assert "sarnmt fp32 18.0 min" in goal and "(JoeyNMT 2.3.0 (GRU)) 15.0 min" in goal and "0.83× as fast" in goal
    assert "**not met**, by a factor of 2.40: sarnmt takes 1.20× JoeyNMT 2.3.0 (GRU)'s time = 0.75× its updates" in goal
    assert "Left: against the CPU time of the training process, the table's clock. Right: against the wall" in text


def test_without_two_validations_in_one_attempt_the_goal_keeps_the_measured_clock(tmp_path):
    results = _timed_results(tmp_path)
    _synthetic(
        results, "joeynmt", 2, 0.6, 150, 50, cpu_per_update=0.25, selected=3600, resumes=tuple(range(150, 4000, 100))
    )
    text = render.render(results, echo=lambda m: None)
    section = text.split("## Where the time goes")[1]
    assert "| JoeyNMT 2.3.0 (GRU) | 3,600 | – | – |" in section
    assert "No two validations in one attempt (so no CPU per update): joeynmt.s2." in section
    assert (
        "- JoeyNMT 2.3.0 (GRU): not split: a run of it or of sarnmt baseline (fp32) has no CPU per update." in section
    )
    goal = next(line for line in text.splitlines() if line.startswith("- Time to the selected checkpoint"))
    assert goal.startswith("- Time to the selected checkpoint (measured CPU time, summed over the attempts")
    assert "no uninterrupted time for joeynmt.s2" in goal


def test_a_planned_system_without_a_record_is_under_way_not_not_run(tmp_path):
    results = tmp_path / "results"
    _synthetic(results, "sarnmt_fp32", 1, 0.8, 60, 100)
    (results / "systems.json").write_text(json.dumps({"systems": {"joeynmt": {"status": "run"}}}))
    rows = {
        line.split(" | ")[0].lstrip("| "): line
        for line in render.render(results, echo=lambda m: None).splitlines()
        if line.startswith("| ")
    }
    assert "| – | no record yet: its runs have not finished |" in rows["JoeyNMT 2.3.0 (GRU)"]
    assert "| – | not run: no records |" in rows["fairseq 0.12.2 (LSTM)"]  # never planned here


def test_with_no_records_the_page_says_pending(tmp_path):
    text = render.render(tmp_path, echo=lambda m: None)
    assert "**The runs are pending**" in text and not (tmp_path / render.FIGURE).exists()


# -------------------------------------------------------------------------------------------- slow: real text


def test_the_exported_text_is_sarnmts_mini_text(tmp_path):
    """Slow (prepares Multi30K if its cache is missing): every exported line merges back to sarnmt's own text."""
    data = ROOT.parent / "shared" / "data" / "multi30k-en-de"
    if not data.is_dir():
        pytest.skip(f"Multi30K is not in {data}")
    manifest = export(tmp_path / "text")
    assert manifest["lines"] == {"train": 29000, "val": 1014, "test": 1000, "test_2017": 1000, "test_2018": 1071}
    scorer = Scorer(tmp_path / "text")
    bpe = (tmp_path / "text" / "test.bpe.de").read_text().split("\n")[:-1]
    plain, tokenised = scorer.postprocess(bpe)
    raw, tok = scorer.references("test")
    assert tokenised == tok
    assert scorer.score("test", plain, tokenised)[0]["bleu_tok"]["score"] == 100.0
    assert sum(p == r for p, r in zip(plain, raw, strict=True)) > 0.9 * len(raw)  # detokenising the references


def _profile_column(update_ms: float, matmul_ms: float, mflop: float) -> dict:
    share = matmul_ms / (update_ms * 1.03)
    return {
        "update_ms": update_ms,
        "kinds_ms": {"matrix products": matmul_ms},
        "kinds_share": {"matrix products": share},
        "matmul_gflop_s": 65.0,
        "mflop_per_target_token": mflop,
    }


def test_the_page_says_what_one_profiled_update_leaves_for_the_speed_goal(tmp_path):
    assert "One update, profiled" not in render.render(tmp_path, echo=lambda m: None)  # no profile: no section
    profile = {
        "machine": {"cpu": "a CPU", "flags": {"avx2": True, "avx512_bf16": False}},
        "load": {"before": "0.10 0.20 0.30"},
        "batch": {"sentences": 273, "tgt_tokens": 3875},
        "systems": {
            "sarnmt_fp32": _profile_column(1575.0, 1099.0, 18.8),
            "joeynmt": _profile_column(1933.0, 1328.0, 21.5),
            "fairseq": _profile_column(1698.0, 1012.0, 17.3),
        },
    }
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "profile.json").write_text(json.dumps(profile))
    page = render.render(tmp_path, echo=lambda m: None)
    section = page[page.index("## One update, profiled") :]
    assert "sarnmt baseline (fp32): 1,575 CPU ms per update; matrix products 1,099 ms" in section
    assert "1.08× as fast as the fastest peer (fairseq" in section  # 1698 / 1575, JoeyNMT is slower
    assert "would take 849 ms" in section and "cannot come from the update's speed alone" in section
    # a sarnmt whose matrix products fit inside half the fastest peer's update: the goal is in reach of its speed
    profile["systems"]["sarnmt_fp32"] = _profile_column(800.0, 600.0, 9.0)
    (tmp_path / "profile" / "profile.json").write_text(json.dumps(profile))
    assert "within reach of the update's speed" in render.render(tmp_path, echo=lambda m: None)
    # a peer that did not run is left out of the comparison, never counted as the fastest
    profile["systems"]["fairseq"] = {"not_run": "fairseq is not installed"}
    (tmp_path / "profile" / "profile.json").write_text(json.dumps(profile))
    assert "fastest peer (JoeyNMT" in render.render(tmp_path, echo=lambda m: None)
