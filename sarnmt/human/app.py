"""The ranking page's web app: a standard-library HTTP server with a fixed pool of threads
(:mod:`sarnmt.human.server`) over the store, serving one static page (``static/``: plain HTML, CSS and JavaScript, no
build step) and a small JSON API.

============================  ==============================================================================
``GET /``                     the page; ``/static/app.js``, ``/static/style.css`` its script and style
``POST /api/signin``          ``{"who": token}`` → the annotator's name and task (the token checked)
``GET /api/next``             the first item this annotator has not judged (or ``{"done": true}``)
``GET /api/item?position=N``  the item at position N, with this annotator's judgement of it
``POST /api/judgement``       ``{"item", "status", "ranks", "comment"}`` → saved, and the next item
============================  ==============================================================================

The API calls after sign-in carry the token in the ``X-Annotator-Token`` header. Annotators sign in only with the
tokens ``create`` (or ``annotators add=``) printed. **Blinding**: an item is sent as its source, its reference (when
the task shows it) and the outputs in the item's hidden order; no response names a system or its file, and a
judgement names outputs only by their slot. **Times**: when an item is served, the server notes the time for this
annotator and item; the judgement stores that as ``shown_at`` (a client cannot set it; ``null`` when the server was
restarted in between). **Escaping**: the page inserts every text with ``textContent``, and the page is served with a
Content-Security-Policy that runs no inline script, so an output holding ``<script>`` shows as text. **Requests**
are checked by :mod:`sarnmt.human.validate` before use. Errors are JSON ``{"error": message}`` with status 400
(refused, nothing stored), 401 (unknown annotator: sign in again), 404, 413 or 503 (the database is busy), each
logged as one line on stderr.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlsplit

from sarnmt.errors import InputError
from sarnmt.human import store
from sarnmt.human.handler import PooledHandler
from sarnmt.human.server import PooledHTTPServer
from sarnmt.human.validate import ApiError, fields, json_object, query, read_body, whole_number

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
SIGNIN_MODES = ("token",)
NAME_SIGNIN_GONE = (
    "signin=name is no longer offered: it gave whoever typed an annotator's name that annotator's token; register "
    "annotators with `python -m sarnmt.human annotators db=... pair=... add=[name,...]`, which prints their tokens"
)
MAX_TOKEN = 100
FORMER_DEFAULT_SEED = 1234


class ServeError(InputError):
    """The app cannot start: no database or no task in it, an unknown sign-in mode, an address it cannot bind."""


class RankingServer(PooledHTTPServer):
    """The app: ``serve_forever()`` to run it, ``url`` for its address (``port=0`` picks a free port); the keyword
    arguments size its threads and timeouts (:class:`~sarnmt.human.server.PooledHTTPServer`)."""

    def __init__(self, db: str | Path, host: str = "127.0.0.1", port: int = 8000, signin: str = "token", **pool: float):
        if signin == "name":
            raise ServeError(NAME_SIGNIN_GONE)
        if signin not in SIGNIN_MODES:
            raise ServeError(f"signin must be one of {', '.join(SIGNIN_MODES)}, got {signin!r}")
        try:
            conn = store.connect(db)
        except store.StoreError as err:
            raise ServeError(str(err)) from err
        try:
            if not store.task_names(conn):
                raise ServeError(f"{db} holds no task yet (python -m sarnmt.human create ...)")
            rows = conn.execute("SELECT name FROM task WHERE seed = ?", (FORMER_DEFAULT_SEED,))
            self.known_seed = [r["name"] for r in rows]  # tasks whose hidden orders anyone could recompute
        finally:
            conn.close()
        self.db, self.signin = Path(db), signin
        self.served: dict[tuple[int, int], str] = {}  # (annotator, item) → when the item was last sent to them
        self.served_lock = threading.Lock()
        if ":" in host:
            self.address_family = socket.AF_INET6
        try:
            super().__init__((host, port), Handler, **pool)
        except (OSError, OverflowError) as err:  # in use, not an address of this machine, port out of range
            raise ServeError(f"cannot listen on {host}:{port}: {getattr(err, 'strerror', None) or err}") from err

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in str(host) else host}:{port}/"


class Handler(PooledHandler):
    server: RankingServer
    server_version = "sarnmt-human"

    # -- responses -------------------------------------------------------------------------------------------
    def send_body(self, status, body, content_type, headers=None) -> None:  # every answer goes through _send
        self._send(status, body, content_type, headers)

    def _send(self, status: HTTPStatus, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", **(extra or {})}
        PooledHandler.send_body(self, status, body, content_type, headers)

    def _handle(self, route) -> None:
        try:
            conn = store.connect(self.server.db)
        except store.StoreError as err:
            self.send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(err)})
            return
        try:
            self.send_json(HTTPStatus.OK, route(conn))
        except ApiError as err:
            self.send_json(err.status, {"error": str(err)})
        except store.UnknownAnnotator as err:
            self.send_json(HTTPStatus.UNAUTHORIZED, {"error": str(err)})
        except store.StoreError as err:
            self.send_json(HTTPStatus.BAD_REQUEST, {"error": str(err)})
        except sqlite3.Error as err:
            self.send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"database error, nothing stored: {err}"})
        finally:
            conn.close()

    # -- requests --------------------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.guarded(self._get)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.guarded(self._post)

    def _get(self) -> None:
        url = urlsplit(self.path)
        if self.headers.get("Content-Length", "0").strip() != "0" or self.headers.get("Transfer-Encoding"):
            self.close_connection = True  # a GET with a body: answered, but its body is not read as a request
        try:
            if url.path in FILES:
                name, content_type = FILES[url.path]
                self._send(HTTPStatus.OK, (STATIC / name).read_bytes(), content_type, {"Content-Security-Policy": CSP})
            elif url.path == "/api/next":
                query(url.query, ())
                self._handle(lambda conn: self._payload(conn, self._annotator(conn), None))
            elif url.path == "/api/item":
                given = query(url.query, ("position",))
                position = whole_number(given.get("position", ""), "position")
                self._handle(lambda conn: self._payload(conn, self._annotator(conn), position))
            else:
                self.send_json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path[:200]}"})
        except ApiError as err:
            self.send_json(err.status, {"error": str(err)})

    def _post(self) -> None:
        path = urlsplit(self.path).path
        routes = {"/api/signin": self._signin, "/api/judgement": self._judgement}
        if path not in routes:
            self.close_connection = True  # its body is not read
            self.send_json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {path[:200]}"})
            return
        try:
            raw = read_body(self.headers, self.rfile)
        except ApiError as err:
            self.close_connection = self.close_connection or err.close
            self.send_json(err.status, {"error": str(err)})
            return
        try:
            body = json_object(raw)
        except ApiError as err:
            self.send_json(err.status, {"error": str(err)})
            return
        self._handle(lambda conn: routes[path](conn, body))

    def _token(self) -> str:
        token = self.headers.get("X-Annotator-Token")
        if not token:
            raise ApiError(HTTPStatus.UNAUTHORIZED, "sign in first")
        if len(token) > MAX_TOKEN:
            raise store.UnknownAnnotator("unknown annotator: no annotator has this token (sign in again)")
        return token

    def _annotator(self, conn: sqlite3.Connection) -> store.Annotator:
        return store.annotator_by_token(conn, self._token())

    def _payload(self, conn: sqlite3.Connection, annotator: store.Annotator, position: int | None) -> dict:
        if position is None:
            position = store.next_position(conn, annotator)
        head = {"annotator": annotator.name, "task": annotator.task, "progress": store.progress(conn, annotator)}
        if position is None:
            return {**head, "done": True}
        view = store.item_view(conn, annotator, position)
        with self.server.served_lock:
            self.server.served[annotator.id, view["item"]] = store.now()
        return {**head, "done": False, **view}

    def _signin(self, conn: sqlite3.Connection, body: dict) -> dict:
        who = fields(body, ("who",)).get("who")
        if not isinstance(who, str) or not who.strip():
            raise ApiError(HTTPStatus.BAD_REQUEST, "type your token")
        if len(who) > MAX_TOKEN:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"a token has at most {MAX_TOKEN} characters")
        try:
            annotator = store.annotator_by_token(conn, who.strip())
        except store.UnknownAnnotator:
            raise ApiError(HTTPStatus.UNAUTHORIZED, "unknown token: use the token you were given") from None
        return {"token": annotator.token, "annotator": annotator.name, "task": annotator.task}

    def _judgement(self, conn: sqlite3.Connection, body: dict) -> dict:
        token = self._token()
        hint = {"shown_at": "the server notes when it sent the item; leave shown_at out"}
        fields(body, ("item", "status", "ranks", "comment"), hint)
        annotator = store.annotator_by_token(conn, token)
        item = body.get("item")
        with self.server.served_lock:
            shown_at = self.server.served.get((annotator.id, item)) if isinstance(item, int) else None
        annotator = store.record_judgement(
            conn, token, item, body.get("status"), body.get("ranks"), body.get("comment", ""), shown_at
        )
        return {"saved": True, "next": self._payload(conn, annotator, None)}
