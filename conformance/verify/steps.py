"""Setup steps the scenario modules share: enqueue messages known to be there, take or read a
queue out, look at a queue, hand-made frames, and how long silence is listened for."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp.base import Frame

from conformance.model.verdicts import CaseTimeout, Mismatch
from conformance.protocol.raw import Event, RawChannel, UnexpectedClose, tags
from conformance.verify.confirms import settle_all
from conformance.verify.expect import reply_or_probe
from conformance.verify.fixtures import DeclareQueue
from conformance.verify.outcomes import short
from conformance.verify.unsupported import Unsupported


def publish_confirmed(ch: RawChannel, exchange: str, routing_key: str, bodies: Sequence[bytes], *,
                      properties: spec.Basic.Properties | None = None,
                      what: str | None = None) -> None:
    """Publish ``bodies`` on a separate confirm-mode channel of ``ch``'s connection and wait until
    every publish is confirmed, so the messages are known to be enqueued (in this order) before the
    case goes on. A nack is a setup Mismatch; missing confirms a TIMEOUT naming the unconfirmed ones
    (``what``: how the TIMEOUT names the wait)."""
    pub = ch.conn.channel()
    pub.confirm_select()
    for body in bodies:
        pub.publish(exchange, routing_key, body, properties=properties)
    try:
        st = settle_all(pub, len(bodies))
    except CaseTimeout as exc:
        raise CaseTimeout(what or f"setup: publisher confirms for {len(bodies)} messages", exc.seconds,
                          observed=exc.observed) from exc
    if st.nacked:
        raise Mismatch("setup publish", expected="every publish confirmed with basic.ack",
                       observed=f"basic.nack for publishes {sorted(st.nacked)[:10]}")
    pub.close()


def confirms_offered(ch: RawChannel) -> bool:
    """Whether the broker advertised ``publisher_confirms`` in connection.start's capabilities."""
    caps = ch.conn.server_properties.get("capabilities") or {}
    return bool(isinstance(caps, dict) and caps.get("publisher_confirms"))


def drain(ch: RawChannel, queue: str, limit: int = 100) -> list[Event]:
    """Every ready message of ``queue`` by basic.get with auto-ack, until get-empty (at most ``limit``)."""
    got: list[Event] = []
    for _ in range(limit):
        ev = ch.get(queue, no_ack=True)
        if ev is None:
            break
        got.append(ev)
    return got


def fill(ch: RawChannel, queue: str, n: int, prefix: str = "m", size: int = 0) -> list[bytes]:
    """Put ``n`` messages ``<prefix>1..n`` (padded with dots to ``size`` octets) into ``queue`` by the
    default exchange; the bodies sent.

    Confirmed (:func:`publish_confirmed`, a side channel of ``ch``'s connection) where the broker
    offers confirms, so they are in the queue before the case reads it: a barrier proves only that
    the channel processed the publishes, not that a quorum queue applied them (RabbitMQ 4.0.5
    quorum: ``acks.ack-zero-multiple-acks-all`` got 2 of 3 by basic.get right after the barrier,
    once in a fresh-clone CI run). A broker without confirms gets the publishes on ``ch`` and a
    barrier, the best it offers."""
    sent = []
    for i in range(1, n + 1):
        body = f"{prefix}{i}".encode()
        sent.append(body + b"." * max(0, size - len(body)))
    if confirms_offered(ch):
        publish_confirmed(ch, "", queue, sent)
        return sent
    for body in sent:
        ch.publish("", queue, body)
    ch.barrier()
    return sent


def passive_answer(ch: RawChannel, queue: str) -> str:
    """What a passive queue.declare of ``queue`` is answered, short form:
    ``queue.declare-ok (queue exists, 2 messages)`` or the close (``channel.close 404 NOT_FOUND``)."""
    try:
        ok = ch.declare_queue(queue, passive=True)
    except UnexpectedClose as exc:
        return short(exc.event)
    return f"queue.declare-ok (queue exists, {ok.message_count} messages)"


def get_n(ch: RawChannel, queue: str, n: int, what: str = "setup basic.get") -> list[Event]:
    """``n`` messages by basic.get with manual ack; a get-empty before the n-th is a Mismatch."""
    got: list[Event] = []
    for i in range(n):
        ev = ch.get(queue)
        if ev is None:
            raise Mismatch(what, expected=f"{n} messages in {queue}", observed=f"get-empty after {i}")
        got.append(ev)
    return got


def get_one(ch: RawChannel, queue: str, what: str) -> Event:
    """One message by basic.get with manual ack (get-empty is a Mismatch naming ``what``)."""
    return get_n(ch, queue, 1, what)[0]


def get_tags(ch: RawChannel, queue: str, n: int) -> list[int]:
    """The delivery tags of ``n`` messages taken by basic.get with manual ack."""
    return tags(get_n(ch, queue, n))


def body_list(events: Sequence[Event]) -> list[str]:
    """The bodies of ``events`` as text, in order (what order and content checks compare)."""
    return [(e.body or b"").decode() for e in events]


def bad_name_frame(ch: RawChannel, bad: str, make: Callable[[str], Frame]) -> bytes:
    """A method frame carrying a name pamqp refuses to encode (it validates names): encode a
    same-length placeholder and swap the bytes."""
    placeholder = "z" * len(bad.encode())
    data = pframe.marshal(make(placeholder), ch.id)
    if data.count(placeholder.encode()) != 1:
        raise ValueError("the placeholder name must occur exactly once in the frame")
    return data.replace(placeholder.encode(), bad.encode())


