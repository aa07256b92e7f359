"""basic.nack (RabbitMQ extension): single, multiple with gaps, tag 0, requeue, dead-lettering.

Documents: 003_50388870ec53b6aa.txt (basic.nack: multiple, requeue=true/false, dead-lettering;
delivery tags), 004_ba6059c7056f3c65.txt (Reject vs Nack: nack is a RabbitMQ-only extension that
adds ``multiple``) and 001_27f7ea2622bbc99f.txt#ordering (requeued messages keep publication
order). basic.nack is not in the AMQP 0-9-1 XML, so every case is EXTENSION level and requires
the ``basic.nack`` capability; the semantics of ``multiple`` and of tag 0 follow basic.ack's
field doc in the spec XML, which RabbitMQ's extension reuses.

As in test_reject.py, a basic.get on the nacking channel (not a message count) is the barrier
proving the broker processed the nack.
"""

from __future__ import annotations

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import Event, RawChannel, UnexpectedClose
from conformance.verify import (
    Mismatch,
    Unsupported,
    body_list,
    consume_published,
    drain,
    expect_channel_close,
    get_n,
    pika_queue_channel,
    pika_session,
    publish_confirmed,
    settle,
)

R001 = "001_27f7ea2622bbc99f.txt"
R003 = "003_50388870ec53b6aa.txt"
R004 = "004_ba6059c7056f3c65.txt"
SRC_NACK = f"{R003}#basic-nack"
SRC_TAG = f"{R003}#the-delivery-tag"
SRC_REJECTION = f"{R004}#dealing-with-rejection"
SRC_ORDER = f"{R001}#ordering"
NACK = ["basic.nack"]


# -- helpers -------------------------------------------------------------------------------------


def nack_or_unsupported(ch: RawChannel, tag: int, *, multiple: bool, requeue: bool) -> None:
    """Send basic.nack; a 540 NOT_IMPLEMENTED close on the next round trip means the broker has
    no basic.nack (an optional extension): UNSUPPORTED rather than a failure."""
    ch.nack(tag, multiple=multiple, requeue=requeue)
    try:
        ch.barrier()
    except UnexpectedClose as exc:
        if exc.reply_code == 540:
            raise Unsupported("basic.nack answered with 540 NOT_IMPLEMENTED",
                              expected="basic.nack processed", observed=exc.event.describe()) from exc
        raise


# -- capability ------------------------------------------------------------------------------------


@case("nack.capability-advertised", sources=[SRC_NACK, SRC_REJECTION], level=Level.EXTENSION,
      description="A broker that processes basic.nack announces it in server-properties",
      expectation="after a basic.nack is accepted, connection.start's capabilities table has basic.nack=true")
def test_capability_advertised(declared_queue, ctx):
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [b"n1"])
    (ev,) = get_n(ch, q, 1)
    nack_or_unsupported(ch, int(ev.method.delivery_tag), multiple=False, requeue=True)
    caps = ch.conn.server_properties.get("capabilities") or {}
    ctx.check(bool(caps.get("basic.nack", False)), True, "server-properties capabilities['basic.nack']")


# -- the scenarios nack shares with reject (verify/settle.py) -------------------------------------

TWINS = [
    param(Case(
        id="nack.requeue-redelivered-flag", rules=("redelivered/implementation",),
        sources=(SRC_NACK, SRC_TAG), level=Level.EXTENSION, requires=tuple(NACK),
        description="A consumer nacks a delivery with requeue=true and receives it again",
        expectation="the redelivery carries redelivered=true",
    ), settle.requeue_redelivered_flag),
    param(Case(
        id="nack.requeue-false-discards", sources=(SRC_NACK, f"{R003}#delivery-guarantee-summary"),
        level=Level.EXTENSION, requires=tuple(NACK),
        description="basic.nack(requeue=false) on a queue without a dead-letter exchange",
        expectation="the message is discarded: the queue is empty afterwards",
    ), settle.requeue_false_discards),
    param(Case(
        id="nack.requeue-false-dead-letters", sources=(SRC_NACK,), level=Level.EXTENSION,
        requires=tuple(NACK), description="basic.nack(requeue=false) on a queue with x-dead-letter-exchange",
        expectation="the message is dead-lettered with an x-death entry whose reason is 'rejected'",
    ), settle.requeue_false_dead_letters),
]


@pytest.mark.parametrize("scenario", TWINS)
def test_settle_twin(declared_queue, amqp, ctx, cleanup, scenario: settle.Scenario):
    scenario(declared_queue, amqp, ctx, cleanup, "nack")


# -- single and multiple requeue -------------------------------------------------------------------


