"""A standard-library HTTP server with a fixed number of threads, for the ranking page (:mod:`sarnmt.human.app`).

``http.server.ThreadingHTTPServer`` starts a thread per connection and keeps it while the connection is open, so
150 idle connections hold 150 threads, for ever. Here one thread (the one that calls :meth:`PooledHTTPServer.
serve_forever`) accepts connections and watches the idle ones with a selector; a connection goes to one of a fixed
set of ``workers`` threads only when its next request has begun to arrive, and comes back to the selector when the
answer is sent (HTTP/1.1 keep-alive). So:

- **threads**: ``workers`` + 1, however many connections are open;
- **idle connections** (a new one that sends nothing, a kept-alive one between requests) are closed after
  ``idle_seconds``; at ``max_connections`` open, a new connection closes the one idle the longest (or is closed,
  when none is idle);
- **a request** must arrive whole within ``request_seconds`` of its first byte, and each read within
  ``idle_seconds``; a slower one is dropped with a log line. A client that trickles requests can hold at most one
  worker per connection for that long;
- **errors** are answered as JSON ``{"error": ...}`` (the stdlib's own refusals too: a malformed request line, too
  many headers, an unknown method) and logged as one line on stderr: no traceback, whatever a client sends.
"""

from __future__ import annotations

import errno
import io
import json
import queue
import selectors
import socket
import sys
import threading
import time
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer

WORKERS = 8
IDLE_SECONDS = 5.0
REQUEST_SECONDS = 10.0
MAX_CONNECTIONS = 256
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]}
_LOG_CHARS = 400
FULL = object()  # _accept: no file descriptor left


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


class PooledHTTPServer(HTTPServer):
    """``serve_forever`` in one thread, ``shutdown`` from another (see the module docstring)."""

    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[PooledHandler],
        *,
        workers: int = WORKERS,
        idle_seconds: float = IDLE_SECONDS,
        request_seconds: float = REQUEST_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
    ):
        self.workers, self.idle_seconds = workers, idle_seconds
        self.request_seconds, self.max_connections = request_seconds, max_connections
        self._jobs: queue.SimpleQueue[PooledHandler | None] = queue.SimpleQueue()  # connections with a request
        self._back: queue.SimpleQueue[PooledHandler] = queue.SimpleQueue()  # answered: to watch again, or closed
        self._stop, self._stopped = threading.Event(), threading.Event()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_write.setblocking(False)
        try:
            super().__init__(address, handler)
        except BaseException:
            self._close_wake()
            raise

    def _wake(self) -> None:
        try:
            self._wake_write.send(b"\0")
        except OSError:  # full (a wake-up is pending anyway) or closed
            pass

    def _close_wake(self) -> None:
        self._wake_read.close()
        self._wake_write.close()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stopped.clear()
        workers = [
            threading.Thread(target=self._work, name=f"sarnmt-human-worker-{k}", daemon=True)
            for k in range(self.workers)
        ]
        for worker in workers:
            worker.start()
        selector = selectors.DefaultSelector()
        selector.register(self.socket, selectors.EVENT_READ, "accept")
        selector.register(self._wake_read, selectors.EVENT_READ, "wake")
        idle: dict[PooledHandler, float] = {}  # by when each must have sent something; the oldest first
        busy = 0

        def close_idle(conn: PooledHandler) -> None:
            del idle[conn]
            selector.unregister(conn.connection)
            conn.close()

        try:
            while not self._stop.is_set():
                timeout = poll_interval
                if idle:
                    timeout = max(0.0, min(timeout, next(iter(idle.values())) - time.monotonic()))
                for key, _ in selector.select(timeout):
                    if key.data == "accept":
                        if len(idle) + busy >= self.max_connections and idle:
                            close_idle(next(iter(idle)))  # make room: the connection idle the longest goes
                        conn = self._accept(len(idle) + busy < self.max_connections)
                        if conn is FULL:
                            if idle:
                                close_idle(next(iter(idle)))  # out of file descriptors: free one
                            else:
                                time.sleep(0.05)  # wait for a worker to free one rather than spin
                        elif conn is not None:
                            idle[conn] = time.monotonic() + self.idle_seconds
                            selector.register(conn.connection, selectors.EVENT_READ, conn)
                    elif key.data == "wake":
                        self._wake_read.recv(4096)
                    elif key.data in idle:
                        del idle[key.data]
                        selector.unregister(key.fileobj)
                        busy += 1
                        self._jobs.put(key.data)
                while True:
                    try:
                        conn = self._back.get_nowait()
                    except queue.Empty:
                        break
                    busy -= 1
                    if not conn.closed:
                        idle[conn] = time.monotonic() + self.idle_seconds
                        selector.register(conn.connection, selectors.EVENT_READ, conn)
                now = time.monotonic()
                while idle and next(iter(idle.values())) <= now:
                    close_idle(next(iter(idle)))
        finally:
            for conn in list(idle):
                close_idle(conn)
            for _ in workers:
                self._jobs.put(None)
            for worker in workers:
                worker.join(timeout=self.request_seconds + 1)
            while True:
                try:
                    self._back.get_nowait().close()
                except queue.Empty:
                    break
            selector.close()
            self._stopped.set()

    def _accept(self, room: bool) -> PooledHandler | object | None:
        """The new connection; ``None`` when it is gone already or refused (no ``room``); ``FULL`` when no file
        descriptor is left for it."""
        try:
            sock, address = self.socket.accept()
        except OSError as err:
            if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                sys.stderr.write(f"cannot accept a connection: {err.strerror}\n")
                return FULL
            return None  # the client gave up before it was accepted
        if not room:
            sock.close()
            return None
        try:
            return self.RequestHandlerClass(sock, address, self)
        except OSError:
            sock.close()
            return None

    def _work(self) -> None:
        while (conn := self._jobs.get()) is not None:
            conn.serve()
            if self._stop.is_set():
                conn.close()
            self._back.put(conn)
            self._wake()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (called from another thread) and wait until it has: the requests being
        answered are answered, every connection is closed."""
        self._stop.set()
        self._wake()
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        self._close_wake()
