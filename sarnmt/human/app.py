"""The ranking page's web app: a Starlette app over the store, served by uvicorn (:mod:`sarnmt.human.server`, which
says why this stack), serving one static page (``static/``: plain HTML, CSS and JavaScript, no build step) and a
small JSON API.

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
restarted in between). **Escaping**: the page inserts every text with ``textContent``, and every answer carries a
Content-Security-Policy that runs no inline script (with ``nosniff``, ``no-store``, no framing, no referrer:
:mod:`sarnmt.human.guard`), so an output holding ``<script>`` shows as text. **Requests** are checked by
:mod:`sarnmt.human.validate` before use; the framing (request line, headers, ``Content-Length``, chunks) by h11 before
the app sees it, and what h11 lets through that the app refuses by the guard. Errors are JSON
``{"error": message}`` with status 400 (refused, nothing stored), 401 (unknown annotator: sign in again), 404, 405,
408 (a body that did not arrive in time), 413, 431 or 503 (the database is busy, read-only or gone), each logged as
one line on stderr. The database work of a request runs in a worker thread (SQLite is blocking); reading a request
never holds one.

**One server per database**: :class:`RankingServer` holds the database's serve lock
(:mod:`sarnmt.human.serve_lock`) while it runs; a second one on the same database is refused.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import threading
from http import HTTPStatus
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from sarnmt.human import store
from sarnmt.human.errors import StoreError, UnknownAnnotator
from sarnmt.human.guard import SECURITY_HEADERS, Guard, json_response, refused
from sarnmt.human.serve_lock import ServeError, take_lock
from sarnmt.human.server import Limits, Server
from sarnmt.human.validate import MAX_BODY, ApiError, fields, json_object, query, whole_number

STATIC = Path(__file__).with_name("static")
FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/style.css": ("style.css", "text/css; charset=utf-8"),
    "/static/favicon.svg": ("favicon.svg", "image/svg+xml"),
    "/favicon.ico": ("favicon.svg", "image/svg+xml"),  # asked for by browsers that do not read the page's link
}
SIGNIN_MODES = ("token",)
NAME_SIGNIN_GONE = (
    "signin=name is no longer offered: it gave whoever typed an annotator's name that annotator's token; register "
    "annotators with `python -m sarnmt.human annotators db=... pair=... add=[name,...]`, which prints their tokens"
)
MAX_TOKEN = 100
FORMER_DEFAULT_SEED = 1234


class RankingServer(Server):
    """The app: ``serve_forever()`` to run it, ``url`` for its address (``port=0`` picks a free port); ``limits``
    keywords (``idle_seconds``, ``request_seconds``) bound how long a client may take
    (:class:`~sarnmt.human.server.Limits`). Holds the database's serve lock until :meth:`server_close`."""

    def __init__(self, db: str | Path, host: str = "127.0.0.1", port: int = 8000, signin: str = "token", **limits):
        if signin == "name":
            raise ServeError(NAME_SIGNIN_GONE)
        if signin not in SIGNIN_MODES:
            raise ServeError(f"signin must be one of {', '.join(SIGNIN_MODES)}, got {signin!r}")
        try:
            conn = store.connect(db)
        except StoreError as err:
            raise ServeError(str(err)) from err
        try:
            if not store.task_names(conn):
                raise ServeError(f"{db} holds no task yet (python -m sarnmt.human create ...)")
            rows = conn.execute("SELECT name FROM task WHERE seed = ?", (FORMER_DEFAULT_SEED,))
            self.known_seed = [r["name"] for r in rows]  # tasks whose hidden orders anyone could recompute
        finally:
            conn.close()
        self.db, self.signin = Path(db), signin
        self.identity = _identity(self.db)
        self.served: dict[tuple[int, int], str] = {}  # (annotator, item) → when the item was last sent to them
        self.served_lock = threading.Lock()
        self._lock_fd = take_lock(self.db)
        try:
            sock = _listen(host, port)
        except BaseException:
            os.close(self._lock_fd)
            raise
        app = Starlette(
            routes=[
                *(Route(path, self._file, methods=["GET"]) for path in FILES),
                Route("/api/next", self._next, methods=["GET"]),
                Route("/api/item", self._item, methods=["GET"]),
                Route("/api/signin", self._signin, methods=["POST"]),
                Route("/api/judgement", self._judgement, methods=["POST"]),
            ],
            exception_handlers={HTTPException: self._http_error},
        )
        app.router.redirect_slashes = False  # /api/next/ is no page (404), not a redirect
        limits = Limits(**limits, headers=SECURITY_HEADERS)
        super().__init__(Guard(app, limits.max_head), sock, limits)
        self.server_address = sock.getsockname()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in str(host) else host}:{port}/"

    def server_close(self) -> None:
        super().server_close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock; the file stays (removing it would race a new serve)
            self._lock_fd = None

    # -- the store ---------------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        """A connection to the database this server was started on.

        :raises ApiError: (503) it was deleted, moved or replaced since, or cannot be opened."""
        if _identity(self.db) != self.identity:
            raise ApiError(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"the database {self.db} is gone (deleted, moved or replaced while being served): nothing stored; "
                "put it back and restart serve",
            )
        try:
            return store.connect(self.db, check=False)  # checked once, when serving began (same file: identity)
        except StoreError as err:
            raise ApiError(HTTPStatus.SERVICE_UNAVAILABLE, f"{err}: nothing stored") from err

    def _handle(self, route) -> tuple[int, dict]:
        """``route(conn)`` in a worker thread's connection: the answer's status and JSON."""
        try:
            conn = self._connect()
        except ApiError as err:
            return err.status, {"error": str(err)}
        try:
            return HTTPStatus.OK, route(conn)
        except ApiError as err:
            return err.status, {"error": str(err)}
        except UnknownAnnotator as err:
            return HTTPStatus.UNAUTHORIZED, {"error": str(err)}
        except StoreError as err:
            return HTTPStatus.BAD_REQUEST, {"error": str(err)}
        except sqlite3.Error as err:
            if "readonly" in str(err):
                message = f"the database {self.db} cannot be written (read-only): nothing stored"
            else:
                message = f"database error, nothing stored: {err}"
            return HTTPStatus.SERVICE_UNAVAILABLE, {"error": message}
        finally:
            conn.close()

    async def _answer(self, request: Request, route) -> Response:
        status, data = await run_in_threadpool(self._handle, route)
        if status >= 400:
            return refused(request, status, data["error"])
        return json_response(status, data)

    # -- routes ------------------------------------------------------------------------------------------------
    async def _http_error(self, request: Request, exc: HTTPException) -> Response:
        """The router's refusals (no such page, a method the page does not take) as JSON."""
        if exc.status_code == 404:
            message = f"no such page: {request.url.path[:200]}"
        elif exc.status_code == 405:
            message = f"{request.method[:20]} is not allowed on {request.url.path[:200]}"
        else:
            message = exc.detail
        response = refused(request, exc.status_code, message, close=True)
        response.headers.update(exc.headers or {})
        return response

    async def _file(self, request: Request) -> Response:
        name, content_type = FILES[request.url.path]
        return Response((STATIC / name).read_bytes(), media_type=content_type)

    async def _next(self, request: Request) -> Response:
        try:
            query(request.url.query, ())
            token = _token(request)
        except ApiError as err:
            return refused(request, err.status, str(err))
        return await self._answer(request, lambda conn: self._payload(conn, store.annotator_by_token(conn, token)))

    async def _item(self, request: Request) -> Response:
        try:
            given = query(request.url.query, ("position",))
            position = whole_number(given.get("position", ""), "position")
            token = _token(request)
        except ApiError as err:
            return refused(request, err.status, str(err))
        return await self._answer(
            request, lambda conn: self._payload(conn, store.annotator_by_token(conn, token), position)
        )

    async def _signin(self, request: Request) -> Response:
        try:
            body = json_object(await _body(request, self.limits.request_seconds))
        except ApiError as err:
            return refused(request, err.status, str(err), err.close)
        return await self._answer(request, lambda conn: self._sign_in(conn, body))

    async def _judgement(self, request: Request) -> Response:
        try:
            body = json_object(await _body(request, self.limits.request_seconds))
            token = _token(request)
        except ApiError as err:
            return refused(request, err.status, str(err), err.close)
        return await self._answer(request, lambda conn: self._judge(conn, token, body))

    # -- the answers (in a worker thread) ----------------------------------------------------------------------
    def _payload(self, conn: sqlite3.Connection, annotator: store.Annotator, position: int | None = None) -> dict:
        if position is None:
            position = store.next_position(conn, annotator)
        head = {"annotator": annotator.name, "task": annotator.task, "progress": store.progress(conn, annotator)}
        if position is None:
            return {**head, "done": True}
        view = store.item_view(conn, annotator, position)
        with self.served_lock:
            self.served[annotator.id, view["item"]] = store.now()
        return {**head, "done": False, **view}

    def _sign_in(self, conn: sqlite3.Connection, body: dict) -> dict:
        who = fields(body, ("who",)).get("who")
        if not isinstance(who, str) or not who.strip():
            raise ApiError(HTTPStatus.BAD_REQUEST, "type your token")
        if len(who) > MAX_TOKEN:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"a token has at most {MAX_TOKEN} characters")
        try:
            annotator = store.annotator_by_token(conn, who.strip())
        except UnknownAnnotator:
            raise ApiError(HTTPStatus.UNAUTHORIZED, "unknown token: use the token you were given") from None
        return {"token": annotator.token, "annotator": annotator.name, "task": annotator.task}

    def _judge(self, conn: sqlite3.Connection, token: str, body: dict) -> dict:
        hint = {"shown_at": "the server notes when it sent the item; leave shown_at out"}
        fields(body, ("item", "status", "ranks", "comment"), hint)
        annotator = store.annotator_by_token(conn, token)
        item = body.get("item")
        with self.served_lock:
            shown_at = self.served.get((annotator.id, item)) if isinstance(item, int) else None
        annotator = store.record_judgement(
            conn, token, item, body.get("status"), body.get("ranks"), body.get("comment", ""), shown_at
        )
        return {"saved": True, "next": self._payload(conn, annotator)}