def tx_select(ch: RawChannel) -> None:
    """tx.select, then (without a reply within the settle window) a probe: a broker that answers
    the probe but never tx.select-ok ignored the method (a precise FAIL, not a TIMEOUT); 540
    NOT_IMPLEMENTED means tx is not offered (:func:`~conformance.verify.expect.reply_or_probe`)."""
    ch.send(spec.Tx.Select())
    try:
        ev = reply_or_probe(ch, (spec.Tx.SelectOk,), "tx.select-ok (reply to tx.select)")
    except UnexpectedClose as exc:
        if exc.reply_code == 540:
            raise Unsupported("tx.select answered 540 NOT_IMPLEMENTED", expected="tx.select-ok",
                              observed=exc.event.describe()) from exc
        raise
    if isinstance(ev.method, spec.Exchange.DeclareOk):
        raise Mismatch("tx.select", expected="tx.select-ok before the reply to a later probe",
                       observed="no tx.select-ok: the probe sent after tx.select (exchange.declare passive) "
                                "was answered first")


# --- routing ---
# Where a published message went: publish it, then take it back from a queue.
#
# Routing cases (the default exchange, the exchange types, exchange-to-exchange bindings, a body
# of frame-min-size) all end the same way: publish one message, make sure the broker has
# processed the publish (a round trip), and read the queue it should have reached.


def routed_body(ch: RawChannel, exchange: str, routing_key: str, body: bytes, queue: str, *,
                properties: spec.Basic.Properties | None = None) -> bytes | None:
    """Publish ``body`` to ``exchange`` with ``routing_key`` and return what ``queue`` then holds:
    the body of its first message (taken with basic.get no-ack), or None when it is empty.

    The publish goes on a separate confirm-mode channel of ``ch``'s connection and is confirmed
    before the get: a barrier on the channel proves only that the channel processed the publish,
    not that a quorum queue applied it (RabbitMQ 3.8.9 quorum: get-empty right after the barrier,
    once in a CI run), while a confirm is sent once every queue the message was routed to has it
    (RabbitMQ's confirms guide), at once for an unroutable one."""
    publish_confirmed(ch, exchange, routing_key, [body], properties=properties, what="the publish's confirm")
    ev = ch.get(queue, no_ack=True)
    return ev.body if ev is not None else None

# --- pipeline ---
# Many methods sent at once, their replies counted: the "the server supports at least N"
# rules (256 queues, 16 exchanges, 16 consumers) are checked this way, without a round trip each.


def pipelined(ch: RawChannel, methods: Sequence[Any], ok: type, what: str) -> int:
    """Send every method of ``methods`` on ``ch``, then wait for one ``ok`` reply each; return
    how many arrived (each wait is bounded: a missing reply is a timeout naming ``what`` and the
    count so far)."""
    for method in methods:
        ch.send(method)
    oks = 0
    for _ in methods:
        ch.wait(ok, f"{what} (had {oks})")
        oks += 1
    return oks

# --- deadletter ---
# Where dead letters go: the exchange a queue names in ``x-dead-letter-exchange`` and a queue
# behind it, so a case can read what was dead-lettered (RabbitMQ's dead letter exchanges guide).


def dead_letter_target(ch: RawChannel, ctx: Any, cleanup: Any) -> tuple[str, str]:
    """A fanout exchange ``ctx.name("dlx")`` with the queue ``ctx.name("dlq")`` bound to it,
    declared on ``ch`` and deleted after the case; returns (exchange, queue). The queue is a
    plain one whatever ``--amqp-queue-type`` says: it only collects."""
    dlx = cleanup.exchange(ctx.name("dlx"))
    dlq = cleanup.queue(ctx.name("dlq"))
    ch.declare_exchange(dlx, "fanout")
    ch.declare_queue(dlq)
    ch.bind(dlq, dlx)
    return dlx, dlq

# --- consuming ---
# A consumer that has taken deliveries: the starting point of the cases that settle them later
# (basic.reject, basic.nack, basic.recover).


def consume_published(ch: RawChannel, queue: str, bodies: Sequence[bytes], *, take: int | None = None,
                      prefetch: int | None = None, no_ack: bool = False) -> tuple[str, list[Event]]:
    """Publish ``bodies`` to ``queue`` (each confirmed, so all are enqueued), start a consumer on
    ``ch`` (after basic.qos ``prefetch`` when given; ``no_ack`` as basic.consume's field) and wait
    for its first ``take`` deliveries (default: one per body), acking none of them.

    Returns (consumer tag, deliveries); fewer deliveries within the case timeout is a TIMEOUT."""
    publish_confirmed(ch, "", queue, bodies)
    if prefetch is not None:
        ch.qos(prefetch)
    tag = ch.consume(queue, no_ack=no_ack)
    return tag, ch.deliveries(len(bodies) if take is None else take)


def competing_consumers(declared_queue: DeclareQueue, amqp: Any, *,
                        prefetch: int) -> tuple[RawChannel, RawChannel, str]:
    """Two consumers of one declared queue, each on a channel of its own connection, both with
    basic.qos ``prefetch``: (channel A, channel B, queue). A declared the queue."""
    a, queue = declared_queue()
    b = amqp.channel()
    for ch in (a, b):
        ch.qos(prefetch)
    for ch in (a, b):
        ch.consume(queue)
    return a, b, queue
