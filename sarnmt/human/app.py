"""The ranking page's web app: a standard-library threaded HTTP server over the store, serving one static page
(``static/``: plain HTML, CSS and JavaScript, no build step) and a small JSON API.

============================  ==============================================================================
``GET /``                     the page; ``/static/app.js``, ``/static/style.css`` its script and style
``GET /api/config``           the sign-in mode (``token`` or ``name``) and the tasks (language pairs)
``POST /api/signin``          ``{"who": name or token, "task": pair}`` → the annotator's token
``GET /api/next``             the first item this annotator has not judged (or ``{"done": true}``)
``GET /api/item?position=N``  the item at position N, with this annotator's judgement of it
``POST /api/judgement``       ``{"item", "status", "ranks", "comment", "shown_at"}`` → saved, and the next item
============================  ==============================================================================

The API calls after sign-in carry the token in the ``X-Annotator-Token`` header. **Blinding**: an item is sent as
its source, its reference (when the task shows it) and the outputs in the item's hidden order; no response names
a system or its file, and a judgement names outputs only by their slot. **Escaping**: the page inserts every text
with ``textContent``, and the page is served with a Content-Security-Policy that runs no inline script, so an
output holding ``<script>`` shows as text. Errors are JSON ``{"error": message}`` with status 400 (refused, nothing
stored), 401 (unknown annotator: sign in again), 404 or 413.

Sign-in (``signin=``): ``token`` (default) accepts only the tokens ``create`` printed; ``name`` also accepts a name,
registering it in the chosen task the first time: for a room of trusted annotators on one machine.
"""

from __future__ import annotations

import json
import socket
import sqlite3
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from sarnmt.human import store
from sarnmt.human.task import new_token

STATIC = Path(__file__).with_name("static")
FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/style.css": ("style.css", "text/css; charset=utf-8"),
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
MAX_BODY = 64 * 1024
SIGNIN_MODES = ("token", "name")


class ServeError(ValueError):
    """The app cannot start: no database or no task in it, an unknown sign-in mode, an address it cannot bind."""


class ApiError(Exception):
    def __init__(self, status: HTTPStatus, message: str):
        super().__init__(message)
        self.status = status


class RankingServer(ThreadingHTTPServer):
    """The app: ``serve_forever()`` to run it, ``url`` for its address (``port=0`` picks a free port)."""

    daemon_threads = True

    def __init__(self, db: str | Path, host: str = "127.0.0.1", port: int = 8000, signin: str = "token"):
        if signin not in SIGNIN_MODES:
            raise ServeError(f"signin must be one of {', '.join(SIGNIN_MODES)}, got {signin!r}")
        try:
            conn = store.connect(db)
        except store.StoreError as err:
            raise ServeError(str(err)) from err
        try:
            if not store.task_names(conn):
                raise ServeError(f"{db} holds no task yet (python -m sarnmt.human create ...)")
        finally:
            conn.close()
        self.db, self.signin = Path(db), signin
        if ":" in host:
            self.address_family = socket.AF_INET6
        try:
            super().__init__((host, port), Handler)
        except (OSError, OverflowError) as err:  # in use, not an address of this machine, port out of range
            raise ServeError(f"cannot listen on {host}:{port}: {getattr(err, 'strerror', None) or err}") from err

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in str(host) else host}:{port}/"


