"""basic.qos: prefetch windows for acknowledged consumers.

Covers: the spec XML's ``basic.qos`` (``basic.qos.prefetch-count/01``: "The server may send less
data in advance than allowed by the client's specified prefetch windows but it MUST NOT send
more"; ``basic.qos.prefetch-size/01``; the field texts "The prefetch-count is ignored if the no-ack
option is set" and global "By default the QoS settings apply to the current channel only. If this
field is set, they are applied to the entire connection"); the book chapter on acknowledgements
(``003_50388870ec53b6aa.txt#basic-consume-push-delivery``: the broker pushes "as fast as the
channel's prefetch limit allows"); RabbitMQ's reinterpretation of ``global`` (its "Consumer
Prefetch" guide: global=false → the limit applies to each consumer separately, global=true →
shared by all consumers of the channel) and its refusal of prefetch-size, both measured on
RabbitMQ 3.10.8.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import RawChannel, UnexpectedClose, bodies
from conformance.verify import (
    CaseTimeout,
    DeclareQueue,
    aio_pika_fill,
    deliveries_until_cancelled,
    drain,
    expect_no_delivery,
    expect_no_delivery_until_cancelled,
    fill,
    pika_fill,
    quiet_window,
    short,
)

PREFETCH = "basic.qos.prefetch-count/01"
PUSH = "003_50388870ec53b6aa.txt#basic-consume-push-delivery"
RABBIT_GLOBAL = ("RabbitMQ 'Consumer Prefetch' guide, measured on RabbitMQ 3.10.8: basic.qos(global=false) "
                 "limits each consumer of the channel separately (two consumers → two unacked deliveries)")
SPEC_GLOBAL = "basic.qos global field: 'By default the QoS settings apply to the current channel only'"


def _count_until_quiet(ch: RawChannel, quiet: float, limit: int) -> int:
    """Deliveries that arrive until ``quiet`` seconds pass without one (at most ``limit``)."""
    got = 0
    while got < limit:
        try:
            ch.next_delivery(timeout=quiet)
        except CaseTimeout:
            break
        got += 1
    return got


def _prefetch_consumer(declared_queue: DeclareQueue, *, queued: int, prefetch: int,
                       no_ack: bool = False) -> tuple[RawChannel, str]:
    """A queue holding ``queued`` messages (m1, m2, …), then on its channel basic.qos(prefetch-count=
    ``prefetch``) and a consumer of the queue (``no_ack`` as given); the channel and the consumer's tag."""
    ch, q = declared_queue()
    fill(ch, q, queued)
    ch.qos(prefetch)
    return ch, ch.consume(q, no_ack=no_ack)


@case("qos.prefetch-count-bounds-unacked", rules=[PREFETCH], sources=[PUSH], level=Level.MUST,
      description=(
          "basic.qos(prefetch-count=2), five messages queued, one acknowledged consumer that never acks"
      ),
      expectation="exactly two messages are delivered; the third is not sent while both are unacked")
def test_prefetch_count_bounds(declared_queue, ctx) -> None:
    ch, tag = _prefetch_consumer(declared_queue, queued=5, prefetch=2)
    ch.deliveries(2)
    expect_no_delivery_until_cancelled(ch, tag, what="a third delivery beyond prefetch-count=2")


@case("qos.ack-frees-one-slot", rules=[PREFETCH], sources=[PUSH], level=Level.MUST,
      description="prefetch-count=1 consumer with three messages queued acknowledges its first delivery",
      expectation="exactly one more message (the second) is delivered after the ack, then nothing")
def test_ack_frees_one_slot(declared_queue, ctx) -> None:
    ch, tag = _prefetch_consumer(declared_queue, queued=3, prefetch=1)
    first = ch.next_delivery()
    # The consumer must stay for the ack to free its slot: no event ends this silence (docs/waits.md).
    expect_no_delivery(ch, quiet_window(ctx.timeout), what="a second delivery before the first is acked")
    ch.ack(int(first.method.delivery_tag))
    after = [ch.next_delivery(what="the delivery freed by the ack")]
    expect_no_delivery_until_cancelled(ch, tag, what="a further delivery while the second is unacked")
    ctx.check(bodies([first, *after]), [b"m1", b"m2"], "bodies delivered")


