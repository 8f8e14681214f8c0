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
import queue
import selectors
import socket
import sys
import threading
import time
from http.server import HTTPServer

from sarnmt.human.handler import PooledHandler

WORKERS = 8
IDLE_SECONDS = 5.0
REQUEST_SECONDS = 10.0
MAX_CONNECTIONS = 256
FULL = object()  # _accept: no file descriptor left


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
