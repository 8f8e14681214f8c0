"""The ranking page (``python -m sarnmt.human``) against hostile clients and careless commands: every request
below is answered (400, 401 or 413, as JSON) with one log line on the server's stderr and no traceback; idle
connections are closed and the threads stay a fixed few; the hidden orders come from a secret seed; no token is
handed out for a name; ``shown_at`` is the server's; the CSV exports never hold a formula; ``create db=<a folder>``
is one error line."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from sarnmt.human import store
from sarnmt.human.app import RankingServer, ServeError
from sarnmt.human.export import export
from sarnmt.human.task import TaskError, TaskSpec, create_task, sample_lines, shown_orders
from tests.conftest import ROOT
from tests.human_helpers import SYSTEMS, make_task, running, slot_ranks, write_inputs
from tests.human_helpers import shown_orders as db_orders

pytestmark = pytest.mark.faults


def _human(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "sarnmt.human", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def _exchange(address: tuple[str, int], data: bytes, timeout: float = 10) -> bytes:
    """Send raw bytes, read until the server closes or answers ``Connection: close``."""
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def _request(method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body is not None and not any(
        k.lower().strip() in ("content-length", "transfer-encoding") for k in headers or {}
    ):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def _answer(sock: socket.socket) -> bytes:
    """One answer on a kept-alive connection: its head and its Content-Length of body."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")).split(b":")[1])
    while len(body) < length:
        body += sock.recv(65536)
    return answer


