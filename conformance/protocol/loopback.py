"""A TCP listener for the suite's own peers (the mutate proxy, the tests' fake broker).

It listens on a free port, hands every accepted connection to ``on_accept`` from one accept
thread, and on :meth:`close` stops accepting and closes the connections it was told about.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class Listener:
    def __init__(self, on_accept: Callable[[socket.socket], None], *, host: str = "127.0.0.1",
                 backlog: int = 16) -> None:
        self.on_accept = on_accept
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(backlog)
        self.sock.settimeout(0.1)  # accept() is not woken by close() from another thread
        self.host = host
        self.port: int = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self._socks: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def track(self, *socks: socket.socket) -> None:
        """Close ``socks`` with the listener (those already closed are forgotten)."""
        self._socks[:] = [s for s in self._socks if s.fileno() != -1] + list(socks)

    def close(self) -> None:
        self.stopped.set()
        try:
            self.sock.close()
        except OSError:
            pass
        for s in list(self._socks):
            try:
                s.close()
            except OSError:
                pass
        self._thread.join(timeout=2)

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            self.on_accept(client)
