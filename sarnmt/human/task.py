"""Create a ranking task: read the source, the optional reference and the system outputs, check that they are
line-aligned, sample the sentences, fix each sentence's hidden order of the systems, store it all.

The files are read with the reader ``score`` uses (:func:`sarnmt.data.text.reading.read_lines`: plain or ``.gz``
UTF-8, strictly, line endings removed). Every check runs before anything is written, so a failed ``create`` leaves the
database as it was.

**Sampling.** ``sample`` sentences are drawn without replacement from the lines whose source is not empty
(``random.Random(seed)``), and presented in the drawn order. **The seed** is drawn by :mod:`secrets` (63 bits) unless
one is given, and is stored only in the database: the outputs are public, so anyone who knew the seed could draw
the same sample and orders again and unblind every item. A fixed ``seed`` (for a test) does exactly that for
anyone who has it: :data:`FIXED_SEED_WARNING`. **Hidden order.** Each item shows the outputs in an
order drawn for it: for up to 5 systems, every permutation of the systems is used equally often (to within one:
all k! orders in a random sequence, reshuffled when used up), so each system is shown in each slot about equally
often and no position bias favours one system; for more systems, an independent shuffle per item.
"""

from __future__ import annotations

import itertools
import json
import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sarnmt.data.text.reading import read_lines
from sarnmt.errors import InputError
from sarnmt.human import store
from sarnmt.human.errors import StoreError
from sarnmt.human.names import annotator_name, lookalike_warnings

BALANCED_UP_TO = 5


FIXED_SEED_WARNING = (
    "warning: seed={seed} fixes the sample and every item's hidden order: anyone who has the system outputs and "
    "this seed can recompute which system is shown where, which breaks the blinding for them; leave seed= out for "
    "a secret seed"
)
MAX_SEED = 2**63 - 1  # stored as an SQLite integer


class TaskError(InputError):
    """Inputs that cannot make a task (missing or unreadable file, line counts that differ, bad names or sample
    size, a task that already exists); the message names the file, key or value."""


@dataclass(frozen=True)
class TaskSpec:
    """:param name: the task, a language pair such as ``en_de`` (a column of Table 5).
    :param systems: ``(name, path)`` per system; the first is the baseline.
    :param sample: how many sentences; ``None`` for every line with a non-empty source.
    :param seed: the sample's and the hidden orders'; ``None`` (the default): a secret one, drawn by
        :mod:`secrets` and stored only in the database.
    """

    name: str
    source: str
    systems: tuple[tuple[str, str], ...]
    reference: str | None = None
    show_reference: bool = True
    sample: int | None = 50
    seed: int | None = None
    annotators: tuple[str, ...] = field(default=())


def _read(path: str, role: str) -> list[str]:
    try:
        return read_lines(path)
    except FileNotFoundError as err:
        raise TaskError(f"{role}: no such file: {path}") from err
    except InputError as err:  # bytes that are not UTF-8 (naming the line), a folder, a broken gzip file
        raise TaskError(f"{role}: {err}") from err
    except (OSError, EOFError) as err:
        raise TaskError(f"{role}: cannot read {path}: {err}") from err


def read_inputs(spec: TaskSpec) -> tuple[list[str], list[str] | None, list[list[str]]]:
    """The source lines, the reference lines (or ``None``) and each system's lines.

    :raises TaskError: a file is missing or not UTF-8, or its line count differs from the source's (one message
        naming every such file with both counts).
    """
    source = _read(spec.source, "source")
    reference = _read(spec.reference, "reference") if spec.reference else None
    outputs = [_read(path, f"system {name}") for name, path in spec.systems]
    mismatched = []
    if reference is not None and len(reference) != len(source):
        mismatched.append(f"reference {spec.reference} has {len(reference)} lines")
    for (name, path), lines in zip(spec.systems, outputs, strict=True):
        if len(lines) != len(source):
            mismatched.append(f"system {name} ({path}) has {len(lines)} lines")
    if mismatched:
        raise TaskError(f"line counts differ: source {spec.source} has {len(source)} lines; " + "; ".join(mismatched))
    return source, reference, outputs


def check_spec(spec: TaskSpec) -> None:
    """:raises TaskError: on a bad task name, fewer than two systems, repeated system or annotator names, or a
    sample size below 1."""
    if not spec.name or not spec.name.replace("_", "").replace("-", "").isalnum():
        raise TaskError(f"pair must be a name of letters, digits, '_' or '-' (e.g. en_de), got {spec.name!r}")
    names = [name for name, _ in spec.systems]
    if len(names) < 2:
        raise TaskError(f"a ranking needs at least two systems, got {len(names)}: {names}")
    if len(names) > store.MAX_SYSTEMS:
        raise TaskError(f"a ranking shows at most {store.MAX_SYSTEMS} systems (labelled A-Z), got {len(names)}")
    for what, values in (("system", names), ("annotator", annotator_names(spec))):
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise TaskError(f"{what} names repeat: {repeated}")
        if any(not str(v).strip() for v in values):
            raise TaskError(f"{what} names must not be empty: {values}")
    if spec.sample is not None and (not isinstance(spec.sample, int) or spec.sample < 1):
        raise TaskError(f"sample must be a positive number of sentences (or null for all), got {spec.sample!r}")
    if spec.seed is not None and (
        not isinstance(spec.seed, int) or isinstance(spec.seed, bool) or not 0 <= spec.seed <= MAX_SEED
    ):
        raise TaskError(f"seed must be a whole number from 0 to {MAX_SEED} (or left out), got {spec.seed!r}")