def _status_and_json(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


# -- one server, as the command runs it, for every hostile request ------------------------------------------------


@contextmanager
def _serving(db: Path, cwd: Path, stderr: Path | None = None) -> Iterator[tuple[subprocess.Popen, tuple[str, int]]]:
    """``python -m sarnmt.human serve db=...`` on a free port: the process and its address."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    err = stderr.open("w", encoding="utf-8") if stderr else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "sarnmt.human", "serve", f"db={db}", "--port", "0"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert " at http://127.0.0.1:" in line, line + (stderr.read_text(encoding="utf-8") if stderr else "")
        yield process, ("127.0.0.1", int(line.split(" at http://127.0.0.1:")[1].split("/")[0]))
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()
        if stderr:
            err.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``python -m sarnmt.human serve`` on a task made with seed 1234 (as every task was before seeds were
    secret), its stderr in a file."""
    folder = tmp_path_factory.mktemp("served")
    db = folder / "h.sqlite"
    tokens = make_task(db, folder, seed=1234)
    with _serving(db, folder, folder / "stderr.txt") as (_, address):
        yield {"address": address, "tokens": tokens, "stderr": folder / "stderr.txt", "db": db}


HOSTILE = {
    "position of 30 nines": ("GET", "/api/item?position=" + "9" * 30, None, {}, 400),
    "position of 5,000 digits": ("GET", "/api/item?position=" + "7" * 5000, None, {}, 400),
    "position superscript two": ("GET", "/api/item?position=%C2%B2", None, {}, 400),
    "position Arabic-Indic one": ("GET", "/api/item?position=%D9%A1", None, {}, 400),
    "position negative": ("GET", "/api/item?position=-1", None, {}, 400),
    "position zero": ("GET", "/api/item?position=0", None, {}, 400),
    "position empty": ("GET", "/api/item?position=", None, {}, 400),
    "position twice": ("GET", "/api/item?position=1&position=2", None, {}, 400),
    "position not UTF-8": ("GET", "/api/item?position=%FF", None, {}, 400),
    "unknown parameter": ("GET", "/api/next?debug=1", None, {}, 400),
    "item 2**70": ("POST", "/api/judgement", json.dumps({"item": 2**70, "status": "skipped"}).encode(), {}, 400),
    "item 2**63": ("POST", "/api/judgement", json.dumps({"item": 2**63, "status": "skipped"}).encode(), {}, 400),
    "item of 5,000 digits": ("POST", "/api/judgement", b'{"item": ' + b"9" * 5000 + b"}", {}, 400),
    "item a string": ("POST", "/api/judgement", b'{"item": "1", "status": "skipped"}', {}, 400),
    "item true": ("POST", "/api/judgement", b'{"item": true, "status": "skipped"}', {}, 400),
    "rank NaN": ("POST", "/api/judgement", b'{"item": 1, "status": "ranked", "ranks": [NaN, 1, 1]}', {}, 400),
    "client shown_at from 2020": (
        "POST",
        "/api/judgement",
        b'{"item": 1, "status": "skipped", "shown_at": "2020-01-01T00:00:00+00:00"}',
        {},
        400,
    ),
    "comment with a lone surrogate": (
        "POST",
        "/api/judgement",
        b'{"item": 1, "status": "skipped", "comment": "\\ud800"}',
        {},
        400,
    ),
    "60,000 [ to signin, no token": ("POST", "/api/signin", b"[" * 60_000, {"X-Annotator-Token": ""}, 400),
    "nested objects to judgement": ("POST", "/api/judgement", b'{"a":' * 5_000 + b"1" + b"}" * 5_000, {}, 400),
    "body over 64 KiB": ("POST", "/api/judgement", b'{"comment": "' + b"x" * 70_000 + b'"}', {}, 413),
    "body not UTF-8": ("POST", "/api/signin", b'{"who": "\xff\xfe"}', {}, 400),
    "body not JSON": ("POST", "/api/signin", b"who=ana", {}, 400),
    "body a JSON list": ("POST", "/api/signin", b'["ana"]', {}, 400),
    "Content-Length not a number": ("POST", "/api/signin", b"{}", {"Content-Length": "2x"}, 400),
    "Content-Length negative": ("POST", "/api/signin", b"{}", {"Content-Length": "-2"}, 400),
    "Content-Length superscript": ("POST", "/api/signin", b"{}", {"Content-Length": "\xb2"}, 400),
    "Content-Length twice, conflicting": (
        "POST",
        "/api/signin",
        b"{}",
        {"Content-Length": "2\r\nContent-Length: 3"},
        400,
    ),
    "Content-Length and Transfer-Encoding": (
        "POST",
        "/api/signin",
        b"2\r\n{}\r\n0\r\n\r\n",
        {"Content-Length": "12", "Transfer-Encoding": "chunked"},
        400,
    ),
    "chunked body over 64 KiB": (
        "POST",
        "/api/signin",
        b"".join(b"4000\r\n" + b" " * 0x4000 + b"\r\n" for _ in range(5)) + b"0\r\n\r\n",
        {"Transfer-Encoding": "chunked"},
        413,
    ),
    "Transfer-Encoding with a space before the colon": (
        "POST",
        "/api/signin",
        b"2\r\n{}\r\n0\r\n\r\n",
        {"Transfer-Encoding ": "chunked"},
        400,
    ),
    "signin field unknown": ("POST", "/api/signin", b'{"who": "ana", "task": "en_de"}', {}, 400),
    "signin with a name": ("POST", "/api/signin", b'{"who": "ana"}', {}, 401),
    "token of 10,000 characters": ("GET", "/api/next", None, {"X-Annotator-Token": "t" * 10_000}, 401),
    "malformed request line": ("GET", "/ /api/next", None, {}, 400),
    "request line over 64 KiB": ("GET", "/api/item?position=" + "1" * 70_000, None, {}, 414),
    "a header over 64 KiB": ("GET", "/api/next", None, {"X-Padding": "x" * 70_000}, 431),
    "a header over 200 KiB": ("GET", "/api/next", None, {"X-Padding": "x" * 200_000}, 431),
    "101 headers": ("GET", "/api/next", None, {f"X-H{k}": "1" for k in range(101)}, 431),
    "unknown method": ("DELETE", "/api/judgement", None, {}, 405),
}


@pytest.mark.parametrize("case", list(HOSTILE), ids=list(HOSTILE))
def test_a_hostile_request_is_answered_as_json_with_one_log_line(served, case):
    """A hostile request to the ranking page is answered (its status, a JSON error) with one log line on the
    server's stderr and no traceback; the server answers the next request."""
    method, path, body, headers, expected = HOSTILE[case]
    token = served["tokens"]["ana"]
    headers = {"X-Annotator-Token": token, **headers}
    if not headers["X-Annotator-Token"]:
        del headers["X-Annotator-Token"]
    before = served["stderr"].read_text(encoding="utf-8")
    status, answer = _status_and_json(_exchange(served["address"], _request(method, path, body, headers)))
    assert status == expected and isinstance(answer["error"], str) and answer["error"], answer
    logged = served["stderr"].read_text(encoding="utf-8")[len(before) :]
    assert len(logged.splitlines()) == 1 and f" {expected} " in logged and "Traceback" not in logged, logged
    status, view = _status_and_json(
        _exchange(served["address"], _request("GET", "/api/next", headers={"X-Annotator-Token": token}))
    )
    assert status == 200 and view["position"] == 1
    with sqlite3.connect(served["db"]) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judgement").fetchone()[0] == 0


def test_serving_a_task_made_with_the_former_default_seed_warns_once(served):
    """A database made before seeds were secret (seed 1234, the former default) is served, with one warning line
    that its hidden orders can be recomputed."""
    lines = served["stderr"].read_text(encoding="utf-8").splitlines()
    warnings = [line for line in lines if line.startswith("warning:")]
    assert warnings == [
        "warning: task en_de was created with seed 1234, the former default: anyone who has its system outputs can "
        "recompute every item's hidden order; create it again (without seed=) before annotating, if you can"
    ]


# -- connections and threads -------------------------------------------------------------------------------------


def test_idle_connections_are_closed_and_hold_no_thread(tmp_path, capsys):
    """150 idle connections (silent, or kept alive after a request) hold no thread: a normal request among them is
    answered at once, the threads stay a few, and each idle connection is closed after idle_seconds."""
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path)
    before = threading.active_count()
    with running(db, idle_seconds=1.5) as server:
        address = server.server_address[:2]
        idle = [socket.create_connection(address, timeout=10) for _ in range(140)]
        for _ in range(10):  # kept alive: one request answered, then silent
            sock = socket.create_connection(address, timeout=10)
            sock.sendall(b"GET /static/style.css HTTP/1.1\r\nHost: x\r\n\r\n")
            assert _answer(sock).startswith(b"HTTP/1.1 200")
            idle.append(sock)
        time.sleep(0.3)
        started = time.monotonic()
        status, view = _status_and_json(
            _exchange(address, _request("GET", "/api/next", headers={"X-Annotator-Token": tokens["ana"]}))
        )
        assert status == 200 and view["position"] == 1 and time.monotonic() - started < 1.0
        assert threading.active_count() <= before + 4  # the server's thread and a worker or two, not 150
        time.sleep(2.5)
        closed = 0
        for sock in idle:
            try:
                closed += sock.recv(1) == b""
            except ConnectionResetError:
                closed += 1
            sock.close()
        assert closed == len(idle)
    assert "Traceback" not in capsys.readouterr().err


