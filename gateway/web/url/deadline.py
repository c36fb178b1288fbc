"""One wall-clock deadline for a whole fetch, kept by a watchdog thread instead of socket timeouts
(which restart with every byte that arrives): at the deadline, or as soon as the client the fetch
is for has gone, the fetch's sockets are shut down, and whatever call was waiting on one of them
returns at once (a status line, headers, 1xx answers, the body, chunk lines, trailers). Name
lookups run on a few threads of their own, so that they end at the deadline too.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from typing import Any

from gateway.web.responses import client_gone

CLIENT_POLL_S = 0.25  # how often a fetch's client is checked for having gone
RESOLVER_THREADS = 4


class Watch:
    """One fetch: its deadline, the sockets it reads from (duplicates of their descriptors, so that
    shutting one down never touches a descriptor another thread has reused) and its client's socket."""

    def __init__(self, deadline: float, client: socket.socket | None):
        self.deadline = deadline
        self.client = client
        self.ended: str | None = None  # "deadline" or "client": why its sockets were shut down
        self._sockets: list[socket.socket] = []

    def left(self) -> float:
        """Seconds to the deadline (0 once passed)."""
        return max(0.0, self.deadline - time.monotonic())

    def _add(self, sock: socket.socket) -> None:
        copy = socket.socket(fileno=os.dup(sock.fileno()))
        self._sockets.append(copy)
        if self.ended:
            _shut(copy)

    def _end(self, reason: str) -> None:
        self.ended = reason
        for sock in self._sockets:
            _shut(sock)

    def _close(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the peer
        sock.shutdown(socket.SHUT_RDWR)


class Watchdog:
    """Ends the watches of one worker process: a thread that sleeps until the next deadline, or the
    next client check while a watch has a client; started on first use (after gunicorn's fork)."""

    def __init__(self) -> None:
        self._watches: set[Watch] = set()
        self._changed = threading.Condition()
        self._local = threading.local()
        self._thread: threading.Thread | None = None
        self._resolver: ThreadPoolExecutor | None = None

    @contextmanager
    def watching(self, seconds: float, client: socket.socket | None = None) -> Iterator[Watch]:
        """A watch of `seconds` for the fetch the calling thread makes in the block."""
        watch = Watch(time.monotonic() + seconds, client)
        with self._changed:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fetch-watchdog", daemon=True)
                self._thread.start()
            self._watches.add(watch)
            self._changed.notify()
        self._local.watch = watch
        try:
            yield watch
        finally:
            self._local.watch = None
            with self._changed:
                self._watches.discard(watch)
                watch._close()

    def adopt(self, sock: socket.socket) -> None:
        """Put `sock` under the calling thread's watch (shut down at once if it has ended)."""
        watch = getattr(self._local, "watch", None)
        if watch is not None:
            with self._changed:
                watch._add(sock)

    def resolve(self, host: str, port: int) -> list[Any]:
        """getaddrinfo(host, port) for TCP, ending with the calling thread's watch (TimeoutError)."""
        with self._changed:
            if self._resolver is None:
                self._resolver = ThreadPoolExecutor(RESOLVER_THREADS, thread_name_prefix="resolver")
        watch = getattr(self._local, "watch", None)
        lookup = self._resolver.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
        try:
            return lookup.result(timeout=watch.left() if watch is not None else None)
        except FutureTimeout:
            raise TimeoutError(f"resolving {host} took too long") from None

    def _run(self) -> None:
        with self._changed:
            while True:
                now = time.monotonic()
                for watch in self._watches:
                    if watch.ended is None and now >= watch.deadline:
                        watch._end("deadline")
                    elif watch.ended is None and client_gone(watch.client):
                        watch._end("client")
                waiting = [watch for watch in self._watches if watch.ended is None]
                waits = [watch.deadline - now for watch in waiting]
                if any(watch.client is not None for watch in waiting):
                    waits.append(CLIENT_POLL_S)
                self._changed.wait(min(waits) if waits else None)
