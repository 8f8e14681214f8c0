"""Human evaluation (Table 5) without a browser: task creation and its checks, the store's refusals and
replacements, the JSON API, kappa against hand-computed values, the export's percentages, the commands as a user
runs them (one-line errors, ``--host``, a killed server)."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from sarnmt.cli import HOST_PORT, flags_to_overrides
from sarnmt.human import store
from sarnmt.human.agreement import agreement, cohen_kappa, fleiss_kappa
from sarnmt.human.app import RankingServer, ServeError
from sarnmt.human.errors import StoreError
from sarnmt.human.export import export
from sarnmt.human.task import TaskError, TaskSpec, create_task, shown_orders
from tests.conftest import ROOT
from tests.human_helpers import SYSTEMS, make_task, running, slot_ranks, write_inputs
from tests.human_helpers import shown_orders as db_orders


def _human(args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "sarnmt.human", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


# -- create ----------------------------------------------------------------------------------------------------


def test_create_samples_non_empty_lines_and_balances_the_hidden_orders(tmp_path):
    paths = write_inputs(tmp_path)
    source = paths["source"].read_text().splitlines()
    source[2] = "   "  # an empty source line is never drawn
    paths["source"].write_text("\n".join(source) + "\n")
    spec = TaskSpec("en_de", str(paths["source"]), tuple((n, str(paths[n])) for n in SYSTEMS), sample=5, seed=3)
    created = create_task(tmp_path / "h.sqlite", spec)
    assert created.items == 5 and created.systems == SYSTEMS
    with sqlite3.connect(tmp_path / "h.sqlite") as conn:
        lines = [r[0] for r in conn.execute("SELECT line FROM item ORDER BY position")]
        texts = conn.execute("SELECT COUNT(*) FROM output").fetchone()[0]
    assert 3 not in lines and len(set(lines)) == 5 and texts == 15
    again = create_task(tmp_path / "again.sqlite", spec)  # the same seed gives the same sample and orders
    assert again.items == 5 and db_orders(tmp_path / "again.sqlite") == db_orders(tmp_path / "h.sqlite")
    # every permutation of 3 systems equally often: each system in each slot equally often
    import random

    orders = shown_orders(12, 3, random.Random(0))
    assert sorted(Counter(tuple(o) for o in orders).values()) == [2] * 6
    assert all(Counter(o[slot] for o in orders) == Counter({0: 4, 1: 4, 2: 4}) for slot in range(3))


def test_line_counts_that_differ_name_the_file_and_both_counts_and_create_nothing(tmp_path):
    paths = write_inputs(tmp_path)
    paths["mean_residual"].write_text("nur eine Zeile\n")
    spec = TaskSpec("en_de", str(paths["source"]), tuple((n, str(paths[n])) for n in SYSTEMS), sample=3)
    with pytest.raises(TaskError) as err:
        create_task(tmp_path / "h.sqlite", spec)
    assert str(err.value) == (
        f"line counts differ: source {paths['source']} has 6 lines; system mean_residual ({paths['mean_residual']}) "
        "has 1 lines"
    )
    assert not (tmp_path / "h.sqlite").exists()
    make_task(tmp_path / "kept.sqlite", tmp_path / "ok")  # an existing database is left as it was
    before = (tmp_path / "kept.sqlite").read_bytes()
    with pytest.raises(TaskError, match="system mean_residual"):
        create_task(tmp_path / "kept.sqlite", spec.__class__(**{**spec.__dict__, "name": "es_en"}))
    assert _count(tmp_path / "kept.sqlite", "task") == 1 and (tmp_path / "kept.sqlite").read_bytes() == before


def test_a_file_that_is_not_utf8_is_a_task_error_naming_its_line(tmp_path):
    paths = write_inputs(tmp_path)
    paths["mean_residual"].write_bytes(b"eins\nzw\xffei\n")
    spec = TaskSpec("en_de", str(paths["source"]), tuple((n, str(paths[n])) for n in SYSTEMS), sample=3)
    with pytest.raises(TaskError, match=f"system mean_residual: {paths['mean_residual']}:2: invalid UTF-8"):
        create_task(tmp_path / "h.sqlite", spec)
    assert not (tmp_path / "h.sqlite").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"systems": (("a", "x"),)}, "a ranking needs at least two systems"),
        ({"systems": (("a", "S"), ("a", "S"))}, "system names repeat: ['a']"),
        ({"annotators": ("ana", "ana")}, "annotator names repeat: ['ana']"),
        ({"sample": 0}, "sample must be a positive number"),
        ({"sample": 7}, "sample=7 but source"),
        ({"name": "en de"}, "pair must be a name"),
        ({"reference": "missing.de"}, "reference: no such file: missing.de"),
    ],
)
def test_bad_task_specs_are_refused_with_the_key_named(tmp_path, change, message):
    paths = write_inputs(tmp_path)
    systems = tuple((n, str(paths[n])) for n in SYSTEMS)
    fields = {"name": "en_de", "source": str(paths["source"]), "systems": systems, "sample": 3, **change}
    if fields["systems"][0][1] == "S":
        fields["systems"] = tuple((n, str(paths["baseline"])) for n, _ in fields["systems"])
    with pytest.raises(TaskError, match=message.replace("[", r"\[").replace("]", r"\]")):
        create_task(tmp_path / "h.sqlite", TaskSpec(**fields))


def test_create_command_errors_are_one_line_and_a_task_is_never_replaced(tmp_path):
    write_inputs(tmp_path)
    (tmp_path / "short.de").write_text("eins\nzwei\n")
    hyps = "hyps=[out.0.de,short.de]"
    out = _human(["create", "pair=en_de", "source=test.en", hyps, "names=[baseline,mean_residual]"], tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == (
        "error: line counts differ: source test.en has 6 lines; system mean_residual (short.de) has 2 lines"
    )
    assert not (tmp_path / "human.sqlite").exists()
    args = [
        "create",
        "pair=en_de",
        "source=test.en",
        "ref=test.de",
        "hyps=[out.0.de,out.1.de]",
        "sample=4",
        "annotators=[ana]",
    ]
    out = _human(args, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "task en_de: 4 sentences of test.en, systems 0, 1" in out.stdout and "#token=" in out.stdout
    out = _human(args, tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: task 'en_de' already exists in human.sqlite; choose another pair= or db="
    )
    out = _human(["annotators", "add=[ben]"], tmp_path)
    assert out.returncode == 0 and "ana\t" in out.stdout and "ben\t" in out.stdout
    out = _human(["export", "db=nothing.sqlite"], tmp_path)
    assert out.returncode == 2 and out.stderr.startswith("error: no such database: nothing.sqlite")
    assert not (tmp_path / "nothing.sqlite").exists()
    out = _human(["create", "source=test.en", "seed=x"], tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: missing pair=, hyps= (python -m sarnmt.human create --help lists the keys)"
    )
    out = _human(["create", "nokey=1"], tmp_path)  # Hydra's own errors name the command as it was run, too
    assert out.returncode == 2 and out.stderr.strip().endswith(
        "(python -m sarnmt.human create --help lists the groups and settings)"
    )
    out = _human(["serve", "port=99999"], tmp_path)
    assert out.returncode == 2 and out.stderr.strip().startswith("error: cannot listen on 127.0.0.1:99999")
    out = _human(["serve", "--help"], tmp_path)
    assert out.returncode == 0 and "--host HOST" in out.stdout and "host: 127.0.0.1" in out.stdout
    assert _human([], tmp_path).returncode == 2 and "create" in _human(["--help"], tmp_path).stdout


# -- the store -------------------------------------------------------------------------------------------------


def test_refused_judgements_store_nothing(tmp_path):
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path)
    make_task(db, tmp_path / "other", pair="es_en", annotators=("eva",))
    conn = store.connect(db)
    own = conn.execute("SELECT i.id FROM item i JOIN task t ON t.id = i.task_id WHERE t.name = 'en_de'").fetchone()[0]
    other = conn.execute("SELECT i.id FROM item i JOIN task t ON t.id = i.task_id WHERE t.name = 'es_en'").fetchone()
    refused = [
        ("nobody", own, "ranked", [1, 2, 3], "unknown annotator"),
        (tokens["ana"], 9999, "ranked", [1, 2, 3], "unknown item 9999 for task en_de"),
        (tokens["ana"], other[0], "ranked", [1, 2, 3], f"unknown item {other[0]} for task en_de"),
        (tokens["ana"], own, "ranked", [1, None, 2], "incomplete ranking: output B has no rank"),
        (tokens["ana"], own, "ranked", [1, 2], "incomplete ranking: expected a rank for each of the 3 outputs"),
        (tokens["ana"], own, "ranked", [1, 2, 4], "ranks must be integers from 1 \\(best\\) to 3"),
        (tokens["ana"], own, "ranked", None, "incomplete ranking"),
        (tokens["ana"], own, "skipped", [1, 1, 1], "a skipped judgement carries no ranks"),
        (tokens["ana"], own, "great", None, "status must be one of ranked, skipped, broken"),
        (tokens["ana"], "1", "skipped", None, "item must be an item id"),
    ]
    for token, item, status, ranks, message in refused:
        with pytest.raises(StoreError, match=message):
            store.record_judgement(conn, token, item, status, ranks)
    with pytest.raises(StoreError, match="has no time zone"):
        store.record_judgement(conn, tokens["ana"], own, "skipped", shown_at="2026-01-01T10:00:00")
    assert _count(db, "judgement") == 0
    conn.close()


def test_a_second_submit_replaces_the_first(tmp_path):
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path)
    conn = store.connect(db)
    item = conn.execute("SELECT id FROM item WHERE position = 1").fetchone()[0]
    store.record_judgement(conn, tokens["ana"], item, "ranked", [1, 2, 3], shown_at=store.now())
    store.record_judgement(conn, tokens["ana"], item, "ranked", [3, 3, 1], comment="second thoughts")
    store.record_judgement(conn, tokens["ben"], item, "broken")
    rows = conn.execute(
        "SELECT a.name, status, ranks, comment, submissions, seconds FROM judgement "
        "JOIN annotator a ON a.id = annotator_id ORDER BY a.name"
    ).fetchall()
    assert [tuple(r) for r in rows] == [
        ("ana", "ranked", "[3, 3, 1]", "second thoughts", 2, None),
        ("ben", "broken", None, "", 1, None),
    ]
    annotator = store.annotator_by_token(conn, tokens["ana"])
    assert store.progress(conn, annotator) == {"total": 6, "ranked": 1, "skipped": 0, "broken": 0, "done": 1}
    assert store.next_position(conn, annotator) == 2
    conn.close()


# -- agreement and export --------------------------------------------------------------------------------------


def test_kappa_equals_the_hand_computed_values():
    # Cohen: 6 of 8 agree, P_o = .75; first: > 3, = 4, < 1; second: > 2, = 4, < 2; P_e = (6 + 16 + 2) / 64 = .375;
    # kappa = (.75 - .375) / .625 = 0.6
    first = [">", ">", "=", "=", "<", "=", ">", "="]
    second = [">", "=", "=", "=", "<", "<", ">", "="]
    assert cohen_kappa(first, second) == pytest.approx(0.6)
    # Fleiss, 3 annotators, 4 units: P_i = 1, 1/3, 1, 0 (mean 7/12); pooled > 6/12, = 5/12, < 1/12, P_e = 62/144;
    # kappa = (7/12 - 31/72) / (1 - 31/72) = 11/41
    units = [(">", ">", ">"), (">", ">", "="), ("=", "=", "="), ("<", "=", ">")]
    assert fleiss_kappa(units) == pytest.approx(11 / 41)
    assert cohen_kappa(["="] * 4, ["="] * 4) is None  # P_e = 1: undefined
    # the same units through agreement(): 3 annotators → Fleiss, over the items all three ranked
    ranks = {name: {} for name in "abc"}
    for item, labels in enumerate(units):
        for name, label in zip("abc", labels, strict=True):
            ranks[name][item] = {"x": 1, "y": {">": 2, "=": 1, "<": 0}[label]}
    ranks["c"][99] = {"x": 1, "y": 1}  # an item only one annotator ranked is left out
    result = agreement(ranks, [("x", "y")])
    assert (result.method, result.items, result.comparisons) == ("Fleiss' kappa", 4, 4)
    assert result.kappa == pytest.approx(11 / 41)


def _judge(db: Path, tokens: dict[str, str], plan: dict[str, dict[int, object]], pair: str = "en_zh") -> None:
    """plan: annotator → position → {system: rank} or "skipped" / "broken"."""
    orders = db_orders(db, pair)
    conn = store.connect(db)
    for annotator, items in plan.items():
        for position, what in items.items():
            item = conn.execute(
                "SELECT i.id FROM item i JOIN task t ON t.id = i.task_id WHERE t.name = ? AND i.position = ?",
                (pair, position),
            ).fetchone()[0]
            if isinstance(what, str):
                store.record_judgement(conn, tokens[annotator], item, what)
            else:
                store.record_judgement(conn, tokens[annotator], item, "ranked", slot_ranks(orders[item], what))
    conn.close()


def test_export_gives_table5_percentages_with_skips_flags_and_cohens_kappa(tmp_path):
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path, pair="en_zh", sample=4)
    b, m, s = SYSTEMS
    _judge(
        db,
        tokens,
        {
            "ana": {1: {b: 2, m: 1, s: 1}, 2: {b: 1, m: 1, s: 1}, 3: "skipped", 4: {b: 3, m: 2, s: 1}},
            "ben": {1: {b: 2, m: 2, s: 1}, 2: "broken", 3: {b: 1, m: 2, s: 2}, 4: {b: 2, m: 2, s: 1}},
        },
    )
    files = export(db, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(files)
    rows = {(r["first"], r["second"]): r for r in csv.DictReader(io.StringIO(files["table5.csv"]))}
    # six ranked judgements (ana: 1, 2, 4; ben: 1, 3, 4); mean vs baseline: > ana1 ana4, = ana2 ben1 ben4, < ben3
    expected = {(m, b): (2, 3, 1), (s, b): (4, 1, 1), (s, m): (3, 3, 0)}
    assert list(rows) == list(expected)
    for key, counts in expected.items():
        got = rows[key]
        assert (int(got["higher"]), int(got["equal"]), int(got["lower"]), int(got["n"])) == (*counts, 6)
        assert float(got["pct_higher"]) == pytest.approx(100 * counts[0] / 6, abs=1e-4)
    assert (rows[m, b]["paper_higher"], rows[m, b]["paper_equal"], rows[m, b]["paper_lower"]) == ("26", "56", "18")
    md = files["table5.md"]
    assert "| Mean vs. Baseline | 33.3 | 50.0 | 16.7 | 6 | 26 / 56 / 18 |" in md
    assert "| Self-attentive vs. Mean | 50.0 | 50.0 | 0.0 | 6 | 24 / 62 / 14 |" in md
    assert "6 ranked, 1 skipped, 1 flagged as broken" in md
    # agreement over items 1 and 4 (both ranked): labels ana > > = > > >, ben = > > = > >: P_o = 1/2,
    # P_e = (5·4 + 1·2) / 36 = 22/36, kappa = (18/36 - 22/36) / (14/36) = -2/7
    kappa = next(csv.DictReader(io.StringIO(files["agreement.csv"])))
    assert kappa["method"] == "Cohen's kappa" and float(kappa["kappa"]) == pytest.approx(-2 / 7, abs=1e-6)
    assert (kappa["items"], kappa["comparisons"], kappa["skipped"], kappa["flagged"]) == ("2", "6", "1", "1")
    raw = list(csv.DictReader(io.StringIO(files["judgements.csv"])))
    assert len(raw) == 8 and {r["status"] for r in raw} == {"ranked", "skipped", "broken"}
    first = next(r for r in raw if r["annotator"] == "ana" and r["position"] == "1")
    assert sorted(first["shown_order"].split()) == sorted(SYSTEMS)
    assert dict(p.split("=") for p in first["ranks_by_system"].split()) == {b: "2", m: "1", s: "1"}
    tex = files["table5.tex"]
    assert r"En-Zh $>$" in tex and "Mean vs. Baseline & 33.3 & 50.0 & 16.7 & 6 & 26/56/18" in tex


# -- the JSON API ----------------------------------------------------------------------------------------------


def _call(server, path: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(server.url.rstrip("/") + path, method="GET" if body is None else "POST")
    if token:
        request.add_header("X-Annotator-Token", token)
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(request, data=data, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_api_refuses_bad_requests_and_signs_in_only_by_token(tmp_path):
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path)
    with running(db) as server:
        assert _call(server, "/api/next") == (401, {"error": "sign in first"})
        assert _call(server, "/api/signin", {"who": "ana"})[0] == 401  # token mode: a name is not enough
        status, signed = _call(server, "/api/signin", {"who": tokens["ana"]})
        assert status == 200 and signed == {"token": tokens["ana"], "annotator": "ana", "task": "en_de"}
        status, view = _call(server, "/api/next", token=tokens["ana"])
        assert status == 200 and view["position"] == 1 and len(view["outputs"]) == 3
        item = view["item"]
        for body, message in [
            ({"item": item, "status": "ranked", "ranks": [1, 2]}, "incomplete ranking"),
            ({"item": 12345, "status": "skipped"}, "unknown item 12345"),
            ({"item": item, "status": "skipped", "system": "x"}, "unknown fields ['system']"),
        ]:
            status, answer = _call(server, "/api/judgement", body, tokens["ana"])
            assert status == 400 and message in answer["error"]
        assert _call(server, "/api/judgement", {"item": item, "status": "skipped"}, "stolen")[0] == 401
        assert _count(db, "judgement") == 0
        status, saved = _call(server, "/api/judgement", {"item": item, "status": "skipped"}, tokens["ana"])
        assert status == 200 and saved["next"]["position"] == 2 and saved["next"]["progress"]["skipped"] == 1
        assert _call(server, "/api/item?position=99", token=tokens["ana"])[0] == 400
        assert _call(server, "/nothing")[0] == 404
    with pytest.raises(ServeError, match="signin=name is no longer offered"):  # it handed out tokens for names
        RankingServer(db, signin="name")


# -- the command as a user runs it -----------------------------------------------------------------------------


def test_host_flag_and_every_acknowledged_judgement_survives_a_killed_server(tmp_path):
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path)
    assert flags_to_overrides(["--host", "0.0.0.0", "--port=9", "db=x"], dict(HOST_PORT)) == [
        "host=0.0.0.0",
        "port=9",
        "db=x",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "sarnmt.human", "serve", f"db={db}", "--host", "127.0.0.2", "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert " at http://127.0.0.2:" in line, line + process.stderr.read()
        url = line.split(" at ")[1].split()[0]
        server = type("Server", (), {"url": url})
        orders = db_orders(db)
        for token in tokens.values():
            for _ in range(6):
                status, view = _call(server, "/api/next", token=token)
                ranks = slot_ranks(
                    orders[view["item"]], {"baseline": 3, "mean_residual": 2, "self_attentive_content": 1}
                )
                status, _ = _call(
                    server, "/api/judgement", {"item": view["item"], "status": "ranked", "ranks": ranks}, token
                )
                assert status == 200
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    assert _count(db, "judgement") == 12
    rows = export(db, None)["table5.csv"]
    assert "en_de,self_attentive_content,baseline,12,0,0,12" in rows