def test_a_request_trickled_past_its_deadline_is_dropped_with_a_log_line(tmp_path, capsys):
    """A client that sends a request slowly (a byte at a time) is cut off when request_seconds have passed since
    its first byte, with one log line; the server answers others meanwhile and after."""
    db = tmp_path / "h.sqlite"
    make_task(db, tmp_path)
    with running(db, idle_seconds=0.8, request_seconds=1.0) as server:
        address = server.server_address[:2]
        slow = socket.create_connection(address, timeout=5)
        started = time.monotonic()
        try:
            for k, byte in enumerate(b"GET /api/next HTTP/1.1\r\nX-Slow: " + b"a" * 200):
                slow.sendall(bytes([byte]))
                if k == 5:
                    assert _exchange(address, _request("GET", "/static/style.css")).startswith(b"HTTP/1.1 200")
                time.sleep(0.05)
        except OSError:  # reset or broken pipe: the server closed it
            pass
        assert time.monotonic() - started < 4
        slow.close()
        assert _exchange(address, _request("GET", "/static/style.css")).startswith(b"HTTP/1.1 200")
    err = capsys.readouterr().err
    assert "timed out" in err and "Traceback" not in err


def test_a_body_trickled_past_its_deadline_is_answered_408(tmp_path, capsys):
    """A request whose head arrives at once but whose body trickles in is answered 408 (JSON, one log line) when
    request_seconds have passed, and the connection is closed; others are answered meanwhile."""
    db = tmp_path / "h.sqlite"
    make_task(db, tmp_path)
    with running(db, request_seconds=1.0) as server:
        address = server.server_address[:2]
        slow = socket.create_connection(address, timeout=5)
        slow.sendall(b"POST /api/signin HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        started = time.monotonic()
        for _ in range(5):
            assert _exchange(address, _request("GET", "/static/style.css")).startswith(b"HTTP/1.1 200")
            try:
                slow.sendall(b" ")
            except OSError:
                break
            time.sleep(0.1)
        answer = b""
        while chunk := slow.recv(65536):
            answer += chunk
        slow.close()
        assert time.monotonic() - started < 3
    status, body = _status_and_json(answer)
    assert status == 408 and body == {"error": "request body not whole 1 s after the request began"}
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and '"POST /api/signin" 408 ' in err, err


def test_a_thousand_concurrent_judgements_are_each_stored_once(tmp_path):
    """1,000 judgements sent at once by 50 clients through the fixed pool are each stored exactly once (one row
    per annotator and item, submissions counted), none lost."""
    db = tmp_path / "h.sqlite"
    names = [f"a{k:03d}" for k in range(100)]
    tokens = make_task(db, tmp_path, annotators=names)
    orders = db_orders(db)
    items = sorted(orders)
    unique = [(name, item) for name in names for item in items]  # 600 judgements, and 400 of them sent twice
    jobs = unique + unique[:400]
    with running(db) as server:
        address = server.server_address[:2]

        def judge(job) -> int:
            name, item = job
            ranks = slot_ranks(orders[item], {"baseline": 3, "mean_residual": 2, "self_attentive_content": 1})
            body = json.dumps({"item": item, "status": "ranked", "ranks": ranks}).encode()
            answer = _exchange(address, _request("POST", "/api/judgement", body, {"X-Annotator-Token": tokens[name]}))
            return _status_and_json(answer)[0]

        with ThreadPoolExecutor(50) as pool:
            statuses = list(pool.map(judge, jobs))
    assert statuses == [200] * len(jobs)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT COUNT(*), SUM(submissions) FROM judgement").fetchone()
    assert rows == (len(set(jobs)), len(jobs))


# -- blinding, sign-in, times ------------------------------------------------------------------------------------


def test_two_creates_without_a_seed_give_different_orders_no_one_can_recompute(tmp_path):
    """Two creates of the same task without seed= draw different samples and hidden orders, from a secret seed
    stored in the database; the former default seed 1234 does not recover them."""
    paths = write_inputs(tmp_path)
    spec = TaskSpec("en_de", str(paths["source"]), tuple((n, str(paths[n])) for n in SYSTEMS), sample=6)
    create_task(tmp_path / "one.sqlite", spec)
    create_task(tmp_path / "two.sqlite", spec)

    def drawn(db: Path) -> tuple[list[int], list[list[str]], int]:
        with sqlite3.connect(db) as conn:
            lines = [r[0] - 1 for r in conn.execute("SELECT line FROM item ORDER BY position")]
            query = "SELECT shown_order FROM item ORDER BY position"
            orders = [[SYSTEMS[k] for k in json.loads(r[0])] for r in conn.execute(query)]
            seed = conn.execute("SELECT seed FROM task").fetchone()[0]
        return lines, orders, seed

    def recomputed(seed: int) -> tuple[list[int], list[list[str]]]:
        rng = random.Random(seed)
        lines = sample_lines(paths["source"].read_text().splitlines(), 6, rng, "")
        return lines, [[SYSTEMS[k] for k in order] for order in shown_orders(6, 3, rng)]

    one, two = drawn(tmp_path / "one.sqlite"), drawn(tmp_path / "two.sqlite")
    assert one[:2] != two[:2] and one[2] != two[2] and 2**32 < max(one[2], two[2]) < 2**63
    assert recomputed(one[2]) == one[:2]  # the seed lives in the database: the orders are the seed's
    assert recomputed(1234) not in (one[:2], two[:2])


def test_create_with_a_fixed_seed_warns_and_db_a_folder_is_one_error_line(tmp_path):
    """create with seed= warns that the blinding is broken for whoever has the outputs; create and export with db=
    a folder end in one error line (exit 2), no traceback; serve refuses it with the same message."""
    write_inputs(tmp_path)
    args = ["create", "pair=en_de", "source=test.en", "hyps=[out.0.de,out.1.de]", "sample=3"]
    out = _human([*args, "db=fixed.sqlite", "seed=1234"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == (
        "warning: seed=1234 fixes the sample and every item's hidden order: anyone who has the system outputs and "
        "this seed can recompute which system is shown where, which breaks the blinding for them; leave seed= out "
        "for a secret seed"
    )
    (tmp_path / "folder").mkdir()
    message = "folder is a folder: db= names the database file (e.g. db=folder/human.sqlite)"
    for command in (["create", *args[1:]], ["export"]):
        out = _human([*command, "db=folder"], tmp_path)
        assert out.returncode == 2 and out.stderr == f"error: {message}\n", out.stderr
    with pytest.raises(ServeError, match=re.escape(f"{tmp_path / 'folder'} is a folder: db= names the database")):
        RankingServer(tmp_path / "folder")
    assert sorted(p.name for p in (tmp_path / "folder").iterdir()) == []


def test_no_request_returns_a_token_that_exists_already(tmp_path):
    """No sign-in returns an existing annotator's token for their name (signin=name is refused at start); a
    token signs in only as its own annotator."""
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path)
    with pytest.raises(ServeError, match="signin=name is no longer offered"):
        RankingServer(db, "127.0.0.1", 0, "name")
    with running(db) as server:
        address = server.server_address[:2]
        for who in ("ana", "ben", " ana ", "ANA", tokens["ana"][:-1]):
            body = json.dumps({"who": who}).encode()
            status, answer = _status_and_json(_exchange(address, _request("POST", "/api/signin", body)))
            assert status == 401 and not any(t in json.dumps(answer) for t in tokens.values())
        body = json.dumps({"who": tokens["ben"]}).encode()
        assert _status_and_json(_exchange(address, _request("POST", "/api/signin", body))) == (
            200,
            {"token": tokens["ben"], "annotator": "ben", "task": "en_de"},
        )


def test_shown_at_is_the_time_the_server_served_the_item(tmp_path):
    """shown_at is the server's time when it sent the item to this annotator; a client cannot set it."""
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path)
    with running(db) as server:
        address = server.server_address[:2]
        headers = {"X-Annotator-Token": tokens["ana"]}
        served_after = store.now()
        status, view = _status_and_json(_exchange(address, _request("GET", "/api/next", headers=headers)))
        served_before = store.now()
        time.sleep(0.3)
        body = json.dumps({"item": view["item"], "status": "skipped"}).encode()
        assert _status_and_json(_exchange(address, _request("POST", "/api/judgement", body, headers)))[0] == 200
        # ben never had the item served: his judgement of it has no shown_at
        body = json.dumps({"item": view["item"], "status": "broken"}).encode()
        headers = {"X-Annotator-Token": tokens["ben"]}
        assert _status_and_json(_exchange(address, _request("POST", "/api/judgement", body, headers)))[0] == 200
    with sqlite3.connect(db) as conn:
        rows = dict(
            (name, (shown, seconds))
            for name, shown, seconds in conn.execute(
                "SELECT a.name, shown_at, seconds FROM judgement JOIN annotator a ON a.id = annotator_id"
            )
        )
    shown, seconds = rows["ana"]
    assert served_after <= shown <= served_before and 0.3 <= seconds < 5
    assert datetime.fromisoformat(shown).tzinfo is not None and rows["ben"] == (None, None)


# -- exports -----------------------------------------------------------------------------------------------------


def test_csv_exports_hold_no_formula_and_the_numbers_are_unchanged(tmp_path):
    """Comments, annotator and system names that a spreadsheet would run as a formula (=, +, -, @, tab, CR) reach
    the CSV exports with a ' before them, every row whole; the numbers (a negative kappa too) are written as they
    are."""
    paths = write_inputs(tmp_path)
    names = ('=HYPERLINK("http://x","y")', "+cmd|' /C calc'!A0", "@SUM(1+1)")
    spec = TaskSpec(
        "en_de",
        str(paths["source"]),
        tuple(zip(names, (str(paths[n]) for n in SYSTEMS), strict=True)),
        sample=4,
        seed=11,
        annotators=("-2+3", "@ben"),
    )
    tokens = create_task(tmp_path / "h.sqlite", spec).tokens
    conn = store.connect(tmp_path / "h.sqlite")
    comments = ['=HYPERLINK("http://evil","click")', "\tsecond", "\rthird", "-1"]
    ranks = {"-2+3": [[1, 2, 3], [1, 1, 2], [2, 1, 1], [3, 2, 1]], "@ben": [[3, 2, 1], [2, 1, 1], [1, 1, 2], [1, 2, 3]]}
    for annotator, token in tokens.items():
        for position in range(1, 5):
            item = conn.execute("SELECT id FROM item WHERE position = ?", (position,)).fetchone()[0]
            comment = comments[position - 1]
            store.record_judgement(conn, token, item, "ranked", ranks[annotator][position - 1], comment)
    conn.close()
    files = export(tmp_path / "h.sqlite", None)
    for name in ("judgements.csv", "table5.csv", "agreement.csv"):
        for row in csv.reader(io.StringIO(files[name], newline="")):
            for cell in row:
                assert not cell.startswith(("=", "+", "@", "\t", "\r")), (name, cell)
                assert not cell.startswith("-") or cell.lstrip("-").replace(".", "").isdigit(), (name, cell)
    raw = list(csv.DictReader(io.StringIO(files["judgements.csv"], newline="")))
    assert len(raw) == 8 and {r["comment"] for r in raw} == {
        "'" + c.replace("\r", "\n") for c in comments
    }  # CR: a quoted LF
    assert {r["annotator"] for r in raw} == {"'-2+3", "'@ben"}
    agreement = next(csv.DictReader(io.StringIO(files["agreement.csv"])))
    assert float(agreement["kappa"]) < 0 and agreement["kappa"].startswith("-")  # a number, as it is
    table = list(csv.DictReader(io.StringIO(files["table5.csv"])))
    assert [(r["first"], r["second"]) for r in table] == [
        ("'" + names[1], "'" + names[0]),
        ("'" + names[2], "'" + names[0]),
        ("'" + names[2], "'" + names[1]),
    ]
    assert all(int(r["n"]) == 8 and sum(int(r[k]) for k in ("higher", "equal", "lower")) == 8 for r in table)


# -- the web stack: slow clients, framing, one server per database ---------------------------------------------


SLOW_CLIENTS = 256


def test_256_slow_clients_do_not_delay_a_normal_request(tmp_path):
    """With 256 connections to serve each sending one byte a second (slowloris), a normal GET /api/next is
    answered in under 0.5 s, every time, and the slow connections are still open (none was dropped to make room)."""
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path)
    request = _request("GET", "/api/next", headers={"X-Annotator-Token": tokens["ana"]})
    with _serving(db, tmp_path) as (_, address):
        assert _status_and_json(_exchange(address, request))[0] == 200  # warm: the first request imports things
        slow = [socket.create_connection(address, timeout=5) for _ in range(SLOW_CLIENTS)]
        trickled = b"GET /api/next HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100
        stop, failures, rounds = threading.Event(), [], [0]

        def trickle() -> None:  # one byte a second on each connection
            for byte in trickled:
                for sock in slow:
                    try:
                        sock.send(bytes([byte]))
                    except OSError as err:
                        failures.append(err)
                rounds[0] += 1
                if stop.wait(1.0):
                    return

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        try:
            time.sleep(2.2)  # every slow connection has begun its request
            seconds = []
            for _ in range(6):
                started = time.perf_counter()
                status, view = _status_and_json(_exchange(address, request, timeout=5))
                seconds.append(time.perf_counter() - started)
                assert status == 200 and view["position"] == 1
                time.sleep(0.25)
        finally:
            stop.set()
            thread.join(timeout=10)
            for sock in slow:
                sock.close()
    print(f"GET /api/next among {SLOW_CLIENTS} slow clients: max {max(seconds):.3f} s, {seconds}")
    assert rounds[0] >= 3 and not failures, failures[:3]
    assert max(seconds) < 0.5, seconds


