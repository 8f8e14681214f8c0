"""The ranking page's HTTP server: uvicorn over h11, running an ASGI app (:mod:`sarnmt.human.app`, on Starlette).

**Why uvicorn and h11.** The page used to sit on a hand-written layer over ``http.server``: a thread per request
being read, so 8 clients sending a byte a second delayed every other annotator by seconds, and its parsing of the
request framing was its own (``Transfer-Encoding : chunked`` was ignored, an HTTP/0.9 ``GET /`` got bare HTML).
uvicorn is the maintained reference ASGI server; it runs on one asyncio event loop, so a slow client holds a
coroutine and a socket, never a thread, and the others are answered as if it were not there. Its ``h11`` protocol
(pure Python, no compiler needed, the strict HTTP/1.1 parser of the python-hyper project) answers malformed framing
400 before the app sees anything: a space before a header's colon, a request line without a version (HTTP/0.9),
conflicting ``Content-Length`` values, a length that is not digits. Starlette is the small ASGI framework from the
same maintainers; the app's routes need nothing more (no templates, no ORM: the store is SQLite).

What this module adds to uvicorn, through its documented hooks (``Config(http=...)``, a protocol class):

- **deadlines** (:class:`Limits`): a new connection that sends nothing is closed after ``idle_seconds``, so is a
  kept-alive one between requests (uvicorn's ``timeout_keep_alive``); a request's head must arrive whole within
  ``request_seconds`` of its first byte (the app gives its body as long), or the connection is closed with one
  log line. uvicorn alone would keep a silent or trickling connection open for ever;
- **refusals of the parser** are answered as JSON ``{"error": ...}`` with the status h11 gives (400; 431 for a head
  that reaches twice ``max_head`` bytes before it ends), with the app's security headers (the
  Content-Security-Policy, ``nosniff``, ``no-store``) like every other answer, and logged as one line;
- **logging**: one line per refusal or error on stderr (client, time, message), control characters escaped and cut
  short; uvicorn's start-up chatter is left out and its errors are one line, never a traceback.

:class:`Server` runs an app on a socket it has already bound, in the calling thread (``serve_forever``);
``shutdown`` from another thread stops it: the answers under way are sent, every connection is closed.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]}
_LOG_CHARS = 400


def brief(err: BaseException) -> str:
    """One line for an unexpected error: its type, message and the innermost place it was raised."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"{type(err).__name__}: {err}{where}"


def log(client: tuple[str, int] | str | None, text: str) -> None:
    """One line on stderr: the client, the time and ``text``, control characters escaped, cut short."""
    text = text.translate(_CONTROL)
    if len(text) > _LOG_CHARS:
        text = text[:_LOG_CHARS] + "…"
    who = client[0] if isinstance(client, tuple) else client or "-"
    when = time.strftime("%d/%b/%Y %H:%M:%S")
    sys.stderr.write(f"{who} [{when}] {text}\n")
    sys.stderr.flush()


class _OneLine(logging.Handler):
    """uvicorn's own errors, one line each on the current stderr (no traceback)."""

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {brief(record.exc_info[1])}"
        log(None, text)


def _quiet_uvicorn() -> None:
    """uvicorn logs through ``uvicorn.error``: only its errors, as one line (the start-up messages and its warning
    for a malformed request, which :class:`GuardedH11Protocol` logs itself with the reason, are left out)."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(h, _OneLine) for h in logger.handlers):
        logger.addHandler(_OneLine())
    logger.setLevel(logging.ERROR)
    logger.propagate = False
    logging.getLogger("uvicorn.access").disabled = True


@dataclass(frozen=True)
class Limits:
    """How long a client may take, and how big a request head may be.

    :param idle_seconds: a connection with no request under way is closed after this long (new, or kept alive).
    :param request_seconds: a request's head must arrive within this long of its first byte; so must its body.
    :param max_head: bytes of a request's headers, and of its target (the app answers 431 and 414 beyond; h11 stops
        reading a head at twice this, 431).
    :param headers: the security headers every answer carries, the parser's refusals too (the app's).
    """

    idle_seconds: float = 5.0
    request_seconds: float = 10.0
    max_head: int = 64 * 1024
    headers: tuple[tuple[str, str], ...] = ()


class _Lingering:
    """A connection's transport whose ``close`` sends what is buffered, then FIN, and reads (and drops) what the
    client still sends for up to ``linger`` seconds (or :data:`LINGER_BYTES`) before closing. Closed at once, a
    socket with unread bytes sends a reset, and a client still sending a refused body (413, 431) would lose the
    answer it was sent; the standard library's layer did the same by hand."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop, linger: float):
        self._transport, self._loop, self._linger = transport, loop, linger
        self.lingering = False
        self.dropped = 0

    def __getattr__(self, name: str):
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self) -> None:
        if self.is_closing():
            return
        self.lingering = True
        try:
            self._transport.write_eof()  # after what is buffered
            self._transport.resume_reading()
        except (NotImplementedError, OSError, RuntimeError):
            self._transport.close()
            return
        self._loop.call_later(self._linger, self._transport.close)

    def drop(self, data: bytes) -> None:
        """Bytes that arrived while lingering: dropped, up to :data:`LINGER_BYTES`."""
        self.dropped += len(data)
        if self.dropped > LINGER_BYTES:
            self._transport.close()