class Handler(BaseHTTPRequestHandler):
    server: RankingServer
    server_version = "sarnmt-human"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        """Quiet: a line per request would bury the server's own messages."""

    # -- responses -------------------------------------------------------------------------------------------
    def _send(self, status: HTTPStatus, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: HTTPStatus, data: dict) -> None:
        self._send(status, json.dumps(data, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def _handle(self, route) -> None:
        try:
            conn = store.connect(self.server.db)
        except store.StoreError as err:
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(err)})
            return
        try:
            self._json(HTTPStatus.OK, route(conn))
        except ApiError as err:
            self._json(err.status, {"error": str(err)})
        except store.UnknownAnnotator as err:
            self._json(HTTPStatus.UNAUTHORIZED, {"error": str(err)})
        except store.StoreError as err:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(err)})
        except sqlite3.Error as err:
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"database error, nothing stored: {err}"})
        finally:
            conn.close()

    # -- requests --------------------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        if url.path in FILES:
            name, content_type = FILES[url.path]
            self._send(HTTPStatus.OK, (STATIC / name).read_bytes(), content_type, {"Content-Security-Policy": CSP})
        elif url.path == "/api/config":
            self._handle(lambda conn: {"signin": self.server.signin, "tasks": store.task_names(conn)})
        elif url.path == "/api/next":
            self._handle(lambda conn: self._payload(conn, self._annotator(conn), None))
        elif url.path == "/api/item":
            position = parse_qs(url.query).get("position", [""])[0]
            if not position.isdigit():
                self._json(HTTPStatus.BAD_REQUEST, {"error": f"position must be a number, got {position!r}"})
                return
            self._handle(lambda conn: self._payload(conn, self._annotator(conn), int(position)))
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path}"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        path = urlsplit(self.path).path
        routes = {"/api/signin": self._signin, "/api/judgement": self._judgement}
        if path not in routes:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {path}"})
            return
        try:
            body = self._body()
        except ApiError as err:
            self._json(err.status, {"error": str(err)})
            return
        self._handle(lambda conn: routes[path](conn, body))

    def _body(self) -> dict:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise ApiError(HTTPStatus.BAD_REQUEST, "Content-Length is not a number") from None
        if length > MAX_BODY or length < 0:
            self.close_connection = True
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY} bytes")
        try:
            data = json.loads(self.rfile.read(length) or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"request body is not JSON: {err}") from err
        if not isinstance(data, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "request body must be a JSON object")
        return data

    def _annotator(self, conn: sqlite3.Connection) -> store.Annotator:
        token = self.headers.get("X-Annotator-Token")
        if not token:
            raise ApiError(HTTPStatus.UNAUTHORIZED, "sign in first")
        return store.annotator_by_token(conn, token)

    def _payload(self, conn: sqlite3.Connection, annotator: store.Annotator, position: int | None) -> dict:
        if position is None:
            position = store.next_position(conn, annotator)
        head = {"annotator": annotator.name, "task": annotator.task, "progress": store.progress(conn, annotator)}
        if position is None:
            return {**head, "done": True}
        return {**head, "done": False, **store.item_view(conn, annotator, position), "shown_at": store.now()}

    def _signin(self, conn: sqlite3.Connection, body: dict) -> dict:
        who, task = body.get("who"), body.get("task")
        if not isinstance(who, str) or not who.strip():
            raise ApiError(HTTPStatus.BAD_REQUEST, "type your name or token")
        try:
            annotator = store.annotator_by_token(conn, who.strip())
        except store.UnknownAnnotator:
            if self.server.signin != "name":
                raise ApiError(HTTPStatus.UNAUTHORIZED, "unknown token: use the token you were given") from None
            annotator = self._by_name(conn, who.strip(), task)
        return {"token": annotator.token, "annotator": annotator.name, "task": annotator.task}

    def _by_name(self, conn: sqlite3.Connection, name: str, task: object) -> store.Annotator:
        tasks = store.task_names(conn)
        if task is None and len(tasks) == 1:
            task = tasks[0]
        if task not in tasks:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"choose a task: one of {', '.join(tasks)}")
        with store.transaction(conn):
            task_id = store.task_row(conn, task)["id"]
            return store.annotator_by_name(conn, task_id, name) or store.add_annotator(conn, task_id, name, new_token())

    def _judgement(self, conn: sqlite3.Connection, body: dict) -> dict:
        token = self.headers.get("X-Annotator-Token")
        if not token:
            raise ApiError(HTTPStatus.UNAUTHORIZED, "sign in first")
        unknown = set(body) - {"item", "status", "ranks", "comment", "shown_at"}
        if unknown:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"unknown fields {sorted(unknown)}")
        shown_at = body.get("shown_at")
        if shown_at is not None and not isinstance(shown_at, str):
            raise ApiError(HTTPStatus.BAD_REQUEST, f"shown_at must be a time, got {shown_at!r}")
        annotator = store.record_judgement(
            conn, token, body.get("item"), body.get("status"), body.get("ranks"), body.get("comment", ""), shown_at
        )
        return {"saved": True, "next": self._payload(conn, annotator, None)}