@case("qos.no-ack-ignores-prefetch", rules=[PREFETCH], sources=[PUSH], level=Level.MUST,
      description="basic.qos(prefetch-count=1) then a no-ack consumer on a queue of three messages",
      expectation="all three are delivered ('The prefetch-count is ignored if the no-ack option is set')")
def test_no_ack_ignores_prefetch(declared_queue, ctx) -> None:
    ch, _tag = _prefetch_consumer(declared_queue, queued=3, prefetch=1, no_ack=True)
    ctx.check(bodies(ch.deliveries(3)), [b"m1", b"m2", b"m3"], "bodies delivered to the no-ack consumer")


# The same scenario with global=false and global=true: only the flag and the expected count differ.
GLOBAL_SCOPE = [
    param(Case(
        id="qos.global-false-scope", rules=(PREFETCH,), level=Level.MUST,
        description="basic.qos(prefetch-count=1, global=false), then two acknowledged consumers on the same "
                    "channel, each on its own queue of two messages",
        expectation="per profile: spec → the window is the channel's, so 1 delivery in total; rabbitmq → "
                    "the window is per consumer, so 2 deliveries (one each)",
        expected={"rabbitmq": 2, "spec": 1},
        expected_sources={"rabbitmq": RABBIT_GLOBAL, "spec": SPEC_GLOBAL},
    ), False),
    param(Case(
        # RabbitMQ's quorum queues refuse consumers on a global-QoS channel (540):
        # queue_types.global-qos-consume-540[quorum]; the premise holds for classic queues.
        queue_types=("classic",), premise="global QoS consumers: classic queues only",
        id="qos.global-true-shared-by-channel",
        rules=(PREFETCH,),
        level=Level.MUST,
        description="basic.qos(prefetch-count=1, global=true), then two acknowledged consumers on the same "
                    "channel, each on its own queue of two messages",
        expectation="one delivery in total: the window is shared by the channel's consumers (RabbitMQ: per "
                    "channel; spec: per connection — both bound this channel to one unacked message)",
        default=1,
    ), True),
]


@pytest.mark.parametrize("global_", GLOBAL_SCOPE)
def test_global_scope(declared_queue, ctx, global_: bool) -> None:
    ch, qa = declared_queue("qa")
    _, qb = declared_queue("qb", ch=ch)
    fill(ch, qa, 2)
    fill(ch, qb, 2)
    ch.qos(1, global_=global_)
    ch.consume(qa)
    ch.consume(qb)
    # A window, not a fence: the two queues serve their consumers independently, and a cancel
    # after the first delivery could end the second consumer before its queue had its turn
    # (docs/waits.md).
    ctx.check_profile(
        _count_until_quiet(ch, quiet_window(ctx.timeout), 4), "unacked deliveries on the channel"
    )