LINGER_SECONDS = 1.0
BODY_BACKSTOP = 2  # a request's body, read or not, is whole within this many times request_seconds of its head
LINGER_BYTES = 1024 * 1024


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the deadlines of :class:`Limits` and refusals answered as JSON (module
    docstring). One per connection."""

    def __init__(self, *args, limits: Limits, **kwargs):
        super().__init__(*args, **kwargs)
        self.limits = limits
        self._deadline: asyncio.TimerHandle | None = None
        self._head_started = self._body_started = False

    def _arm(self, seconds: float, started: bool, body: bool = False) -> None:
        self._disarm()
        self._head_started, self._body_started = started, body
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._head_started = self._body_started = False

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._head_started:
            seconds = self.limits.request_seconds
            log(self.client, f"request not whole {seconds:g} s after its first byte: timed out, connection closed")
        elif self._body_started:
            seconds = BODY_BACKSTOP * self.limits.request_seconds
            log(self.client, f"request body not whole {seconds:g} s after its head: timed out, connection closed")
        self.transport.close()

    def _watch(self) -> None:
        """Set the deadline for where the connection is: waiting for a request (idle), part of a request head in
        (``request_seconds`` from its first byte), or a request under way: its body must be whole within
        :data:`BODY_BACKSTOP` times ``request_seconds`` of its head, whether or not the app reads it (a route that
        answers without reading a body left a client trickling one byte every 2 s connected for as long as it
        liked; the app's own 408 comes first where it reads the body)."""
        if self.transport.is_closing():
            self._disarm()
        elif self.conn.their_state is h11.SEND_BODY:  # the body is arriving (or not read): bounded
            if not self._body_started:
                self._arm(BODY_BACKSTOP * self.limits.request_seconds, started=False, body=True)
        elif self.conn.their_state is not h11.IDLE:  # the request is whole: the app answers in its own time
            self._disarm()
        elif self.conn.trailing_data[0]:  # bytes of the next request's head, not all of it
            if not self._head_started:
                self._arm(self.limits.request_seconds, started=True)
        elif self._deadline is None or self._head_started:
            self._arm(self.limits.idle_seconds, started=False)

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = _Lingering(transport, self.loop, LINGER_SECONDS)  # type: ignore[assignment]
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.transport.lingering:  # answered and closing: what the client still sends is dropped
            self.transport.drop(data)
            return
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def send_400_response(self, msg: str) -> None:
        """h11 refused the request (``next_event`` raised; uvicorn calls this inside its ``except``): answer with
        h11's status hint and reason as JSON, with the security headers, and log one line."""
        err = sys.exception()
        status = getattr(err, "error_status_hint", 400)
        status = status if 400 <= status < 500 else 400
        text = f"malformed request: {_reason(err)}" if err is not None and str(err) else msg
        log(self.client, f'"-" {status} {text}')
        body = json.dumps({"error": text}).encode()
        headers = [
            (b"content-type", b"application/json; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *((k.encode(), v.encode()) for k, v in self.limits.headers),
        ]
        try:
            head = h11.Response(status_code=status, headers=headers, reason=STATUS_PHRASES[status])
            self.transport.write(self.conn.send(head))
            self.transport.write(self.conn.send(h11.Data(data=body)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
        except h11.LocalProtocolError:  # an answer was under way already: nothing more can be said
            pass
        self._disarm()
        self.transport.close()


def _reason(err: BaseException) -> str:
    """h11's reason, the client's bytes it quotes shown as bytes and cut short (a refused line may be 64 KiB)."""
    text = re.sub(r"bytearray\((b.*)\)$", r"\1", str(err), flags=re.DOTALL)
    return text if len(text) <= 200 else text[:199] + "…"


class Server:
    """An ASGI ``app`` served by uvicorn on a listening socket ``sock`` (bound by the caller, so that an address
    in use is the caller's error, and ``port=0`` is known before serving)."""

    def __init__(self, app, sock: socket.socket, limits: Limits | None = None):
        _quiet_uvicorn()
        limits = limits or Limits()
        self.socket = sock
        self.limits = limits
        config = uvicorn.Config(
            app,
            http=functools.partial(GuardedH11Protocol, limits=limits),
            ws="none",
            lifespan="off",
            log_config=None,
            access_log=False,
            proxy_headers=False,
            server_header=False,
            timeout_keep_alive=limits.idle_seconds,  # type: ignore[arg-type]  # seconds; a float is fine
            timeout_graceful_shutdown=int(limits.request_seconds) + 1,
            # h11 bounds a head only while it is incomplete, so when it trips depends on how the bytes arrived:
            # twice the app's bound, which the app (sarnmt.human.guard.Guard) checks exactly on every whole head
            h11_max_incomplete_event_size=2 * limits.max_head,
        )
        self._uvicorn = uvicorn.Server(config)
        self._stopped = threading.Event()
        self._stopped.set()

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or, in the main thread, SIGINT / SIGTERM: uvicorn stops, then raises the
        signal again for the caller's handler)."""
        if self._uvicorn.should_exit:  # shut down before it began
            return
        self._stopped.clear()
        try:
            self._uvicorn.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (called from another thread) and wait until it has."""
        self._uvicorn.should_exit = True
        self._stopped.wait()

    def server_close(self) -> None:
        self.socket.close()
