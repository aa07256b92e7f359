"""The cluster cases' publisher (verify.cluster.publish_numbered) counts as confirmed only what a
queue took: a message the broker routed nowhere comes back (mandatory, 312 NO_ROUTE) before its
confirm and is counted as returned, not acked (RabbitMQ's confirms guide; a stream unroutable for
a moment after its nodes came back was acked this way)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from pamqp import commands as spec

from conformance.broker import EmbeddedBroker
from conformance.protocol.raw import RawConnection
from conformance.protocol.rawevents import Event
from conformance.protocol.wire import URL
from conformance.targets.spec import parse_url
from conformance.verify.cluster import Confirms, _read_confirms, publish_numbered

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def url() -> Iterator[URL]:
    broker = EmbeddedBroker()
    broker.start()
    try:
        yield parse_url(f"amqp://guest:guest@127.0.0.1:{broker.port}/")
    finally:
        broker.stop()
        broker.cleanup()


def test_a_queue_takes_them_all(url: URL) -> None:
    conn = RawConnection.open(url, timeout=5)
    try:
        conn.channel().declare_queue("cc-there", auto_delete=False)
    finally:
        conn.close()
    got = publish_numbered(url, "cc-there", range(5), timeout=5)
    assert (got.acked, got.nacked, got.returned, got.unconfirmed) == (set(range(5)), set(), set(), set())


def test_messages_routed_nowhere_are_returned_not_acked(url: URL) -> None:
    got = publish_numbered(url, "cc-no-such-queue", range(3), timeout=5)
    assert (got.acked, got.nacked, got.returned, got.unconfirmed) == (set(), set(), {0, 1, 2}, set())
    assert "returned unroutable 3" in got.summary()


def test_a_multiple_ack_over_a_returned_message() -> None:
    """Fold order: a return marks its message (by body) before the ack that covers it."""
    events = [
        Event(1, 1, spec.Basic.Return(reply_code=312, reply_text="NO_ROUTE", exchange="", routing_key="q"),
              body=b"11"),
        Event(2, 1, spec.Basic.Ack(delivery_tag=2, multiple=True)),
        Event(3, 1, spec.Basic.Nack(delivery_tag=3)),
    ]
    got = Confirms(published=[10, 11, 12, 13])
    _read_confirms(SimpleNamespace(history=lambda: events), {1: 10, 2: 11, 3: 12, 4: 13}, got)  # type: ignore[arg-type]
    assert (got.acked, got.returned, got.nacked, got.unconfirmed) == ({10}, {11}, {12}, {13})
