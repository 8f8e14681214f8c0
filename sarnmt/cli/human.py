"""``sarnmt human <command> [key=value ...]``: the human evaluation's commands (Table 5), each a Hydra application
(``sarnmt/conf/human_<command>.yaml``) over the pure functions of :mod:`sarnmt.human`: :func:`create`,
:func:`serve`, :func:`export_command` and :func:`annotators`. :data:`sarnmt.cli.HUMAN` lists them in the one command
table, which gives ``sarnmt human --help`` its text and turns ``--host H`` / ``--port P`` into ``host=H`` / ``port=P``.
A user's mistake ends in one ``error: ...`` line and exit status 2, through :func:`sarnmt.errors.reported` (every
error of the package's own is a :class:`~sarnmt.errors.UserError`).
"""

from __future__ import annotations

import signal
import sys

from omegaconf import DictConfig, OmegaConf

from sarnmt.errors import reported
from sarnmt.evaluation.system_names import system_names
from sarnmt.human import store
from sarnmt.human.app import RankingServer
from sarnmt.human.export import export
from sarnmt.human.names import lookalike_warnings, printable_name
from sarnmt.human.task import FIXED_SEED_WARNING, TaskError, TaskSpec, create_task, new_token
from sarnmt.utils.compose import hydra_main

KNOWN_SEED_WARNING = (
    "warning: task {task} was created with seed 1234, the former default: anyone who has its system outputs can "
    "recompute every item's hidden order; create it again (without seed=) before annotating, if you can"
)


def _require(cfg: DictConfig, command: str) -> None:
    """:raises TaskError: naming every mandatory key (``???``) left unset."""
    missing = [key for key in cfg if OmegaConf.is_missing(cfg, key)]
    if missing:
        keys = ", ".join(f"{key}=" for key in missing)
        raise TaskError(f"missing {keys} (python -m sarnmt.human {command} --help lists the keys)")


def _int(value, key: str) -> int:
    """``value`` as an integer: an int, or ASCII digits with an optional ``-`` before them."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = value if isinstance(value, str) else ""
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 30):
        raise TaskError(f"{key} must be an integer, got {value!r}")
    return int(text)


def _list(value) -> list:
    return [] if value is None else [value] if isinstance(value, str | int) else list(value)


@hydra_main("human_create")
def create(cfg: DictConfig) -> None:
    with reported():
        _require(cfg, "create")
        hyps = [str(h) for h in _list(cfg.hyps)]
        names = [str(n) for n in _list(cfg.names)] if cfg.names is not None else system_names(hyps)
        if len(names) != len(hyps):
            raise TaskError(f"names has {len(names)} entries but hyps has {len(hyps)}")
        if cfg.names is None and len(set(names)) < len(names):
            raise TaskError(f"the file names do not tell the systems apart ({', '.join(names)}): give names=[...]")
        spec = TaskSpec(
            name=str(cfg.pair),
            source=str(cfg.source),
            reference=None if cfg.ref is None else str(cfg.ref),
            show_reference=bool(cfg.show_ref),
            systems=tuple(zip(names, hyps, strict=True)),
            sample=cfg.sample,
            seed=None if cfg.seed is None else _int(cfg.seed, "seed"),
            annotators=tuple(str(a) for a in _list(cfg.annotators)),
        )
        created = create_task(cfg.db, spec)
    if spec.seed is not None:
        print(FIXED_SEED_WARNING.format(seed=spec.seed), file=sys.stderr, flush=True)
    for warning in created.warnings:
        print(warning, file=sys.stderr, flush=True)
    print(
        f"task {created.name}: {created.items} sentences of {cfg.source}, systems {', '.join(created.systems)} "
        f"(the outputs of each sentence in a hidden order), stored in {cfg.db}"
    )
    _print_tokens(created.tokens, str(cfg.host), _int(cfg.port, "port"))
    where = (
        ""
        if (str(cfg.host), _int(cfg.port, "port")) == ("127.0.0.1", 8000)
        else f" --host {cfg.host} --port {cfg.port}"
    )
    print(f"next: python -m sarnmt.human serve db={cfg.db}{where}")


def _print_tokens(tokens: dict[str, str], host: str, port: int) -> None:
    if tokens:
        print(
            f"sign-in tokens (give each annotator theirs; `annotators` lists them again), with links for serve on "
            f"{host}:{port} (host= and port= here if it will listen elsewhere):"
        )
    for name, token in tokens.items():
        print(f"  {printable_name(name)}\t{token}\thttp://{host}:{port}/#token={token}")


@hydra_main("human_annotators")
def annotators(cfg: DictConfig) -> None:
    with reported():
        conn = store.connect(cfg.db, write=bool(_list(cfg.add)))
        try:
            tasks = store.task_names(conn) if cfg.pair is None else [str(cfg.pair)]
            if _list(cfg.add) and len(tasks) != 1:
                raise TaskError(f"add= needs one task: give pair= (tasks: {', '.join(tasks)})")
            for task in tasks:
                task_id = store.task_row(conn, task)["id"]
                names = [a.name for a in store.annotators(conn, task_id)]
                had = len(names)
                with store.transaction(conn):
                    for name in _list(cfg.add):
                        names.append(store.add_annotator(conn, task_id, str(name), new_token()).name)
                for warning in lookalike_warnings(names, had):
                    print(warning, file=sys.stderr, flush=True)
                print(f"task {task}:")
                tokens = {a.name: a.token for a in store.annotators(conn, task_id)}
                _print_tokens(tokens, str(cfg.host), _int(cfg.port, "port"))
        finally:
            conn.close()


@hydra_main("human_serve")
def serve(cfg: DictConfig) -> None:
    with reported():
        server = RankingServer(cfg.db, str(cfg.host), _int(cfg.port, "port"), str(cfg.signin))
    for task in server.known_seed:
        print(KNOWN_SEED_WARNING.format(task=task), file=sys.stderr, flush=True)
    conn = store.connect(cfg.db, write=False)
    try:
        tasks = ", ".join(store.task_names(conn))
    finally:
        conn.close()
    print(f"serving {cfg.db} (tasks: {tasks}; sign-in by {cfg.signin}) at {server.url}  (Ctrl-C stops)", flush=True)
    if str(cfg.host) not in ("127.0.0.1", "localhost", "::1"):
        print(f"listening on {cfg.host}: anyone who can reach this machine can open the page", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill PID` stops it as Ctrl-C does
    try:
        server.serve_forever()  # uvicorn stops on SIGINT / SIGTERM, then raises it again here
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("stopped", flush=True)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@hydra_main("human_export")
def export_command(cfg: DictConfig) -> None:
    with reported():
        files = export(cfg.db, cfg.output_dir)
    print(files["table5.md"])
    if cfg.output_dir is not None:
        print(f"written: {cfg.output_dir}/{{{','.join(files)}}}")