def _identity(db: Path) -> tuple[int, int] | None:
    """The database file's device and inode (``None`` when it is gone): a file put in its place differs."""
    try:
        stat = db.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except (OSError, OverflowError) as err:  # in use, not an address of this machine, port out of range
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {getattr(err, 'strerror', None) or err}") from err
    sock.setblocking(False)
    return sock


def _token(request: Request) -> str:
    token = request.headers.get("x-annotator-token")
    if not token:
        raise ApiError(HTTPStatus.UNAUTHORIZED, "sign in first")
    if len(token) > MAX_TOKEN:
        raise ApiError(HTTPStatus.UNAUTHORIZED, "unknown annotator: no annotator has this token (sign in again)")
    return token


async def _body(request: Request, seconds: float) -> bytes:
    """The request's body (Content-Length or chunked: h11 has checked the framing), at most :data:`MAX_BODY` bytes
    and whole within ``seconds``.

    :raises ApiError: (with ``close``: the rest is not read) 413 over the limit, 408 too slow, 400 cut off."""
    declared = request.headers.get("content-length", "0")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY} bytes", True)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY:
                    raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY} bytes", True)
                chunks.append(chunk)
    except TimeoutError:
        message = f"request body not whole {seconds:g} s after the request began"
        raise ApiError(HTTPStatus.REQUEST_TIMEOUT, message, True) from None
    except ClientDisconnect:
        raise ApiError(HTTPStatus.BAD_REQUEST, "the client closed the connection during the body", True) from None
    return b"".join(chunks)
