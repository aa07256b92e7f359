"""Flow control of the reference broker's shell: a consumer that does not read does not make
the broker buffer the whole queue for it (deliveries pause while its socket is full, the
messages stay in the queue), and nothing is lost or reordered once it reads again."""

from __future__ import annotations

import socket

import pytest
from pamqp import commands as spec

from conformance.broker.server import EmbeddedBroker

from .broker_rawclient import Content, RawClient

pytestmark = pytest.mark.integration

COUNT = 2000
BODY = 16384  # 32 MB in all: far more than the socket buffers and the broker's high-water mark


def test_a_consumer_that_does_not_read_leaves_messages_in_the_queue() -> None:
    with EmbeddedBroker() as b:
        consumer = RawClient("127.0.0.1", b.port, timeout=10.0)
        consumer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        producer = RawClient("127.0.0.1", b.port, timeout=10.0)
        try:
            for c in (consumer, producer):
                c.handshake()
                c.open_channel(1)
            consumer.rpc(spec.Queue.Declare(queue="flow"), 1, spec.Queue.DeclareOk)
            consumer.rpc(
                spec.Basic.Consume(queue="flow", consumer_tag="c", no_ack=True), 1, spec.Basic.ConsumeOk
            )
            for i in range(COUNT):
                producer.publish(1, i.to_bytes(4, "big") * (BODY // 4), routing_key="flow")
            waiting = producer.rpc(spec.Queue.Declare(queue="flow", passive=True), 1, spec.Queue.DeclareOk)
            # the consumer read nothing yet: most messages must still be in the queue
            assert waiting.message_count > COUNT // 2, waiting.message_count
            seen = []
            while len(seen) < COUNT:
                got = consumer.next(timeout=10.0)
                assert got is not None, f"deliveries stopped after {len(seen)} of {COUNT}"
                _ch, ev = got
                assert isinstance(ev, Content) and isinstance(ev.method, spec.Basic.Deliver), ev
                seen.append(int.from_bytes(ev.body[:4], "big"))
            assert seen == list(range(COUNT))
            left = producer.rpc(spec.Queue.Declare(queue="flow", passive=True), 1, spec.Queue.DeclareOk)
            assert left.message_count == 0
        finally:
            consumer.close()
            producer.close()