# (messages published and got, indexes of the deliveries acked first, index of the delivery nacked
# (None: tag 0), multiple, the bodies back in the queue afterwards (sorted), what they are)
REQUEUES = [
    param(Case(
        "nack.single-requeue", sources=(SRC_NACK, SRC_REJECTION), level=Level.EXTENSION, requires=tuple(NACK),
        description="basic.nack(tag, multiple=false, requeue=true) of one of two unacked messages",
        expectation="exactly that message is back in the queue (the other stays unacked)",
    ), 2, (), 1, False, ["n2"], "messages in the queue after the single nack"),
    param(Case(
        "nack.multiple-with-gaps", sources=(SRC_NACK, SRC_TAG), level=Level.EXTENSION, requires=tuple(NACK),
        description="Tags 1..5 unacked; ack 2 and 4; then basic.nack(5, multiple=true, requeue=true)",
        expectation="exactly 1, 3 and 5 are settled and requeued: the queue then holds n1, n3, n5 "
                    "and the channel stays open",
    ), 5, (1, 3), 4, True, ["n1", "n3", "n5"], "messages requeued by the multiple nack"),
    param(Case(
        "nack.zero-multiple-all-outstanding", sources=(SRC_NACK, SRC_TAG), level=Level.EXTENSION,
        requires=tuple(NACK),
        description="Three unacked messages; basic.nack(0, multiple=true, requeue=true)",
        expectation="tag 0 with multiple means all outstanding: all three are back in the queue",
    ), 3, (), None, True, ["n1", "n2", "n3"], "messages requeued by nack(0, multiple)"),
]


@pytest.mark.parametrize("n,acked,nacked,multiple,requeued,what", REQUEUES)
def test_nack_requeues(declared_queue, ctx, n: int, acked: tuple[int, ...], nacked: int | None,
                       multiple: bool, requeued: list[str], what: str) -> None:
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [b"n%d" % (i + 1) for i in range(n)])
    evs = get_n(ch, q, n)
    for i in acked:
        ch.ack(evs[i].method.delivery_tag)
    ch.nack(0 if nacked is None else evs[nacked].method.delivery_tag, multiple=multiple, requeue=True)
    ctx.check(sorted(body_list(drain(ch, q))), requeued, what)


@case(
    "nack.multiple-requeue-order",
    # quorum queues put nacked messages at the back: queue_types.requeue-position[quorum]
    queue_types=("classic",),
    premise="a nacked message goes back to its original position: classic queues only",
    sources=[SRC_ORDER, SRC_NACK],
    level=Level.EXTENSION,
    requires=NACK,
    description="A consumer (prefetch 4) holds n1..n4 of n1..n8 and nacks them with one "
    "basic.nack(4, multiple=true, requeue=true)",
    expectation="the consumer's next deliveries are n1..n8, in publication order",
)
def test_multiple_requeue_order(declared_queue, ctx):
    ch, q = declared_queue()
    _, first = consume_published(ch, q, [f"n{i}".encode() for i in range(1, 9)], take=4, prefetch=4)
    ch.nack(first[-1].method.delivery_tag, multiple=True, requeue=True)
    after: list[Event] = []
    while len(after) < 8:
        ev = ch.next_delivery(what=f"8 deliveries after the nack (had {len(after)})")
        after.append(ev)
        ch.ack(ev.method.delivery_tag)  # keep the prefetch window moving
    ctx.observe("redelivered flags", [bool(e.method.redelivered) for e in after])
    ctx.check(body_list(after), [f"n{i}" for i in range(1, 9)], "delivery order after the multiple nack")


# -- dead-lettering and errors ---------------------------------------------------------------------


@case("nack.unknown-tag-406", rules=["basic.ack/exists"], sources=[SRC_TAG, SRC_NACK], level=Level.EXTENSION,
      requires=NACK, description="basic.nack of a delivery tag that was never delivered on the channel",
      expectation="channel.close 406 PRECONDITION_FAILED (as basic.ack/exists requires for ack)")
def test_unknown_tag(declared_queue, ctx):
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [b"n1"])
    get_n(ch, q, 1)
    ch.nack(99, requeue=True)
    ev = expect_channel_close(ch, 406, what="basic.nack of unknown tag 99", method=spec.Basic.Nack)
    ctx.observe("close", ev.describe())


# -- client libraries ------------------------------------------------------------------------------


@case("nack.pika-multiple-requeue", sources=[SRC_NACK, SRC_REJECTION], level=Level.EXTENSION, requires=NACK,
      client="pika",
      description="pika: basic_get three messages, then basic_nack(last tag, multiple=True, requeue=True)",
      expectation="all three are back in the queue: draining it with basic_get returns p0, p1, p2")
def test_pika_multiple_requeue(broker_url, ctx, cleanup):

    q = cleanup.queue(ctx.name("q"))
    with pika_session(broker_url, ctx.timeout, "pika nack scenario") as conn:
        ch = pika_queue_channel(conn, q, [f"p{i}".encode() for i in range(3)])
        tags: list[int] = []
        for _ in range(3):
            method, _props, _body = ch.basic_get(q)
            if method is None:
                raise Mismatch(
                    "pika basic_get", expected="3 messages", observed=f"get-empty after {len(tags)}"
                )
            tags.append(method.delivery_tag)
        ch.basic_nack(tags[-1], multiple=True, requeue=True)
        got = []
        while True:
            method, _props, body = ch.basic_get(q, auto_ack=True)
            if method is None:
                break
            got.append(body.decode())
    ctx.check(sorted(got), ["p0", "p1", "p2"], "messages back in the queue after basic_nack(multiple)")


@case("nack.aio-pika-requeue-false-discards", sources=[SRC_NACK, f"{R003}#delivery-guarantee-summary"],
      level=Level.EXTENSION, requires=NACK, client="aio-pika",
      description="aio-pika: queue.get() then message.nack(requeue=False)",
      expectation="the message is discarded: a following queue.get() finds the queue empty")
def test_aio_pika_nack_discards(broker_url, ctx, cleanup):
    settle.aio_pika_requeue_false_discards(broker_url, ctx, cleanup, "nack")
