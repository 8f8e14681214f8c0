"""The ranking database's schema (``schema.sql``) and the check that a database opened is that schema and nothing
more: the same tables and indexes, no trigger or view (one made elsewhere could rewrite a submitted ranking as it is
stored, or change what is exported). :func:`sarnmt.human.store.connect` creates the schema and runs the check."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from sarnmt.human.errors import StoreError

SCHEMA = Path(__file__).with_name("schema.sql").read_text(encoding="utf-8")


def _objects(conn: sqlite3.Connection) -> dict[tuple[str, str], str | None]:
    """``{(type, name): sql}`` of every table, index, trigger and view of a database."""
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_stat%'").fetchall()
    return {(row[0], row[1]): row[2] for row in rows}


@functools.cache
def _expected() -> dict[tuple[str, str], str | None]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        return _objects(conn)
    finally:
        conn.close()


def check_schema(conn: sqlite3.Connection, path: str | Path) -> None:
    """The database holds exactly the tables and indexes sarnmt creates, no trigger or view (a trigger made
    elsewhere could rewrite a submitted ranking as it is stored).

    :raises StoreError: naming the first object that differs."""
    found, expected = _objects(conn), _expected()
    for key, sql in sorted(found.items()):
        if key not in expected:
            raise StoreError(
                f"{path}: holds a {key[0]} {key[1]!r} that sarnmt does not create; not a database this reads (a "
                "trigger or view could change what is stored or exported)"
            )
        if sql != expected[key]:
            raise StoreError(
                f"{path}: its {key[0]} {key[1]!r} is not the one sarnmt creates; not a database this reads"
            )
    missing = sorted(set(expected) - set(found), key=lambda key: (key[0] != "table", key))  # a table before its index
    if missing:
        raise StoreError(f"{path}: lacks the {missing[0][0]} {missing[0][1]!r}; not a sarnmt human-evaluation database")