def _one_response(answer: bytes) -> tuple[int, dict[str, str], dict]:
    """The status, headers and JSON of the one response in ``answer`` (a second one fails the test)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers["content-length"])
    assert len(body) == length, f"more than one response: {answer!r}"
    return int(lines[0].split()[1]), headers, json.loads(body)


FRAMING = {
    # the body is a request of its own: read as one, it would be answered as a second response
    "Transfer-Encoding with a space before the colon": (
        b"POST /api/signin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n"
        b"GET /api/next HTTP/1.1\r\nHost: x\r\n\r\n"
    ),
    "HTTP/0.9 GET /": b"GET /\r\n\r\n",
    "conflicting Content-Length": b"POST /api/signin HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 40"
    b"\r\n\r\n{}GET /api/next HTTP/1.1\r\nHost: x\r\n\r\n",
    "Content-Length a list of two": b"POST /api/signin HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 40\r\n\r\n{}",
    "bare LF in a header name": b"GET /api/next HTTP/1.1\r\nHost: x\r\nX\nA: 1\r\n\r\n",
}


@pytest.mark.parametrize("case", list(FRAMING), ids=list(FRAMING))
def test_malformed_framing_is_answered_400_by_the_server(served, case):
    """A request whose framing can be read two ways is answered 400 by the server itself (h11), before the app:
    one response, JSON, with the page's security headers (the CSP too), one log line naming the fault."""
    before = served["stderr"].read_text(encoding="utf-8")
    status, headers, answer = _one_response(_exchange(served["address"], FRAMING[case]))
    assert status == 400 and answer["error"].startswith("malformed request: "), answer
    assert headers["content-security-policy"].startswith("default-src 'none'")
    assert headers["x-content-type-options"] == "nosniff" and headers["connection"] == "close"
    logged = served["stderr"].read_text(encoding="utf-8")[len(before) :]
    assert len(logged.splitlines()) == 1 and " 400 malformed request: " in logged, logged