def annotator_names(spec: TaskSpec) -> list[str]:
    """The annotators' names as they will be stored (NFC; :func:`sarnmt.human.names.annotator_name`), empty ones
    left for :func:`check_spec` to name.

    :raises TaskError: a name holding a control character, or too long."""
    try:
        return [annotator_name(a) if str(a).strip() else str(a) for a in spec.annotators]
    except StoreError as err:
        raise TaskError(str(err)) from None


def shown_orders(n_items: int, n_systems: int, rng: random.Random) -> list[list[int]]:
    """The order of the systems' outputs for each item (see the module docstring)."""
    if n_systems > BALANCED_UP_TO:
        return [rng.sample(range(n_systems), n_systems) for _ in range(n_items)]
    orders: list[list[int]] = []
    permutations = [list(p) for p in itertools.permutations(range(n_systems))]
    while len(orders) < n_items:
        block = permutations[:]
        rng.shuffle(block)
        orders += block
    return orders[:n_items]


def sample_lines(source: Sequence[str], sample: int | None, rng: random.Random, path: str) -> list[int]:
    """0-based line numbers of the sampled sentences, in presentation order.

    :raises TaskError: fewer non-empty source lines than ``sample``.
    """
    candidates = [k for k, line in enumerate(source) if line.strip()]
    if sample is None:
        sample = len(candidates)
    if sample > len(candidates) or not candidates:
        raise TaskError(f"sample={sample} but source {path} has {len(candidates)} non-empty lines")
    return rng.sample(candidates, sample)


@dataclass(frozen=True)
class CreatedTask:
    name: str
    items: int
    systems: tuple[str, ...]
    tokens: dict[str, str]
    warnings: tuple[str, ...] = ()  # annotator names that look alike (one line each)


def create_task(db: str | Path, spec: TaskSpec) -> CreatedTask:
    """Check the inputs, sample, and store the task (one transaction) in ``db`` (created if missing).

    :returns: the task's name, item count, systems and each annotator's sign-in token.
    :raises TaskError: see :func:`check_spec`, :func:`read_inputs`, :func:`sample_lines`; the task exists.
    """
    check_spec(spec)
    source, reference, outputs = read_inputs(spec)
    seed = secrets.randbits(63) if spec.seed is None else spec.seed
    rng = random.Random(seed)
    lines = sample_lines(source, spec.sample, rng, spec.source)
    orders = shown_orders(len(lines), len(spec.systems), rng)
    try:
        conn = store.connect(db, create=True)
    except StoreError as err:
        raise TaskError(str(err)) from err
    tokens = {}
    try:
        with store.transaction(conn):
            if spec.name in store.task_names(conn):
                raise TaskError(f"task {spec.name!r} already exists in {db}; choose another pair= or db=")
            task_id = conn.execute(
                "INSERT INTO task (name, source_path, reference_path, show_reference, lines, sample_size, seed, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    spec.name,
                    spec.source,
                    spec.reference,
                    int(bool(spec.reference) and spec.show_reference),
                    len(source),
                    len(lines),
                    seed,
                    store.now(),
                ),
            ).lastrowid
            conn.executemany(
                "INSERT INTO system (task_id, idx, name, path) VALUES (?, ?, ?, ?)",
                [(task_id, k, name, path) for k, (name, path) in enumerate(spec.systems)],
            )
            for position, (line, order) in enumerate(zip(lines, orders, strict=True), start=1):
                item_id = conn.execute(
                    "INSERT INTO item (task_id, position, line, source, reference, shown_order) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        task_id,
                        position,
                        line + 1,
                        source[line],
                        reference[line] if reference else None,
                        json.dumps(order),
                    ),
                ).lastrowid
                conn.executemany(
                    "INSERT INTO output (item_id, system_idx, text) VALUES (?, ?, ?)",
                    [(item_id, k, out[line]) for k, out in enumerate(outputs)],
                )
            for name in annotator_names(spec):
                tokens[name] = store.add_annotator(conn, task_id, name, new_token()).token
    finally:
        conn.close()
    warnings = tuple(lookalike_warnings(list(tokens)))
    return CreatedTask(spec.name, len(lines), tuple(n for n, _ in spec.systems), tokens, warnings)


def new_token() -> str:
    """A sign-in token: 16 random bytes, URL-safe."""
    return secrets.token_urlsafe(16)
