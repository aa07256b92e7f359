"""basic.recover and basic.recover-async: redelivery of a channel's unacknowledged messages.

Documents: 004_ba6059c7056f3c65.txt#resurfacing-messages-in-limbo (recover with requeue=true
redelivers to any eligible consumer, with requeue=false only to the original one), the spec XML's
``basic.recover`` / ``basic.recover-async`` methods (rules ``basic.recover/01``,
``basic.recover-async/01``: "The server MUST set the redelivered flag on all messages that are
resent"), 003_50388870ec53b6aa.txt#auto-acknowledgment-mode (auto-acked deliveries are settled on
delivery) and DESIGN.md's measured RabbitMQ 3.10.8 fact that recover(requeue=false) closes the
connection with 540 NOT_IMPLEMENTED — a per-profile expectation, not a failure of RabbitMQ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pamqp import commands as spec

from conformance.model.cases import Level, case
from conformance.protocol import Event, RawChannel, UnexpectedClose, method_name, reply_name
from conformance.verify import (
    CaseTimeout,
    Mismatch,
    Unsupported,
    aio_pika_session,
    consume_published,
    expect_no_delivery,
    pika_deliveries,
    pika_queue_channel,
    pika_session,
    publish_confirmed,
    quiet_window,
    run_async,
)

R003 = "003_50388870ec53b6aa.txt"
R004 = "004_ba6059c7056f3c65.txt"
SRC_RECOVER = f"{R004}#resurfacing-messages-in-limbo"
SRC_AUTO_ACK = f"{R003}#auto-acknowledgment-mode"
DESIGN_540 = "DESIGN.md 'Facts measured on RabbitMQ 3.10.8': basic.recover(requeue=false) → connection " \
             "closed 540 NOT_IMPLEMENTED"


# -- helpers -------------------------------------------------------------------------------------


def flagged(events: Sequence[Event]) -> list[tuple[str, bool]]:
    """(body, redelivered) per event, sorted by body (order is not what these cases check)."""
    return sorted(((e.body or b"").decode(), bool(e.method.redelivered)) for e in events)


def redeliveries(ch: RawChannel, n: int, ctx: Any, after: str) -> list[Event]:
    """The ``n`` deliveries expected after a recover; fewer within the case timeout is a broker
    deviation (it answered, but did not redeliver), shown with what did arrive."""
    got: list[Event] = []
    try:
        while len(got) < n:
            got.append(ch.next_delivery(what=f"{n} redeliveries after {after}"))
    except CaseTimeout as exc:
        raise Mismatch(f"redeliveries after {after}", expected=f"{n} deliveries",
                       observed=f"{len(got)} within {ctx.timeout:.1f}s: {flagged(got)}") from exc
    return got


# -- requeue=true ----------------------------------------------------------------------------------


@case("recover.requeue-redelivers-consumer", rules=["basic.recover/01"], sources=[SRC_RECOVER],
      level=Level.MUST,
      description="A consumer holds three unacked deliveries and sends basic.recover(requeue=true)",
      expectation="all three are delivered again, each with redelivered=true")
def test_requeue_redelivers_consumer(declared_queue, ctx):
    ch, q = declared_queue()
    consume_published(ch, q, [b"r1", b"r2", b"r3"])
    ch.recover(requeue=True)
    again = redeliveries(ch, 3, ctx, "basic.recover(requeue=true)")
    ctx.check(flagged(again), [("r1", True), ("r2", True), ("r3", True)], "(body, redelivered) after recover")


@case("recover.requeue-redelivers-get", rules=["basic.recover/01"], sources=[SRC_RECOVER], level=Level.MUST,
      description="Two messages taken with basic.get (manual ack), then basic.recover(requeue=true)",
      expectation="both are back in the queue and basic.get returns them with redelivered=true")
def test_requeue_redelivers_get(declared_queue, ctx):
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [b"r1", b"r2"])
    for _ in range(2):
        if ch.get(q) is None:
            raise Mismatch("setup basic.get", expected="2 messages", observed="basic.get-empty")
    ch.recover(requeue=True)
    got = []
    for _ in range(3):  # one more than expected, to see an extra copy
        ev = ch.get(q, no_ack=True)
        if ev is None:
            break
        got.append(ev)
    ctx.check(flagged(got), [("r1", True), ("r2", True)], "(body, redelivered) by basic.get after recover")


@case("recover.no-ack-not-redelivered", rules=["basic/09"], sources=[SRC_AUTO_ACK, SRC_RECOVER],
      level=Level.MUST,
      description="A no-ack consumer receives two messages, then sends basic.recover(requeue=true)",
      expectation="nothing is redelivered: auto-acked deliveries are not unacknowledged messages")
def test_no_ack_not_redelivered(declared_queue, ctx):
    ch, q = declared_queue()
    consume_published(ch, q, [b"r1", b"r2"], no_ack=True)
    ch.recover(requeue=True)
    expect_no_delivery(ch, quiet_window(ctx.timeout), what="redelivery of auto-acked messages after recover")
    ctx.observe("redeliveries", "none")


@case("recover.nothing-unacked-recover-ok", sources=[SRC_RECOVER], level=Level.MUST,
      description="basic.recover(requeue=true) on a channel with no unacknowledged messages (the spec "
                  "XML: 'Zero or more messages may be redelivered'; recover is synchronous)",
      expectation="the broker answers basic.recover-ok and the channel stays open")
def test_nothing_unacked(amqp, ctx):
    ch = amqp.channel()
    reply = ch.rpc(spec.Basic.Recover(requeue=True))
    ch.barrier()  # the channel is still open after the reply
    ctx.check(method_name(reply), "basic.recover-ok", "reply to basic.recover")


@case("recover.frees-prefetch", rules=["basic.recover/01"], sources=[SRC_RECOVER], level=Level.MUST,
      description="A consumer with basic.qos prefetch-count 2 holds 2 of 4 messages unacked (window full) "
                  "and sends basic.recover(requeue=true)",
      expectation="deliveries resume: two deliveries arrive after recover-ok")
def test_frees_prefetch(declared_queue, ctx):
    ch, q = declared_queue()
    consume_published(ch, q, [b"r1", b"r2", b"r3", b"r4"], take=2, prefetch=2)
    expect_no_delivery(
        ch, quiet_window(ctx.timeout), what="a third delivery while the prefetch window is full"
    )
    ch.recover(requeue=True)
    again = redeliveries(ch, 2, ctx, "basic.recover(requeue=true) with a full prefetch window")
    ctx.check(len(again), 2, "deliveries after recover")
    ctx.observe("(body, redelivered)", flagged(again))


@case("recover.async-redelivered", rules=["basic.recover-async/01"], sources=[SRC_RECOVER], level=Level.MUST,
      description="basic.recover-async(requeue=true) (deprecated, server MAY implement) with two unacked "
                  "deliveries; 540 NOT_IMPLEMENTED counts as UNSUPPORTED",
      expectation="both are delivered again, each with redelivered=true")
def test_recover_async(declared_queue, ctx):
    ch, q = declared_queue()
    consume_published(ch, q, [b"r1", b"r2"])
    ch.send(spec.Basic.RecoverAsync(requeue=True))
    try:
        again = redeliveries(ch, 2, ctx, "basic.recover-async(requeue=true)")
    except UnexpectedClose as exc:
        if exc.reply_code == 540:
            raise Unsupported("basic.recover-async is not implemented (540)", expected="redeliveries",
                              observed=exc.event.describe()) from exc
        raise
    ctx.check(flagged(again), [("r1", True), ("r2", True)], "(body, redelivered) after recover-async")


# -- requeue=false: per profile --------------------------------------------------------------------


@case("recover.requeue-false", sources=[SRC_RECOVER], level=Level.MUST,
      description="A consumer holds one unacked delivery and sends basic.recover(requeue=false)",
      expectation="rabbitmq: the connection is closed with 540 NOT_IMPLEMENTED; spec: the message is "
                  "redelivered to the original consumer with redelivered=true",
      expected={"rabbitmq": "connection.close 540 NOT_IMPLEMENTED",
                "spec": "redelivered to the original consumer, redelivered=true"},
      expected_sources={
          "rabbitmq": DESIGN_540,
          "spec": "spec XML basic.recover field requeue: 'If this field is zero, the message will be "
                  f"redelivered to the original recipient' + basic.recover/01; {SRC_RECOVER}",
      })
def test_requeue_false(declared_queue, ctx):
    ch, q = declared_queue()
    tag, _ = consume_published(ch, q, [b"r1"])
    try:
        ch.recover(requeue=False)
        again = ch.next_delivery(what="a redelivery after basic.recover(requeue=false)")
    except UnexpectedClose as exc:
        m = getattr(exc.event, "method", None)
        kind = "connection.close" if isinstance(m, spec.Connection.Close) else \
            "channel.close" if isinstance(m, spec.Channel.Close) else exc.event.describe()
        ctx.observe("close", exc.event.describe())
        observed = f"{kind} {reply_name(exc.reply_code)}" if exc.reply_code else kind
    else:
        ctx.observe("redelivery", again.describe())
        to = (
            "the original consumer"
            if again.method.consumer_tag == tag
            else f"consumer {again.method.consumer_tag}"
        )
        observed = f"redelivered to {to}, redelivered={str(bool(again.method.redelivered)).lower()}"
    ctx.check_profile(observed, "outcome of basic.recover(requeue=false)")


# -- client libraries ------------------------------------------------------------------------------


@case("recover.pika-basic-recover", rules=["basic.recover/01"], sources=[SRC_RECOVER], level=Level.MUST,
      client="pika",
      description="pika consumer loop: take two deliveries without ack, basic_recover(requeue=True), go on "
                  "consuming",
      expectation="the two messages come again with redelivered=True")
def test_pika_basic_recover(broker_url, ctx, cleanup):

    q = cleanup.queue(ctx.name("q"))
    seen: list[tuple[str, bool]] = []
    with pika_session(broker_url, ctx.timeout, "pika basic_recover scenario") as conn:
        ch = pika_queue_channel(conn, q, [b"p1", b"p2"])
        for method, body in pika_deliveries(ch, q, ctx.timeout, seen):
            seen.append((body.decode(), bool(method.redelivered)))
            if len(seen) == 2:
                ch.basic_recover(requeue=True)
            if len(seen) == 4:
                break
        ch.cancel()
    ctx.observe("deliveries", seen)
    ctx.check(sorted(seen[2:]), [("p1", True), ("p2", True)], "(body, redelivered) after basic_recover")


@case("recover.aio-pika-recover", rules=["basic.recover/01"], sources=[SRC_RECOVER], level=Level.MUST,
      client="aio-pika",
      description="aio-pika: queue.get() two messages (manual ack), basic_recover(requeue=True) on the "
                  "underlying channel, queue.get() again",
      expectation="both messages are returned again with redelivered=True")
def test_aio_pika_recover(broker_url, ctx, cleanup, queue_type):
    q = cleanup.queue(ctx.name("q"))

    async def scenario() -> list[tuple[str, bool]]:
        import aio_pika

        async with aio_pika_session(
            broker_url, ctx.timeout, what="aio-pika basic_recover", expected="redeliveries"
        ) as conn:
            channel = await conn.channel()
            queue = await channel.declare_queue(q, **ctx.declare_fields())
            for body in (b"a1", b"a2"):
                await channel.default_exchange.publish(aio_pika.Message(body), routing_key=q)
            for _ in range(2):
                if await queue.get(timeout=ctx.timeout, fail=False) is None:
                    raise Mismatch("queue.get()", expected="2 messages", observed="queue empty")
            underlay = await channel.get_underlay_channel()
            await underlay.basic_recover(requeue=True)
            got = []
            for _ in range(3):
                msg = await queue.get(timeout=ctx.timeout, fail=False, no_ack=True)
                if msg is None:
                    break
                got.append((msg.body.decode(), bool(msg.redelivered)))
            return sorted(got)

    observed = run_async(scenario(), ctx.timeout * 3, "the aio-pika recover scenario")
    ctx.check(observed, [("a1", True), ("a2", True)], "(body, redelivered) by queue.get() after recover")
