"""One connection of the ranking page's server (:mod:`sarnmt.human.server`) and the requests on it: reads that keep
the server's deadlines, answers written straight to the socket, errors answered as JSON and logged as one line.

:class:`PooledHandler` is made when the server accepts a connection and serves its requests in a worker thread, as
many as have arrived; the server takes the connection back between requests (HTTP/1.1 keep-alive). Subclasses
(:mod:`sarnmt.human.app`) define ``do_GET`` etc.
"""

from __future__ import annotations

import io
import json
import socket
import sys
import time
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sarnmt.human.server import PooledHTTPServer

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]}
_LOG_CHARS = 400


def brief(err: BaseException) -> str:
    """One line for an unexpected error: its type, message and the innermost place it was raised."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"{type(err).__name__}: {err}{where}"


class _Reader(socket.SocketIO):
    """A connection's reads, each within ``idle_seconds`` and all of one request within its deadline."""

    def __init__(self, sock: socket.socket, idle_seconds: float):
        super().__init__(sock, "rb")
        self.idle_seconds = idle_seconds
        self.deadline: float | None = None

    def readinto(self, buffer) -> int | None:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request did not arrive in time")
            self._sock.settimeout(min(left, self.idle_seconds))
        return super().readinto(buffer)


class _Writer(io.BufferedIOBase):
    """Writes go straight to the socket (``sendall``), as the stdlib's handler writes them."""

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._sock.sendall(data)
        with memoryview(data) as view:
            return view.nbytes


class PooledHandler(BaseHTTPRequestHandler):
    """A connection and its requests. Made (``setup``) when the connection is accepted; :meth:`serve` answers the
    requests that have arrived, in a worker thread; :meth:`close` ends it. Subclasses define ``do_GET`` etc.,
    answering through :meth:`send_json` (or ``send_error``, which answers JSON too)."""

    server: PooledHTTPServer
    protocol_version = "HTTP/1.1"

    def __init__(self, request: socket.socket, client_address, server: PooledHTTPServer):  # no request handled here
        self.request, self.client_address, self.server = request, client_address, server
        self.closed = False
        self.requestline = ""
        self.setup()

    def setup(self) -> None:
        self.connection = self.request
        self.connection.settimeout(self.server.idle_seconds)
        self._reader = _Reader(self.connection, self.server.idle_seconds)
        self.rfile = io.BufferedReader(self._reader)
        self.wfile = _Writer(self.connection)

    def serve(self) -> None:
        """Answer every request that has arrived on the connection; close it unless it is kept alive."""
        try:
            while True:
                self.close_connection = True
                self.handle_one_request()
                if self.close_connection or not self._pending():
                    break
        except Exception as err:  # the client went away mid-answer, or a bug: a log line, never a traceback
            self.log_message("connection dropped: %s", brief(err))
            self.close_connection = True
        if self.close_connection:
            self.close()

    def handle_one_request(self) -> None:
        self._answered = False
        self._reader.deadline = time.monotonic() + self.server.request_seconds
        try:
            super().handle_one_request()
        finally:
            self._reader.deadline = None

    def _pending(self) -> bool:
        """Whether the next request has begun to arrive (in the read buffer or on the socket), without waiting."""
        self.connection.settimeout(0)
        try:
            return bool(self.rfile.peek(1))
        except OSError:
            return False
        finally:
            if self.connection.fileno() != -1:
                self.connection.settimeout(self.server.idle_seconds)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.rfile.close()
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0)
            for _ in range(16):  # bytes not read (a refused body): read them, so that closing sends FIN, not RST
                if not self.connection.recv(65536):
                    break
        except OSError:  # nothing more to read, or the client has gone
            pass
        self.connection.close()

    def guarded(self, method) -> None:
        """Run ``method`` (a route); a bug in it answers 500 with a log line, not a dropped request."""
        try:
            method()
        except (TimeoutError, ConnectionError):
            raise
        except Exception as err:
            self.log_message("error in %r: %s", self.requestline[:200], brief(err))
            self.close_connection = True
            if not self._answered:
                self.send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": "internal error (the server logged it)"})

    # -- answers ---------------------------------------------------------------------------------------------
    def send_body(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self._answered = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status: int, data: dict) -> None:
        if status >= 400:
            self.log_message('"%s" %d %s', self.requestline[:200], status, data.get("error", ""))
        self.send_body(status, json.dumps(data, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's refusals (a malformed request line or header, a request line too long, an unknown method),
        as JSON; the connection is closed after."""
        self.close_connection = True
        try:
            text = message or HTTPStatus(code).phrase
        except ValueError:
            text = "error"
        self.send_json(code, {"error": text})

    # -- log -------------------------------------------------------------------------------------------------
    def log_request(self, code="-", size="-") -> None:
        """Quiet: a line per answer would bury the server's own messages; refusals log in :meth:`send_json`."""

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        """One line on stderr: the client, the time and the message, control characters escaped, cut short."""
        text = (format % args).translate(_CONTROL)
        if len(text) > _LOG_CHARS:
            text = text[:_LOG_CHARS] + "…"
        sys.stderr.write(f"{self.address_string()} [{self.log_date_time_string()}] {text}\n")