def test_every_answer_carries_the_security_headers(served):
    """The page, its script, the API's answers and its refusals (404, 405, 401) all carry the CSP, nosniff and
    no-store."""
    token = served["tokens"]["ana"]
    for method, path, expected in [
        ("GET", "/", 200),
        ("GET", "/static/app.js", 200),
        ("HEAD", "/", 200),
        ("GET", "/api/next", 401),
        ("GET", "/nothing", 404),
        ("PUT", "/", 405),
    ]:
        answer = _exchange(served["address"], _request(method, path, headers={"X-Token": token}))
        head = answer.partition(b"\r\n\r\n")[0].decode("latin-1").lower()
        assert head.startswith(f"http/1.1 {expected} "), (method, path, head)
        assert "content-security-policy: default-src 'none'" in head and "x-content-type-options: nosniff" in head
        assert "cache-control: no-store" in head and "x-frame-options: deny" in head


def test_a_second_serve_on_one_database_refuses_with_one_line(tmp_path):
    """A second serve on a database being served refuses with one error line (exit 2) naming the first one's
    process; the lock goes with the process (also a killed one), so a later serve starts."""
    db = tmp_path / "h.sqlite"
    make_task(db, tmp_path)
    with _serving(db, tmp_path) as (first, _):
        out = _human(["serve", f"db={db}", "--port", "0"], tmp_path)
        assert out.returncode == 2 and out.stdout == "", out
        assert out.stderr == (
            f"error: {db} is served already (by process {first.pid}; lock {db}.serve-lock): two servers on one "
            "database would hand out the same items unaware of each other; stop the other serve first\n"
        )
        with pytest.raises(ServeError, match="is served already"):
            RankingServer(db, "127.0.0.1", 0)
        first.kill()  # no clean-up at all: the kernel releases the lock
        first.wait(timeout=10)
        server = RankingServer(db, "127.0.0.1", 0)
        server.server_close()


