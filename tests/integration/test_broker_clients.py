"""The reference broker with unmodified client libraries: pika, aio-pika, py-amqp."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import aio_pika
import amqp
import pika
import pika.exceptions
import pytest

from conformance.broker import EmbeddedBroker

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ref() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def conn(ref: EmbeddedBroker) -> Iterator[pika.BlockingConnection]:
    params = pika.URLParameters(ref.url + "?socket_timeout=5&blocked_connection_timeout=5")
    c = pika.BlockingConnection(params)
    yield c
    if c.is_open:
        c.close()


def drain_events(conn: pika.BlockingConnection, until: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:  # type: ignore[operator]
        conn.process_data_events(time_limit=0.05)
    assert until(), "timed out"  # type: ignore[operator]


# -- pika -----------------------------------------------------------------------------------------
def test_pika_publish_consume_ack(conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    for i in range(10):
        ch.basic_publish(
            "", q, f"m{i}".encode(), pika.BasicProperties(content_type="text/plain", headers={"i": i})
        )
    got: list[tuple[bytes, int]] = []

    def on_msg(c: object, method: object, props: pika.BasicProperties, body: bytes) -> None:
        got.append((body, props.headers["i"]))
        ch.basic_ack(method.delivery_tag)  # type: ignore[attr-defined]

    ch.basic_qos(prefetch_count=3)
    tag = ch.basic_consume(q, on_msg)
    drain_events(conn, lambda: len(got) == 10)
    assert got == [(f"m{i}".encode(), i) for i in range(10)]
    ch.basic_cancel(tag)
    assert ch.queue_declare(q, passive=True).method.message_count == 0


def test_pika_confirms_and_mandatory_return(conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    ch.confirm_delivery()
    q = ch.queue_declare("", exclusive=True).method.queue
    for i in range(20):
        ch.basic_publish("", q, b"%d" % i, pika.BasicProperties(delivery_mode=2))
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish("amq.direct", "no-such-key", b"x", mandatory=True)
    assert ch.queue_declare(q, passive=True).method.message_count == 20


def test_pika_tx_commit_and_rollback(conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.tx_select()
    ch.basic_publish("", q, b"rolled back")
    ch.tx_rollback()
    ch.basic_publish("", q, b"committed")
    assert ch.queue_declare(q, passive=True).method.message_count == 0
    ch.tx_commit()
    method, _props, body = ch.basic_get(q, auto_ack=False)
    assert body == b"committed"
    ch.basic_ack(method.delivery_tag)
    ch.tx_commit()


def test_pika_reject_requeue_and_recover(conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    for b in (b"a", b"b"):
        ch.basic_publish("", q, b)
    m1, _, _ = ch.basic_get(q)
    ch.basic_reject(m1.delivery_tag, requeue=True)
    m2, _, body = ch.basic_get(q)
    assert body == b"a" and m2.redelivered
    ch.basic_recover(requeue=True)
    m3, _, body = ch.basic_get(q)
    assert body == b"a" and m3.redelivered and m3.delivery_tag == 3


def test_pika_errors(conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
        ch.queue_declare("definitely-missing", passive=True)
    assert ei.value.reply_code == 404
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", q, b"x")
    m, _, _ = ch.basic_get(q)
    ch.basic_ack(m.delivery_tag)
    ch.basic_ack(m.delivery_tag)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
        ch.queue_declare(q, passive=True)
    assert ei.value.reply_code == 406 and "unknown delivery tag 1" in ei.value.reply_text
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as ci:
        ch.basic_recover(requeue=False)
    assert ci.value.reply_code == 540


def test_pika_bad_password_and_vhost(ref: EmbeddedBroker) -> None:
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(pika.URLParameters(f"amqp://guest:wrong@127.0.0.1:{ref.port}/"))
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as ei:
        pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{ref.port}/nope"))
    assert "(530) 'NOT_ALLOWED - vhost nope not found'" in str(ei.value)


def test_pika_broker_cancel_on_queue_delete(conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    cancelled: list[object] = []
    ch.add_on_cancel_callback(cancelled.append)
    ch.basic_consume(q, lambda *a: None)
    other = conn.channel()
    other.queue_delete(q)
    drain_events(conn, lambda: bool(cancelled))


def test_pika_heartbeat_negotiated_and_dead_peer(ref: EmbeddedBroker) -> None:
    c = pika.BlockingConnection(pika.URLParameters(ref.url + "?heartbeat=1"))
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:  # pika exchanges heartbeats while it polls
            c.process_data_events(time_limit=0.1)
        assert c.is_open
        time.sleep(3.0)  # silent client: the broker must give up after 2 intervals
        with pytest.raises(pika.exceptions.AMQPConnectionError):
            c.process_data_events(time_limit=0.5)
            c.channel()
    finally:
        if c.is_open:
            c.close()


# -- aio-pika ---------------------------------------------------------------------------------------
def test_aio_pika_roundtrip(ref: EmbeddedBroker) -> None:
    async def main() -> list[bytes]:
        conn = await aio_pika.connect(ref.url, timeout=5)
        async with conn:
            ch = await conn.channel(publisher_confirms=True)
            x = await ch.declare_exchange("aio-topic", aio_pika.ExchangeType.TOPIC, auto_delete=True)
            q = await ch.declare_queue("", exclusive=True)
            await q.bind(x, "logs.#")
            for i in range(5):
                await x.publish(
                    aio_pika.Message(b"%d" % i, delivery_mode=aio_pika.DeliveryMode.PERSISTENT), "logs.a.b"
                )
            got = []
            async with q.iterator() as it:
                async for m in it:
                    async with m.process():
                        got.append(m.body)
                    if len(got) == 5:
                        break
            return got

    assert asyncio.run(asyncio.wait_for(main(), 15)) == [b"0", b"1", b"2", b"3", b"4"]


def test_aio_pika_nack_and_get(ref: EmbeddedBroker) -> None:
    async def main() -> tuple[bool, bytes]:
        conn = await aio_pika.connect(ref.url, timeout=5)
        async with conn:
            ch = await conn.channel()
            q = await ch.declare_queue("", exclusive=True)
            await ch.default_exchange.publish(aio_pika.Message(b"again"), q.name)
            m = await q.get(timeout=5)
            await m.nack(requeue=True)
            m2 = await q.get(timeout=5)
            await m2.ack()
            return m2.redelivered, m2.body

    assert asyncio.run(asyncio.wait_for(main(), 15)) == (True, b"again")


# -- py-amqp --------------------------------------------------------------------------------------
def test_py_amqp_roundtrip(ref: EmbeddedBroker) -> None:
    c = amqp.Connection(f"127.0.0.1:{ref.port}", connect_timeout=5, read_timeout=5, write_timeout=5)
    c.connect()
    try:
        ch = c.channel()
        q, _, _ = ch.queue_declare("", exclusive=True)
        ch.confirm_select()
        ch.basic_publish(
            amqp.Message(b"hello", delivery_mode=2, application_headers={"k": "v"}), routing_key=q
        )
        got: list[amqp.Message] = []
        ch.basic_consume(q, callback=got.append)
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            c.drain_events(timeout=0.5)
        assert got[0].body == b"hello" and got[0].headers == {"k": "v"}
        ch.basic_ack(got[0].delivery_tag)
        ch2 = c.channel()
        ch2.tx_select()
        ch2.basic_publish(amqp.Message(b"tx"), routing_key=q)
        ch2.tx_commit()
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            c.drain_events(timeout=0.5)
        assert got[1].body == b"tx"
    finally:
        c.close()
