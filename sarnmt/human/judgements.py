"""A human evaluation's tasks and their judgements as the exports read them from its database
(:mod:`sarnmt.human.store`): every judgement with the order its outputs were shown in and the rank of each system
resolved from it, the pairwise counts of Table 5 and the agreement (:mod:`sarnmt.human.agreement`)."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from sarnmt.errors import InputError
from sarnmt.human import store
from sarnmt.human.agreement import Agreement, agreement, compare
from sarnmt.human.errors import StoreError, show
from sarnmt.human.store import MAX_SYSTEMS
from sarnmt.utils.json_bounds import loads


class ExportError(InputError):
    """A database or paper-table file that cannot be exported from; the message names it."""


@dataclass
class Task:
    """One task's systems and judgements, read from the store."""

    name: str
    systems: list[str]
    items: int
    judgements: list[dict] = field(default_factory=list)

    def ranked(self) -> list[dict]:
        return [j for j in self.judgements if j["status"] == "ranked"]

    def count(self, status: str) -> int:
        return sum(j["status"] == status for j in self.judgements)

    def pairs(self) -> list[tuple[str, str]]:
        """(later, earlier) for every two systems, by the later one's then the earlier one's creation order."""
        s = self.systems
        return [(s[j], s[i]) for j in range(len(s)) for i in range(j)]

    def counts(self, first: str, second: str) -> tuple[int, int, int]:
        """How many ranked judgements put ``first`` higher than, equal to, lower than ``second``."""
        labels = [compare(j["by_system"][first], j["by_system"][second]) for j in self.ranked()]
        return labels.count(">"), labels.count("="), labels.count("<")

    def agreement(self) -> Agreement:
        ranks: dict[str, dict[int, dict[str, int]]] = defaultdict(dict)
        for j in self.ranked():
            ranks[j["annotator"]][j["item"]] = j["by_system"]
        return agreement(ranks, self.pairs())

    def annotators(self) -> list[str]:
        return sorted({j["annotator"] for j in self.judgements})


def read_tasks(db: str | Path) -> list[Task]:
    """Every task of the database with its judgements (rank per system resolved from the order shown).

    :raises ExportError: the database is missing or not a human-evaluation database.
    """
    try:
        conn = store.connect(db, write=False)
    except StoreError as err:
        raise ExportError(str(err)) from err
    try:
        return [_read_task(conn, row) for row in conn.execute("SELECT * FROM task ORDER BY id").fetchall()]
    finally:
        conn.close()


def _read_task(conn: sqlite3.Connection, row: sqlite3.Row) -> Task:
    systems = store.systems(conn, row["id"])
    items = conn.execute("SELECT COUNT(*) FROM item WHERE task_id = ?", (row["id"],)).fetchone()[0]
    task = Task(row["name"], systems, items)
    query = (
        "SELECT j.*, a.name AS annotator, i.position, i.line FROM judgement j "
        "JOIN annotator a ON a.id = j.annotator_id JOIN item i ON i.id = j.item_id "
        "WHERE i.task_id = ? ORDER BY i.position, a.name"
    )
    if not 2 <= len(systems) <= MAX_SYSTEMS:
        raise ExportError(
            f"task {row['name']!r} has {len(systems)} systems; a ranking task has 2 to {MAX_SYSTEMS} (the page "
            "labels the outputs A-Z)"
        )
    for j in conn.execute(query, (row["id"],)):
        where = f"the database's judgement of item {j['item_id']} by {j['annotator']!r}"
        shown = loads(j["shown_order"], f"{where}: shown_order")
        if not isinstance(shown, list) or sorted(map(repr, shown)) != sorted(map(repr, range(len(systems)))):
            raise ExportError(
                f"{where}: shown_order {show(shown)} is not an order of the task's {len(systems)} systems"
            )
        order = [systems[k] for k in shown]
        ranks = loads(j["ranks"], f"{where}: ranks") if j["ranks"] else None
        if j["status"] == "ranked" or ranks is not None:
            try:
                store.check_ranks(ranks, len(systems))
            except StoreError as err:
                raise ExportError(f"{where}: {err}") from None
        task.judgements.append(
            {
                **{k: j[k] for k in ("annotator", "position", "line", "status", "comment", "shown_at")},
                **{k: j[k] for k in ("submitted_at", "seconds", "submissions")},
                "item": j["item_id"],
                "order": order,
                "ranks": ranks,
                "by_system": None if ranks is None else dict(zip(order, ranks, strict=True)),
            }
        )
    return task