def test_a_database_that_vanishes_while_served_is_named_as_gone(tmp_path):
    """A database deleted or replaced while the page is served: each request is answered 503 saying that the
    database is gone and nothing was stored, never 'not a sarnmt human-evaluation database', and nothing is written
    to the file put in its place."""
    db = tmp_path / "h.sqlite"
    tokens = make_task(db, tmp_path)
    headers = {"X-Annotator-Token": tokens["ana"]}
    with running(db) as server:
        address = server.server_address[:2]
        status, view = _status_and_json(_exchange(address, _request("GET", "/api/next", headers=headers)))
        assert status == 200
        db.rename(tmp_path / "moved.sqlite")
        body = json.dumps({"item": view["item"], "status": "skipped"}).encode()
        for request in (
            _request("GET", "/api/next", headers=headers),
            _request("POST", "/api/judgement", body, headers),
        ):
            status, answer = _status_and_json(_exchange(address, request))
            assert status == 503 and answer["error"] == (
                f"the database {db} is gone (deleted, moved or replaced while being served): nothing stored; put it "
                "back and restart serve"
            )
        make_task(db, tmp_path / "other")  # another database in its place: not written to either
        status, answer = _status_and_json(_exchange(address, _request("POST", "/api/judgement", body, headers)))
        assert status == 503 and "is gone" in answer["error"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judgement").fetchone()[0] == 0


def _as_nobody() -> dict:
    """subprocess keywords that run a command as a user who may not write root's files (when the tests run as
    root, who may write any file, a read-only file is read-only only for someone else)."""
    if os.geteuid() != 0:
        return {}
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a read-only file cannot be made here")
    return {"prefix": ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]}


