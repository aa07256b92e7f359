"""The extension cases' ``isolated`` broker (conformance.verify.extensions.Isolated): kept for the next
case only when the case's connections all ended as the case ended them and a fresh connection still
declares a queue; its entities deleted on that broker."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from conformance.broker import EmbeddedBroker
from conformance.protocol.wire import URL
from conformance.verify.extensions import Isolated


class Noted:
    """A stand-in for the plugin's clean-up: records what was registered and whether it ran."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self.ran = False

    def queue(self, name: str) -> str:
        self.items.append(("queue", name))
        return name

    def exchange(self, name: str) -> str:
        self.items.append(("exchange", name))
        return name

    def run(self, case_id: str = "?") -> None:
        self.ran = True


@pytest.fixture(scope="module")
def url() -> Iterator[URL]:
    broker = EmbeddedBroker()
    broker.start()
    try:
        yield URL.parse(f"amqp://guest:guest@127.0.0.1:{broker.port}/")
    finally:
        broker.stop()
        broker.cleanup()


def test_a_case_that_ended_its_own_connections_keeps_the_broker(url: URL) -> None:
    noted = Noted()
    iso = Isolated(url, 5.0, noted)
    ch = iso.channel()
    ch.declare_queue(iso.queue("amqpc-isolated-kept"))
    ch.conn.close()
    assert iso.tidy("case") is True
    assert noted.ran and noted.items == [("queue", "amqpc-isolated-kept")]


def test_a_connection_the_broker_dropped_sends_it_to_a_restart(url: URL) -> None:
    noted = Noted()
    iso = Isolated(url, 5.0, noted)
    conn = iso.connection()
    conn.sock.shutdown(socket.SHUT_RDWR)  # as a broker process that ends: no connection.close
    deadline = time.monotonic() + 5
    while conn.socket_closed is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert iso.tidy("case") is False
    assert not noted.ran  # nothing is deleted on a broker about to be restarted


def test_a_broker_that_no_longer_answers_sends_it_to_a_restart() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    iso = Isolated(URL.parse(f"amqp://guest:guest@127.0.0.1:{port}/"), 2.0, Noted())
    assert iso.tidy("case") is False
