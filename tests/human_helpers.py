"""Small line-aligned files for the human-evaluation tests: a source, a reference and three systems' outputs whose
texts never contain a system's name, so a test can tell from a page which system an output came from only through
the database."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sarnmt.human.app import RankingServer
from sarnmt.human.task import TaskSpec, create_task

SYSTEMS = ("baseline", "mean_residual", "self_attentive_content")
SOURCE = [
    "The old bridge was closed for repairs last winter.",
    "She has lived in this small town for twenty years.",
    "We will meet again at the station tomorrow morning.",
    "The children were playing in the garden after school.",
    "Nobody knew why the train had stopped in the middle of the field.",
    "He forgot his umbrella, so he got wet on the way home.",
]
REFERENCE = [
    "Die alte Brücke war im letzten Winter wegen Reparaturen gesperrt.",
    "Sie lebt seit zwanzig Jahren in dieser kleinen Stadt.",
    "Wir treffen uns morgen früh wieder am Bahnhof.",
    "Die Kinder spielten nach der Schule im Garten.",
    "Niemand wusste, warum der Zug mitten auf dem Feld angehalten hatte.",
    "Er hat seinen Regenschirm vergessen, also wurde er auf dem Heimweg nass.",
]
OUTPUTS = {
    "baseline": [
        "Die alte Brücke wurde letzten Winter für Reparaturen geschlossen.",
        "Sie hat in dieser kleinen Stadt für zwanzig Jahre gelebt.",
        "Wir werden uns morgen am Morgen wieder am Bahnhof treffen.",
        "Die Kinder spielten im Garten nach Schule.",
        "Niemand wusste, warum der Zug in der Mitte des Feldes.",
        "Er vergaß seinen Regenschirm, so er wurde nass nach Hause.",
    ],
    "mean_residual": [
        "Die alte Brücke war letzten Winter wegen Reparaturen geschlossen.",
        "Sie lebt seit zwanzig Jahren in dieser kleinen Stadt.",
        "Wir treffen uns morgen früh wieder am Bahnhof.",
        "Die Kinder spielten nach der Schule im Garten.",
        "Niemand wusste, warum der Zug mitten im Feld gehalten hatte.",
        'Er vergaß seinen Schirm <script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">',
    ],
    "self_attentive_content": [
        "Die alte Brücke war im letzten Winter wegen Reparaturen gesperrt.",
        "Sie wohnt seit zwanzig Jahren in dieser kleinen Stadt.",
        "Wir sehen uns morgen früh wieder am Bahnhof.",
        "Nach der Schule spielten die Kinder im Garten.",
        "Niemand wusste, warum der Zug mitten auf dem Feld angehalten hatte.",
        "Er hatte seinen Regenschirm vergessen und wurde auf dem Heimweg nass.",
    ],
}
SCRIPT_LINE = 6  # 1-based: the line whose mean_residual output holds HTML and a script


def write_inputs(folder: Path) -> dict[str, Path]:
    """The source, reference and each system's file (named ``out.<k>.de``: the file names hold no system name)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"source": folder / "test.en", "reference": folder / "test.de"}
    paths["source"].write_text("".join(s + "\n" for s in SOURCE), encoding="utf-8")
    paths["reference"].write_text("".join(s + "\n" for s in REFERENCE), encoding="utf-8")
    for k, name in enumerate(SYSTEMS):
        paths[name] = folder / f"out.{k}.de"
        paths[name].write_text("".join(s + "\n" for s in OUTPUTS[name]), encoding="utf-8")
    return paths


def make_task(db: Path, folder: Path, pair: str = "en_de", annotators=("ana", "ben"), **spec) -> dict[str, str]:
    """Create the task of all six lines with the three systems; :returns: the annotators' tokens."""
    paths = write_inputs(folder)
    spec = {"sample": None, "seed": 7, **spec}
    created = create_task(
        db,
        TaskSpec(
            name=pair,
            source=str(paths["source"]),
            reference=str(paths["reference"]),
            systems=tuple((name, str(paths[name])) for name in SYSTEMS),
            annotators=tuple(annotators),
            **spec,
        ),
    )
    return created.tokens


def shown_orders(db: Path, pair: str = "en_de") -> dict[int, list[str]]:
    """item id → system names in the order shown."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT i.id, i.shown_order FROM item i JOIN task t ON t.id = i.task_id WHERE t.name = ?", (pair,)
        ).fetchall()
    return {item: [SYSTEMS[k] for k in json.loads(order)] for item, order in rows}


def slot_ranks(order: list[str], by_system: dict[str, int]) -> list[int]:
    """The ranks as the page sends them (per slot shown) for ranks given per system."""
    return [by_system[name] for name in order]


@contextmanager
def running(db: Path, signin: str = "token", **limits: float) -> Iterator[RankingServer]:
    """The app on 127.0.0.1 at a free port, in a thread; ``limits``: its timeouts (``idle_seconds``, ...)."""
    server = RankingServer(db, "127.0.0.1", 0, signin, **limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
