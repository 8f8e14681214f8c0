"""The SQLite store of a human evaluation: tasks, their items and hidden orders, annotators and judgements.

One database holds one or more **tasks**, one per language pair (Table 5's columns). A task has its systems (name
and file, in the order given at creation: the first is the baseline), its items (a sampled source line, its
reference, every system's output and the order in which the outputs are shown, fixed at creation) and its
annotators (a name and a secret token each). A **judgement** is one row per annotator and item: ``ranked`` (the
rank of each output in the order shown, 1 = best, ties allowed), ``skipped`` or ``broken`` (flagged), with the order
shown, the time the item was served and the time of the submit. A second submit for the same item replaces the
first (and counts ``submissions``); every write is one transaction, committed before the web app answers, so a
judgement the annotator saw acknowledged survives the app being killed.

Connections are opened per use (:func:`connect`), in WAL mode with ``synchronous=FULL``, so the web app's threads
and an export can read while an annotator writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sarnmt.human.errors import StoreError, UnknownAnnotator, show
from sarnmt.human.names import annotator_name
from sarnmt.human.schema import SCHEMA, check_schema
from sarnmt.utils.json_bounds import loads

SCHEMA_VERSION = 1
MAX_ID = 2**63 - 1  # SQLite's largest integer
STATUSES = ("ranked", "skipped", "broken")
MAX_SYSTEMS = 26  # the page labels the outputs A-Z


def now() -> str:
    """The current UTC time, ISO 8601 with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def connect(path: str | Path, create: bool = False, write: bool = True, check: bool = True) -> sqlite3.Connection:
    """Open the database at ``path`` (autocommit mode: use :func:`transaction` for writes).

    :param create: create the file and the schema if the file does not exist; otherwise a missing file is an error.
    :param write: the caller will write (``create``, ``serve``, ``annotators``): a read-only file, or a folder in
        which SQLite cannot keep its ``-wal`` and ``-shm`` files, is refused up front, saying so.
    :raises StoreError: the file is missing (and not ``create``), read-only (and ``write``), cannot be opened, or is
        not a human-evaluation database, or (``check``) holds objects sarnmt does not create (:func:`check_schema`;
        the web app checks once when it starts serving, not on each request's connection).
    """
    path = Path(path)
    exists = path.is_file()
    if path.is_dir():
        raise StoreError(f"{path} is a folder: db= names the database file (e.g. db={path / 'human.sqlite'})")
    if path.exists() and not exists:
        raise StoreError(f"{path} is not a file: db= names the database file")
    if not exists and not create:
        raise StoreError(f"no such database: {path} (create a task first: python -m sarnmt.human create ...)")
    if exists and write and not os.access(path, os.W_OK):
        raise StoreError(f"{path} is read-only: this command stores into it (make it writable, or work on a copy)")
    folder = path.parent
    if exists and write and not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(
            f"the folder {folder} is read-only: SQLite keeps {path.name}-wal and {path.name}-shm beside the database "
            "while it is written (make the folder writable, or work on a copy elsewhere)"
        )
    try:
        if not exists:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
    except (OSError, sqlite3.Error) as err:  # a parent that is a file, a folder we may not write in
        raise StoreError(f"cannot open the database {path}: {getattr(err, 'strerror', None) or err}") from err
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        empty = conn.execute("SELECT 1 FROM sqlite_master").fetchone() is None
        if version == 0 and empty and create:
            conn.executescript("BEGIN IMMEDIATE;" + SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
        elif version != SCHEMA_VERSION:
            raise StoreError(f"{path}: not a sarnmt human-evaluation database (schema version {version})")
        elif check:
            check_schema(conn, path)
    except sqlite3.OperationalError as err:  # read-only, locked, unreadable: the file may be fine
        conn.close()
        raise StoreError(f"cannot use the database {path}: {err}") from err
    except sqlite3.DatabaseError as err:  # "file is not a database", a damaged file
        conn.close()
        raise StoreError(f"{path}: not a sarnmt human-evaluation database ({err})") from err
    except StoreError:
        conn.close()
        raise
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back on any exception, so a refused write stores nothing."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@dataclass(frozen=True)
class Annotator:
    id: int
    name: str
    token: str
    task_id: int
    task: str


def task_names(conn: sqlite3.Connection) -> list[str]:
    return [r["name"] for r in conn.execute("SELECT name FROM task ORDER BY id")]


def task_row(conn: sqlite3.Connection, name: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM task WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise StoreError(f"no task {name!r} in this database; its tasks: {task_names(conn)}")
    return row


def systems(conn: sqlite3.Connection, task_id: int) -> list[str]:
    """The task's system names in creation order (index = system idx)."""
    return [r["name"] for r in conn.execute("SELECT name FROM system WHERE task_id = ? ORDER BY idx", (task_id,))]


_ANNOTATOR = "SELECT a.id, a.name, a.token, a.task_id, t.name AS task FROM annotator a JOIN task t ON t.id = a.task_id"


def annotator_by_token(conn: sqlite3.Connection, token: str) -> Annotator:
    """:raises StoreError: no annotator has this token."""
    if not isinstance(token, str) or not token.isascii() or len(token) > 100:  # tokens are short and ASCII
        raise UnknownAnnotator("unknown annotator: no annotator has this token (sign in again)")
    row = conn.execute(_ANNOTATOR + " WHERE a.token = ?", (token,)).fetchone()
    if row is None:
        raise UnknownAnnotator("unknown annotator: no annotator has this token (sign in again)")
    return Annotator(**dict(row))


def annotators(conn: sqlite3.Connection, task_id: int) -> list[Annotator]:
    return [Annotator(**dict(r)) for r in conn.execute(_ANNOTATOR + " WHERE a.task_id = ? ORDER BY a.id", (task_id,))]


def add_annotator(conn: sqlite3.Connection, task_id: int, name: str, token: str) -> Annotator:
    """Register ``name`` (see :func:`annotator_name`) for the task (inside the caller's transaction).

    :raises StoreError: the name is refused by :func:`annotator_name`, or already taken in this task.
    """
    name = annotator_name(name)
    if conn.execute("SELECT 1 FROM annotator WHERE task_id = ? AND name = ?", (task_id, name)).fetchone():
        raise StoreError(f"annotator {name!r} already exists in this task")
    conn.execute(
        "INSERT INTO annotator (task_id, name, token, created_at) VALUES (?, ?, ?, ?)", (task_id, name, token, now())
    )
    return annotator_by_token(conn, token)


def annotator_by_name(conn: sqlite3.Connection, task_id: int, name: str) -> Annotator | None:
    name = unicodedata.normalize("NFC", name).strip()
    row = conn.execute(_ANNOTATOR + " WHERE a.task_id = ? AND a.name = ?", (task_id, name)).fetchone()
    return None if row is None else Annotator(**dict(row))


def progress(conn: sqlite3.Connection, annotator: Annotator) -> dict[str, int]:
    """``total`` items of the annotator's task and how many they ``ranked``, ``skipped``, flagged (``broken``)."""
    total = conn.execute("SELECT COUNT(*) FROM item WHERE task_id = ?", (annotator.task_id,)).fetchone()[0]
    counts = dict.fromkeys(STATUSES, 0)
    query = "SELECT status, COUNT(*) FROM judgement WHERE annotator_id = ? GROUP BY status"
    counts.update({status: n for status, n in conn.execute(query, (annotator.id,))})
    return {"total": total, **counts, "done": sum(counts.values())}


def next_position(conn: sqlite3.Connection, annotator: Annotator) -> int | None:
    """The first item (by position) this annotator has not judged, skipped or flagged; ``None`` when all are."""
    row = conn.execute(
        "SELECT MIN(position) FROM item i WHERE task_id = ? AND NOT EXISTS "
        "(SELECT 1 FROM judgement j WHERE j.item_id = i.id AND j.annotator_id = ?)",
        (annotator.task_id, annotator.id),
    ).fetchone()
    return row[0]


def item_view(conn: sqlite3.Connection, annotator: Annotator, position: int) -> dict:
    """What the page shows for the item at ``position``: the source, the reference (if the task shows it), the
    outputs in the item's hidden order and this annotator's judgement of it. It names no system.

    :raises StoreError: no item at this position.
    """
    if not isinstance(position, int) or isinstance(position, bool) or not 1 <= position <= MAX_ID:
        raise StoreError(f"position must be a whole number from 1, got {show(position)}")
    item = conn.execute(
        "SELECT i.*, t.show_reference FROM item i JOIN task t ON t.id = i.task_id "
        "WHERE i.task_id = ? AND i.position = ?",
        (annotator.task_id, position),
    ).fetchone()
    if item is None:
        raise StoreError(f"no item at position {position} in task {annotator.task}")
    texts = dict(conn.execute("SELECT system_idx, text FROM output WHERE item_id = ?", (item["id"],)).fetchall())
    judged = conn.execute(
        "SELECT status, ranks, comment FROM judgement WHERE annotator_id = ? AND item_id = ?",
        (annotator.id, item["id"]),
    ).fetchone()
    return {
        "item": item["id"],
        "position": position,
        "source": item["source"],
        "reference": item["reference"] if item["show_reference"] else None,
        "outputs": [texts[idx] for idx in loads(item["shown_order"], f"the database's item {item['id']}: shown_order")],
        "judgement": None
        if judged is None
        else {
            "status": judged["status"],
            "ranks": loads(judged["ranks"] or "null", f"the database's judgement of item {item['id']}: ranks"),
            "comment": judged["comment"],
        },
    }


def _seconds(shown_at: str | None, submitted_at: str) -> float | None:
    if shown_at is None:
        return None
    try:
        shown = datetime.fromisoformat(shown_at)
    except (TypeError, ValueError) as err:
        raise StoreError(f"shown_at {show(shown_at)} is not an ISO 8601 time") from err
    if shown.tzinfo is None:
        raise StoreError(f"shown_at {show(shown_at)} has no time zone")
    return round((datetime.fromisoformat(submitted_at) - shown).total_seconds(), 3)


def record_judgement(
    conn: sqlite3.Connection,
    token: str,
    item_id: object,
    status: object,
    ranks: object = None,
    comment: object = "",
    shown_at: str | None = None,
) -> Annotator:
    """Store one judgement, replacing this annotator's earlier one for the item; all checks come first, in the
    same transaction, so a refused judgement stores nothing.

    :param ranks: for ``ranked``, one rank per output in the order shown, each an integer from 1 (best) to the
        number of outputs; equal ranks are ties. ``None`` for ``skipped`` and ``broken``.
    :raises StoreError: unknown annotator (token), unknown item (or one of another task), unknown status, an
        incomplete or malformed ranking, ranks given with a skip or flag, a malformed ``shown_at``.
    """
    with transaction(conn):
        annotator = annotator_by_token(conn, token)
        if status not in STATUSES:
            raise StoreError(f"status must be one of {', '.join(STATUSES)}, got {show(status)}")
        if not isinstance(item_id, int) or isinstance(item_id, bool) or not 1 <= item_id <= MAX_ID:
            raise StoreError(f"item must be an item id (an integer from 1 to {MAX_ID}), got {show(item_id)}")
        item = conn.execute(
            "SELECT id, shown_order FROM item WHERE id = ? AND task_id = ?", (item_id, annotator.task_id)
        ).fetchone()
        if item is None:
            raise StoreError(f"unknown item {item_id} for task {annotator.task}")
        n = len(loads(item["shown_order"], f"the database's item {item_id}: shown_order"))
        if status == "ranked":
            check_ranks(ranks, n)
        elif ranks is not None:
            raise StoreError(f"a {status} judgement carries no ranks, got {show(ranks)}")
        if not isinstance(comment, str) or len(comment) > 2000 or not _unicode(comment):
            raise StoreError("comment must be text of at most 2,000 characters")
        submitted_at = now()
        seconds = _seconds(shown_at, submitted_at)
        conn.execute(
            "INSERT INTO judgement (annotator_id, item_id, status, ranks, shown_order, comment, shown_at, "
            "submitted_at, seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (annotator_id, item_id) DO UPDATE SET status = excluded.status, ranks = excluded.ranks, "
            "shown_order = excluded.shown_order, comment = excluded.comment, shown_at = excluded.shown_at, "
            "submitted_at = excluded.submitted_at, seconds = excluded.seconds, submissions = submissions + 1",
            (
                annotator.id,
                item["id"],
                status,
                None if ranks is None else json.dumps(ranks),
                item["shown_order"],
                comment,
                shown_at,
                submitted_at,
                seconds,
            ),
        )
    return annotator


def _unicode(text: str) -> bool:
    """Whether ``text`` can be stored (UTF-8): no lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_ranks(ranks: object, n: int) -> None:
    """:raises StoreError: ``ranks`` is not one integer rank in 1..n for each of the ``n`` outputs."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:MAX_SYSTEMS]
    if not isinstance(ranks, list) or len(ranks) != n:
        raise StoreError(f"incomplete ranking: expected a rank for each of the {n} outputs, got {show(ranks)}")
    unranked = [letters[k] for k, r in enumerate(ranks) if r is None]
    if unranked:
        raise StoreError(f"incomplete ranking: output {', '.join(unranked)} has no rank")
    bad = [r for r in ranks if not isinstance(r, int) or isinstance(r, bool) or not 1 <= r <= n]
    if bad:
        raise StoreError(f"ranks must be integers from 1 (best) to {n}, got {show(ranks)}")