@case(
    "qos.prefetch-size-nonzero", rules=["basic.qos.prefetch-size/01"], level=Level.MUST,
    description="basic.qos(prefetch-size=10 octets), then one 100-octet message to an acknowledged consumer",
    expectation="per profile: spec → qos-ok and the single message is still delivered (the size window "
    "never blocks a single message); rabbitmq → connection closed with 540 NOT_IMPLEMENTED",
    expected={"rabbitmq": "connection.close 540 NOT_IMPLEMENTED", "spec": "delivered"},
    expected_sources={
        "rabbitmq": "measured on RabbitMQ 3.10.8: connection.close 540 'NOT_IMPLEMENTED - prefetch_size!=0 "
        "(10)' "
        "(class 60, method 10)",
        "spec": "basic.qos.prefetch-size/01 and its scenario",
    },
)
def test_prefetch_size_nonzero(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    try:
        ch.qos(0, prefetch_size=10)
        fill(ch, q, 1, size=100)
        ch.consume(q)
        try:
            ev = ch.next_delivery(what="the single 100-octet message")
            observed = (
                "delivered" if len(ev.body or b"") == 100 else f"delivered {len(ev.body or b'')} octets"
            )
        except CaseTimeout:
            # The window was accepted and then withheld the message: a precise mismatch, not a
            # silent broker.
            observed = f"basic.qos-ok, then no delivery within {ctx.timeout:.0f}s"
    except UnexpectedClose as exc:
        ctx.observe("close", exc.event.describe())
        observed = short(exc.event)
    ctx.check_profile(observed, "outcome of prefetch-size=10")


def _octets(ev: Any) -> str:
    body = ev.body or b""
    return f"{body[:2].decode(errors='replace')}, {len(body)} octets"


# The same refusal seen from the queue's side (rabbitmq) and the window's other half (spec): two
# messages larger than the window, queued before basic.qos.
SIZE_RABBITMQ = {"basic.qos": "connection.close 540 NOT_IMPLEMENTED",
                 "then": {"the queue, read on a new connection": ["m1, 100 octets, redelivered False",
                                                                  "m2, 100 octets, redelivered False"]}}
SIZE_SPEC = {"basic.qos": "basic.qos-ok",
             "then": {"first delivery": "m1, 100 octets", "while m1 is unacked": "nothing",
                      "after basic.ack of m1": "m2, 100 octets"}}


@case(
    "qos.prefetch-size-nonzero-queue-side", rules=["basic.qos.prefetch-size/01"], level=Level.MUST,
    description="two 100-octet messages m1, m2 queued (confirmed); then basic.qos(prefetch-size=10 octets) "
    "and an acknowledged consumer on the same channel",
    expectation="per profile: spec → qos-ok; m1 is delivered whole (the window never blocks a single "
    "message), m2 is not sent in advance while m1 is unacked (larger than the window), and is delivered "
    "whole after m1's ack; rabbitmq → connection.close 540 NOT_IMPLEMENTED, and on a new connection the "
    "queue still holds m1 and m2 whole, never delivered (redelivered false)",
    expected={"rabbitmq": SIZE_RABBITMQ, "spec": SIZE_SPEC},
    expected_sources={
        "rabbitmq": "measured on RabbitMQ 3.10.8: basic.qos(prefetch-size != 0) is answered connection.close "
        "540 'NOT_IMPLEMENTED - prefetch_size!=0 (10)' (qos.prefetch-size-nonzero); the queued messages "
        "stay, undelivered",
        "spec": "basic.qos.prefetch-size/01 (the size window limits only 'the sending in advance of more "
        "messages while the client still has one or more unacknowledged messages') and the prefetch-size "
        "field ('The server will send a message in advance if it is equal to or smaller in size than the "
        "available prefetch size')",
    },
)
def test_prefetch_size_queue_side(declared_queue, amqp, ctx) -> None:
    ch, q = declared_queue()
    fill(ch, q, 2, size=100)
    try:
        ch.qos(0, prefetch_size=10)
    except UnexpectedClose as exc:
        ctx.observe("close", exc.event.describe())
        after = drain(amqp.channel(), q)
        ctx.check_profile({"basic.qos": short(exc.event), "then": {"the queue, read on a new connection": [
            f"{_octets(ev)}, redelivered {bool(ev.method.redelivered)}" for ev in after]}},
            "basic.qos(prefetch-size=10), then the queue")
        return
    tag = ch.consume(q)
    then: dict[str, str] = {}
    try:
        first = ch.next_delivery(what="the first 100-octet message")
    except CaseTimeout:
        # accepted, then withheld: a precise mismatch, not a silent broker
        then["first delivery"] = f"none within {ctx.timeout:.0f}s"
    else:
        then["first delivery"] = _octets(first)
        # The consumer must stay for the ack to be heard: no event ends this silence (docs/waits.md).
        try:
            then["while m1 is unacked"] = _octets(ch.next_delivery(timeout=quiet_window(ctx.timeout)))
        except CaseTimeout:
            then["while m1 is unacked"] = "nothing"
        early = then["while m1 is unacked"] != "nothing"
        ch.ack(int(first.method.delivery_tag))
        if early:  # m2 came already: whatever else comes before the cancel-ok
            rest = deliveries_until_cancelled(ch, [tag])
            then["after basic.ack of m1"] = ", ".join(map(_octets, rest)) or "nothing"
        else:
            try:
                then["after basic.ack of m1"] = _octets(ch.next_delivery(what="the delivery after the ack"))
            except CaseTimeout:
                then["after basic.ack of m1"] = f"none within {ctx.timeout:.0f}s"
    ctx.check_profile({"basic.qos": "basic.qos-ok", "then": then},
                      "basic.qos(prefetch-size=10), then the queue")


# -- client libraries -----------------------------------------------------------------------------


@case("qos.pika-basic-qos-one", rules=[PREFETCH], sources=[PUSH], level=Level.MUST, client="pika",
      description="pika: basic_qos(prefetch_count=1), basic_consume without acking, three messages queued",
      expectation="the callback is called once; after basic_ack of it, exactly once more")
def test_pika_basic_qos(broker_url, ctx, cleanup) -> None:
    from conformance.verify import pika_session

    q = cleanup.queue(ctx.name("q"))
    seen: list[Any] = []
    counts: list[int] = []
    with pika_session(broker_url, ctx.timeout, "pika prefetch scenario") as conn:
        ch = conn.channel()
        pika_fill(ch, q, [b"p1", b"p2", b"p3"])
        ch.basic_qos(prefetch_count=1)
        ch.basic_consume(q, lambda _c, method, _p, _b: seen.append(method.delivery_tag), auto_ack=False)
        conn.process_data_events(time_limit=quiet_window(ctx.timeout) * 2)
        counts.append(len(seen))
        if seen:
            ch.basic_ack(delivery_tag=seen[0])
        conn.process_data_events(time_limit=quiet_window(ctx.timeout) * 2)
        counts.append(len(seen))
    ctx.check(counts, [1, 2], "callbacks before and after the ack")


@case("qos.aio-pika-set-qos", rules=[PREFETCH], sources=[PUSH], level=Level.MUST, client="aio-pika",
      description="aio-pika: await channel.set_qos(prefetch_count=2), consume four messages without acking",
      expectation=(
          "two messages arrive and no third while both are unacked; after message.ack() of one, a third"
      ))
def test_aio_pika_set_qos(broker_url, ctx, cleanup, queue_type) -> None:
    from conformance.verify import aio_pika_session, run_async

    q = cleanup.queue(ctx.name("q"))
    quiet = quiet_window(ctx.timeout)

    async def scenario() -> list[int]:
        async with aio_pika_session(broker_url, ctx.timeout) as conn:
            channel = await conn.channel()
            await channel.set_qos(prefetch_count=2)
            queue = await aio_pika_fill(channel, q, [b"a1", b"a2", b"a3", b"a4"], **ctx.declare_fields())
            got: list[Any] = []
            arrived = asyncio.Event()

            async def on_message(message: Any) -> None:
                got.append(message)
                arrived.set()

            await queue.consume(on_message, no_ack=False)

            async def until(n: int) -> None:
                while len(got) < n:
                    arrived.clear()
                    await arrived.wait()

            await asyncio.wait_for(until(2), ctx.timeout)
            await asyncio.sleep(quiet)  # bounded silence: a third must not come while two are unacked
            counts = [len(got)]
            await got[0].ack()
            await asyncio.wait_for(until(3), ctx.timeout)
            await asyncio.sleep(quiet)
            counts.append(len(got))
            return counts

    ctx.check(run_async(scenario(), ctx.timeout * 2, "aio-pika set_qos scenario"), [2, 3],
              "messages received before and after one ack")