def test_a_read_only_database_is_named_read_only(tmp_path):
    """serve and annotators add= on a database file that cannot be written refuse with one line saying it is
    read-only (not 'not a sarnmt human-evaluation database'); export, which only reads, works."""
    how = _as_nobody()
    folder = Path(tempfile.mkdtemp(prefix="sarnmt-ro-"))  # reachable by nobody (tmp_path is root's alone)
    try:
        folder.chmod(0o777)
        db = folder / "h.sqlite"
        make_task(db, folder)
        db.chmod(0o444)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
        for args in (["serve", f"db={db}", "--port", "0"], ["annotators", f"db={db}", "add=[carol]"]):
            command = [*how.get("prefix", []), sys.executable, "-m", "sarnmt.human", *args]
            out = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=60)
            assert out.returncode == 2 and out.stderr == (
                f"error: {db} is read-only: this command stores into it (make it writable, or work on a copy)\n"
            ), out
        command = [*how.get("prefix", []), sys.executable, "-m", "sarnmt.human", "export", f"db={db}"]
        out = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "Mean vs. Baseline" in out.stdout, out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- annotator names ----------------------------------------------------------------------------------------------

CONTROL_NAMES = {
    "newline": "ana\nben\tTOKEN\thttp://127.0.0.1:8000/#token=forged",
    "tab": "ana\tx",
    "ANSI escape": "\x1b[31mana\x1b[0m",
    "carriage return": "ana\rben",
    "right-to-left override": "ana\u202enib",
    "line separator": "ana\u2028ben",
}


@pytest.mark.parametrize("case", list(CONTROL_NAMES), ids=list(CONTROL_NAMES))
def test_an_annotator_name_with_a_control_character_is_refused(tmp_path, case):
    """An annotator name holding a control character (a newline that would forge a line of the token list, a tab,
    an ANSI escape, a bidi override) is refused by create and by annotators add= with one line naming the
    character; nothing is stored."""
    name = CONTROL_NAMES[case]
    paths = write_inputs(tmp_path)
    spec = TaskSpec("en_de", str(paths["source"]), tuple((n, str(paths[n])) for n in SYSTEMS), annotators=(name,))
    with pytest.raises(TaskError, match=r"holds the control character U\+[0-9A-F]{4}: use letters"):
        create_task(tmp_path / "h.sqlite", spec)
    assert not (tmp_path / "h.sqlite").exists()
    db = tmp_path / "kept.sqlite"
    make_task(db, tmp_path / "ok")
    out = _human(["annotators", f"db={db}", f"add=['{name}']"], tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: annotator name ") and "control character U+" in lines[0]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM annotator").fetchone()[0] == 2


def test_a_control_character_stored_before_is_escaped_in_the_token_list(tmp_path):
    """A name with a newline or an ANSI escape in a database made before such names were refused is printed
    escaped by annotators: one line per annotator, no escape sequence reaches the terminal."""
    db = tmp_path / "h.sqlite"
    make_task(db, tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE annotator SET name = ? WHERE name = 'ben'", ("ben\nmallory\tTOKEN\x1b[2J",))
    out = _human(["annotators", f"db={db}"], tmp_path)
    assert out.returncode == 0, out
    lines = out.stdout.splitlines()
    assert len(lines) == 4 and "\x1b" not in out.stdout, lines
    assert lines[3].startswith("  ben\\u000amallory\\u0009TOKEN\\u001b[2J\t"), lines


def test_annotator_names_are_nfc_and_lookalikes_are_warned_about(tmp_path):
    """NFC and NFD forms of one name are one annotator (create: 'names repeat'; annotators add=: 'already exists');
    a full-width or differently cased form of an existing name is added with one warning line naming both."""
    composed, decomposed = "Jos\u00e9", "Jose\u0301"
    paths = write_inputs(tmp_path)
    systems = tuple((n, str(paths[n])) for n in SYSTEMS)
    with pytest.raises(TaskError, match="annotator names repeat"):
        create_task(
            tmp_path / "h.sqlite",
            TaskSpec("en_de", str(paths["source"]), systems, sample=3, annotators=(composed, decomposed)),
        )
    db = tmp_path / "kept.sqlite"
    make_task(db, tmp_path / "ok", annotators=(composed,))
    out = _human(["annotators", f"db={db}", f"add=['{decomposed}']"], tmp_path)
    assert out.returncode == 2 and out.stderr == f"error: annotator {composed!r} already exists in this task\n", out
    out = _human(["annotators", f"db={db}", "add=['\uff2a\uff4f\uff53\u00e9']"], tmp_path)  # full-width Ｊｏｓé
    assert out.returncode == 0, out
    assert out.stderr.splitlines() == [
        "warning: annotator 'Ｊｏｓé' looks like 'José' (the same under NFKC and case folding): two annotators now; "
        "if that was a typo, give the existing annotator's token instead"
    ]
    created = create_task(
        tmp_path / "two.sqlite", TaskSpec("en_de", str(paths["source"]), systems, sample=3, annotators=("ana", "ANA"))
    )
    assert created.warnings == (
        "warning: annotator 'ANA' looks like 'ana' (the same under NFKC and case folding): two annotators now; if "
        "that was a typo, give the existing annotator's token instead",
    )
    with sqlite3.connect(db) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM annotator ORDER BY id")]
    assert names == [composed, "\uff2a\uff4f\uff53\u00e9"]


# -- a database made elsewhere -----------------------------------------------------------------------------------
def _with_judgement(tmp_path: Path, ranks: str) -> Path:
    """A task's database with one judgement whose ranks column holds ``ranks`` (JSON text), written by hand."""
    db = tmp_path / "h.sqlite"
    make_task(db, tmp_path)
    with sqlite3.connect(db) as conn:
        item, order = conn.execute("SELECT id, shown_order FROM item ORDER BY id LIMIT 1").fetchone()
        conn.execute(
            "INSERT INTO judgement (annotator_id, item_id, status, ranks, shown_order, submitted_at) "
            "VALUES (1, ?, 'ranked', ?, ?, '2026-12-07T00:00:00.000+00:00')",
            (item, ranks, order),
        )
    return db


@pytest.mark.parametrize(
    "ranks,says",
    [
        ('["a", "b", "c"]', "ranks must be integers from 1 (best) to 3"),
        ("[NaN, 1, 2]", "ranks must be integers from 1 (best) to 3"),
        ("[1e999, 1, 2]", "ranks must be integers from 1 (best) to 3"),
        ("[1, 2]", "incomplete ranking: expected a rank for each of the 3 outputs"),
    ],
)
def test_export_refuses_ranks_no_page_could_have_stored(tmp_path, ranks, says):
    """Ranks written into the database by hand (text, NaN, 1e999, too few) are refused by export, naming the
    judgement, never printed as Table 5."""
    db = _with_judgement(tmp_path, ranks)
    out = _human(["export", f"db={db}"], tmp_path)
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith("error: the database's judgement of item ") and says in out.stderr
    assert not (tmp_path / "table5.md").exists()


def test_a_trigger_or_a_missing_table_is_refused_on_open(tmp_path):
    """A trigger made elsewhere (one that rewrites every submitted ranking) or a missing table: export, serve and
    annotators refuse the database in one line naming the object, before reading or writing anything."""
    db = tmp_path / "h.sqlite"
    make_task(db, tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TRIGGER rewrite AFTER INSERT ON judgement BEGIN UPDATE judgement SET ranks = '[1, 1, 1]'; END"
        )
    out = _human(["export", f"db={db}"], tmp_path)
    assert out.returncode == 2, out.stderr
    assert (
        out.stderr == f"error: {db}: holds a trigger 'rewrite' that sarnmt does not create; not a database this "
        "reads (a trigger or view could change what is stored or exported)\n"
    )
    with pytest.raises(ServeError, match="holds a trigger 'rewrite'"):
        RankingServer(db)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER rewrite")
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("DROP TABLE output")
    with pytest.raises(store.StoreError, match="lacks the table 'output'"):
        store.connect(db, write=False)


def test_create_refuses_more_systems_than_the_page_can_label(tmp_path):
    paths = write_inputs(tmp_path)
    systems = tuple((f"s{k}", str(paths["baseline"])) for k in range(27))
    spec = TaskSpec(name="en_de", source=str(paths["source"]), systems=systems, annotators=("ana",), sample=None)
    with pytest.raises(TaskError, match="a ranking shows at most 26 systems"):
        create_task(tmp_path / "h.sqlite", spec)


def test_a_body_no_route_reads_is_cut_off_all_the_same(tmp_path, capsys):
    """A GET with Content-Length 10^8 whose body trickles in a byte at a time (no route reads a GET's body) is cut
    off when twice request_seconds have passed since its head, with one log line; it held the connection for as
    long as the client liked."""
    db = tmp_path / "h.sqlite"
    make_task(db, tmp_path)
    with running(db, request_seconds=1.0) as server:
        slow = socket.create_connection(server.server_address[:2], timeout=5)
        slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n{")
        cut = False
        for _ in range(100):  # up to 20 s of trickling; cut off at about 2 s
            try:
                slow.sendall(b" ")
            except OSError:
                cut = True
                break
            time.sleep(0.2)
        slow.close()
    assert cut
    assert "request body not whole 2 s after its head: timed out, connection closed" in capsys.readouterr().err
