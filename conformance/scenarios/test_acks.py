"""Consume, get and acknowledgements: delivery tags, ack/auto-ack, requeue on close, cancel.

Covers: the spec XML's ``delivery-tag`` and ``redelivered`` domains (``delivery-tag/non-zero``,
``delivery-tag/channel-local``, ``redelivered/implementation``), ``basic/09`` (no-ack delivery),
``basic/10`` (explicitly acknowledged delivery), ``basic.ack/exists``,
``basic.consume.consumer-tag/01``, ``basic.cancel/01``, ``queue.purge/02`` and
``basic.publish/default-exchange``; the book chapter on consumer acknowledgements
(``003_50388870ec53b6aa.txt``: the delivery tag, basic.get, auto-ack, what happens to unacked
messages, consumer cancellation) and DESIGN.md's facts measured on RabbitMQ 3.10.8 (double ack →
406, ack(0, multiple=true) acks all outstanding).
"""

from __future__ import annotations

from typing import Any

from pamqp import commands as spec

from conformance.model.cases import Level, case
from conformance.protocol import Event, RawChannel, UnexpectedClose, bodies, default_client_properties, tags
from conformance.protocol.wire import URL
from conformance.verify import (
    DeclareQueue,
    aio_pika_fill,
    answer,
    expect_channel_close,
    expect_no_delivery,
    fill,
    get_n,
    get_one,
    pika_fill,
    publish_confirmed,
    quiet_window,
)

DOC = "003_50388870ec53b6aa.txt"
TAG = f"{DOC}#the-delivery-tag"
GET = f"{DOC}#basic-get"
UNACKED = f"{DOC}#what-happens-to-unacknowledged-messages"
AUTO = f"{DOC}#auto-acknowledgment-mode"
CANCEL = f"{DOC}#consumer-cancellation"
MEASURED = "DESIGN.md#facts-measured-on-rabbitmq-3.10.8"



# -- delivery tags -------------------------------------------------------------------------------


@case("acks.delivery-tags-start-at-one", rules=["delivery-tag/non-zero"], sources=[TAG], level=Level.MUST,
      description="Three messages consumed on a fresh channel",
      expectation="their delivery tags are 1, 2, 3 (non-zero, increasing by one per delivery)")
def test_delivery_tags_start_at_one(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    fill(ch, q, 3)
    ch.consume(q)
    ctx.check(tags(ch.deliveries(3)), [1, 2, 3], "delivery tags")


@case("acks.delivery-tags-per-channel", rules=["delivery-tag/channel-local"], sources=[TAG], level=Level.MUST,
      description="Two channels of one connection each consume two messages, interleaved",
      expectation="each channel numbers its own deliveries 1, 2 (tags are scoped to the channel)")
def test_delivery_tags_per_channel(declared_queue, amqp, ctx) -> None:
    conn = amqp()
    a, b = conn.channel(), conn.channel()
    _, qa = declared_queue("qa", ch=a)
    _, qb = declared_queue("qb", ch=a)
    a.consume(qa)
    b.consume(qb)
    for i in (1, 2):
        a.publish("", qa, f"a{i}".encode())
        a.publish("", qb, f"b{i}".encode())
    ctx.check(
        [tags(a.deliveries(2)), tags(b.deliveries(2))], [[1, 2], [1, 2]], "tags on channel a, channel b"
    )


@case("acks.ack-on-other-channel-406", rules=["delivery-tag/channel-local", "basic.ack/exists"],
      sources=[TAG], level=Level.MUST,
      description="A message received on channel A is acknowledged on channel B of the same connection",
      expectation="channel B (which delivered nothing) is closed with 406 PRECONDITION_FAILED")
def test_ack_on_other_channel(declared_queue, amqp, ctx) -> None:
    conn = amqp()
    a, b = conn.channel(), conn.channel()
    _, q = declared_queue(ch=a)
    fill(a, q, 1)
    ev = get_one(a, q, "basic.get-ok for the published message")
    b.ack(int(ev.method.delivery_tag))
    expect_channel_close(b, 406, what="ack of channel A's tag on channel B", method=spec.Basic.Ack)


# -- ack / auto-ack / requeue on close ---------------------------------------------------------


def _requeue_by_close(amqp: Any, first: RawChannel, queue: str, *, no_ack: bool = False) -> RawChannel:
    """A consumer (``no_ack`` as given) on a new connection, then ``first`` closes: what ``first``
    held unacked goes back to the queue, where that consumer can take it. Its channel."""
    second = amqp.channel()
    second.consume(queue, no_ack=no_ack)
    first.close()
    return second


def _delivered_then_closed(declared_queue: DeclareQueue, amqp: Any, prefix: str, *,
                           no_ack: bool = False) -> tuple[RawChannel, str, Event]:
    """One message ``<prefix>1`` delivered to a consumer (``no_ack`` as given) that does not ack
    it; then :func:`_requeue_by_close` with an acknowledging consumer. (That consumer's channel,
    the queue, the first delivery.)"""
    first, q = declared_queue()
    fill(first, q, 1, prefix)
    first.consume(q, no_ack=no_ack)
    delivered = first.next_delivery()
    return _requeue_by_close(amqp, first, q), q, delivered


@case("acks.unacked-requeued-on-channel-close", rules=["basic/10"], sources=[UNACKED], level=Level.MUST,
      description="A consumer receives a message without acking it, then its channel closes",
      expectation="the message goes back to the queue and is delivered to another consumer")
def test_unacked_requeued_on_close(declared_queue, amqp, ctx) -> None:
    second, _, _ = _delivered_then_closed(declared_queue, amqp, "unacked")
    ctx.check(second.next_delivery(what="the requeued message on another consumer").body, b"unacked1",
              "body redelivered to the second consumer")


@case("acks.requeued-redelivered-flag", rules=["redelivered/implementation"], sources=[UNACKED],
      level=Level.SHOULD,
      description="A message delivered but not acked is requeued by a channel close and delivered again",
      expectation="the second delivery has redelivered=true")
def test_requeued_redelivered_flag(declared_queue, amqp, ctx) -> None:
    second, _, delivered = _delivered_then_closed(declared_queue, amqp, "again")
    ctx.observe("first delivery", delivered.describe())
    ev = second.next_delivery(what="the requeued message")
    ctx.check(bool(ev.method.redelivered), True, "redelivered flag")


@case("acks.no-ack-at-most-once", rules=["basic/09"], sources=[AUTO], level=Level.MUST,
      description="A no-ack consumer receives a message and its channel closes without any ack",
      expectation="the message is not requeued: another consumer receives nothing and the queue is empty")
def test_no_ack_at_most_once(declared_queue, amqp, ctx) -> None:
    second, q, _ = _delivered_then_closed(declared_queue, amqp, "m", no_ack=True)
    expect_no_delivery(second, quiet_window(ctx.timeout), what="no redelivery of an auto-acked message")
    ctx.check(second.message_count(q), 0, "messages left in the queue")


@case("acks.explicit-ack-half", rules=["basic/10"], sources=[f"{DOC}#basic-ack"], level=Level.MUST,
      description="Spec scenario: consume four messages with explicit acks, ack two, disconnect, reconnect",
      expectation="the new connection receives exactly the two unacknowledged messages")
def test_explicit_ack_half(declared_queue, amqp, ctx) -> None:
    conn = amqp()
    ch, q = declared_queue(ch=conn.channel())
    fill(ch, q, 4)
    ch.consume(q)
    got = ch.deliveries(4)
    for ev in got[:2]:
        ch.ack(int(ev.method.delivery_tag))
    ch.barrier()
    conn.close(timeout=ctx.timeout)
    again = amqp.channel()
    again.consume(q, no_ack=True)
    received = bodies(again.deliveries(2))
    expect_no_delivery(again, quiet_window(ctx.timeout), what="nothing beyond the two unacked messages")
    ctx.check(received, [b"m3", b"m4"], "bodies after reconnect")


@case("acks.ack-zero-multiple-acks-all", rules=["delivery-tag/non-zero", "basic.ack/exists"],
      sources=[MEASURED], level=Level.MUST,
      description=(
          "Three messages fetched with basic.get (unacked), then basic.ack(0, multiple=true), then close"
      ),
      expectation="all three are acknowledged: nothing is requeued when the channel closes")
def test_ack_zero_multiple(declared_queue, amqp, ctx) -> None:
    # delivery-tag: "Zero is reserved for client use, meaning 'all messages so far received'";
    # basic.ack multiple: "If the multiple field is 1, and the delivery tag is zero, this
    # indicates acknowledgement of all outstanding messages."
    first, q = declared_queue()
    fill(first, q, 3)
    get_n(first, q, 3, "basic.get-ok")
    first.ack(0, multiple=True)
    first.barrier()
    second = _requeue_by_close(amqp, first, q, no_ack=True)
    expect_no_delivery(
        second, quiet_window(ctx.timeout), what="no message requeued after ack(0, multiple=true)"
    )


@case("acks.double-ack-406", rules=["basic.ack/exists"], sources=[MEASURED], level=Level.MUST,
      description="Acknowledging the same delivery tag twice",
      expectation="the second basic.ack closes the channel with 406 PRECONDITION_FAILED")
def test_double_ack(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    fill(ch, q, 1)
    ch.consume(q)
    tag = int(ch.next_delivery().method.delivery_tag)
    ch.ack(tag)
    ch.ack(tag)
    expect_channel_close(ch, 406, what="second ack of the same tag", method=spec.Basic.Ack)


@case("acks.unknown-tag-406", rules=["basic.ack/exists"], level=Level.MUST,
      description="Acknowledging a delivery tag the channel never delivered (one delivery, ack tag 7)",
      expectation="the channel is closed with 406 PRECONDITION_FAILED")
def test_unknown_tag(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    fill(ch, q, 1)
    ch.consume(q)
    ch.next_delivery()
    ch.ack(7)
    expect_channel_close(ch, 406, what="ack of a tag never delivered", method=spec.Basic.Ack)


# -- get ------------------------------------------------------------------------------------------


@case("acks.get-no-ack-not-requeued", sources=[GET, AUTO],
      level=Level.MUST,
      description="basic.get with no-ack of the one message, then the channel closed; the queue seen "
      "from another connection",
      expectation="the message is gone: it is not requeued when the channel closes (0 messages left)")
def test_get_no_ack_not_requeued(declared_queue, amqp, ctx) -> None:
    ch, q = declared_queue()
    fill(ch, q, 1)
    ev = ch.get(q, no_ack=True)
    ctx.check(ev.body if ev else None, b"m1", "the message basic.get (no-ack) took")
    ch.close()
    ctx.check(amqp.channel().message_count(q), 0, "messages in the queue after the channel closed")


@case("acks.get-no-ack-tag-not-ackable", rules=["basic.ack/exists"], sources=[GET, AUTO], level=Level.MUST,
      description="basic.get with no-ack, then basic.ack of the delivery tag it gave",
      expectation="the tag is already settled: the channel is closed with 406 PRECONDITION_FAILED")
def test_get_no_ack_tag_not_ackable(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    fill(ch, q, 1)
    ev = ch.get(q, no_ack=True)
    ctx.check(ev is not None, True, "basic.get-ok")
    ch.ack(int(ev.method.delivery_tag))
    expect_channel_close(ch, 406, what="ack of a no-ack get's tag", method=spec.Basic.Ack)


@case("acks.get-empty", sources=[GET], rules=["basic/10"], level=Level.MUST,
      description="basic.get on an empty queue", expectation="the broker answers basic.get-empty")
def test_get_empty(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    ctx.check(answer(ctx, ch, spec.Basic.Get(queue=q)), "basic.get-empty", "answer to basic.get")


@case("acks.get-ok-message-count", sources=[GET], rules=["basic/10"], level=Level.MUST,
      description="basic.get on a queue holding three messages",
      expectation="basic.get-ok carries the first message and message-count 2 (messages still ready, "
      "the fetched one excluded: the message-count domain counts those 'not waiting acknowledgement')")
def test_get_ok_message_count(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    fill(ch, q, 3)
    ev = get_one(ch, q, "basic.get-ok")
    ctx.check((ev.body, int(ev.method.message_count)), (b"m1", 2), "(body, message-count) of get-ok")


# -- cancel ---------------------------------------------------------------------------------------


def _consume_then_delete_queue(amqp: Any, ch: RawChannel, url: URL, ctx: Any) -> str:
    """A queue on ``url`` with a consumer on ``ch``, then deleted by another connection; the
    consumer's tag."""
    q = ctx.name("q")
    ch.declare_queue(q, **ctx.declare_fields())
    tag = ch.consume(q)
    admin = amqp.channel(url)
    admin.delete_queue(q)  # garagemq never answers this (a queue with a consumer): TIMEOUT
    return tag


@case("acks.cancel-stops-deliveries", sources=[CANCEL], rules=["basic/10"], level=Level.MUST,
      description="The client cancels its consumer, then a message is published to the queue",
      expectation="basic.cancel-ok echoes the tag and nothing more is delivered; the message stays queued")
def test_cancel_stops_deliveries(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    tag = ch.consume(q)
    ok = ch.rpc(spec.Basic.Cancel(consumer_tag=tag))
    ctx.check(str(ok.consumer_tag), tag, "consumer tag in cancel-ok")
    # confirmed, so the count reads an enqueued message: a barrier proves only that the channel
    # handled the publish (RabbitMQ 3.10.8's quorum queues counted 0 right after one, 3 of 3 runs)
    publish_confirmed(ch, "", q, [b"m1"])
    ctx.check(ch.message_count(q), 1, "messages still queued")
    # The message is taken by basic.get: after its get-ok it can no longer be delivered to the
    # cancelled consumer, so a delivery must have come before (docs/waits.md), not within a window.
    got = ch.get(q, no_ack=True)
    ctx.check(None if got is None else got.body, b"m1", "the queued message, by basic.get")
    delivered = [e.describe() for e in ch.history() if isinstance(e.method, spec.Basic.Deliver)]
    ctx.check(delivered, [], "deliveries after cancel-ok")


@case("acks.cancel-after-queue-deleted", wedges=True, rules=["basic.cancel/01"], level=Level.MUST,
      description="A client without consumer_cancel_notify cancels its consumer after the queue was deleted",
      expectation="the broker ignores the missing queue and answers basic.cancel-ok")
def test_cancel_after_queue_deleted(amqp, ctx, private_broker, queue_type) -> None:
    url, health = private_broker
    props = default_client_properties()
    props["capabilities"] = {k: v for k, v in props["capabilities"].items() if k != "consumer_cancel_notify"}
    ch = amqp(url, client_properties=props).channel()
    tag = _consume_then_delete_queue(amqp, ch, url, ctx)
    ctx.check(
        answer(ctx, ch, spec.Basic.Cancel(consumer_tag=tag)), "basic.cancel-ok", "answer to basic.cancel"
    )
    if health is not None:
        health["healthy"] = True


@case(
    "acks.broker-cancel-on-queue-delete", wedges=True, sources=[CANCEL], level=Level.EXTENSION,
    requires=["consumer_cancel_notify"],
    description="A client advertising consumer_cancel_notify consumes; another connection deletes the queue",
    expectation="the broker sends basic.cancel with the consumer's tag",
)
def test_broker_cancel_on_queue_delete(amqp, ctx, private_broker, queue_type) -> None:
    url, health = private_broker
    ch = amqp.channel(url)  # the raw client advertises consumer_cancel_notify
    tag = _consume_then_delete_queue(amqp, ch, url, ctx)
    ev = ch.wait(spec.Basic.Cancel, "basic.cancel from the broker")
    ctx.check(str(ev.method.consumer_tag), tag, "consumer tag in the broker's basic.cancel")
    if health is not None:
        health["healthy"] = True


@case("acks.duplicate-consumer-tag-530", rules=["basic.consume.consumer-tag/01"], level=Level.MUST,
      description="Two basic.consume with the same explicit consumer tag on one channel",
      expectation="the second closes the connection with 530 NOT_ALLOWED (not-allowed is a hard error)")
def test_duplicate_consumer_tag(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    ch.consume(q, consumer_tag="amqpc-dup")
    ctx.check(answer(ctx, ch, spec.Basic.Consume(queue=q, consumer_tag="amqpc-dup")),
              "connection.close 530 NOT_ALLOWED", "answer to the duplicate basic.consume")


# -- purge / default exchange -------------------------------------------------------------------


@case("acks.purge-keeps-unacked", rules=["queue.purge/02"], level=Level.MUST,
      description=(
          "Two messages queued, one fetched and left unacked, queue purged, then the fetching channel closes"
      ),
      expectation="the unacked message survived the purge: it is delivered again to another consumer")
def test_purge_keeps_unacked(declared_queue, amqp, ctx) -> None:
    first, q = declared_queue()
    fill(first, q, 2)
    get_one(first, q, "basic.get-ok")
    ctx.observe("purge-ok message-count", int(first.purge(q).message_count))
    second = _requeue_by_close(amqp, first, q, no_ack=True)
    ctx.check(second.next_delivery(what="the unacked message back after the purge").body, b"m1",
              "body delivered after the purge")


@case("acks.publish-default-exchange", rules=["basic.publish/default-exchange"], level=Level.MUST,
      description="basic.publish with a blank exchange name and the queue's name as routing key",
      expectation="the message lands in that queue (basic.get returns it)")
def test_publish_default_exchange(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    fill(ch, q, 1, "default")
    ev = ch.get(q, no_ack=True)
    ctx.check(ev.body if ev else "basic.get-empty", b"default1", "message fetched from the queue")


# -- client libraries -----------------------------------------------------------------------------


@case("acks.pika-consume-ack-loop", rules=["basic/10"], sources=[f"{DOC}#basic-consume-push-delivery"],
      level=Level.MUST, client="pika",
      description="pika: a basic_consume callback loop that basic_acks each of three messages",
      expectation="the callback sees the three bodies in order and, once acked, none is left in the queue")
def test_pika_consume_ack_loop(amqp, broker_url, ctx, cleanup) -> None:
    from conformance.verify import pika_session

    q = cleanup.queue(ctx.name("q"))
    seen: list[bytes] = []
    # Every pika call below (basic_consume waiting for its consume-ok included) is bounded by
    # pika_session: a broker that never answers, or answers with another consumer tag, is a TIMEOUT.
    with pika_session(broker_url, ctx.timeout, "pika consume loop") as conn:
        ch = conn.channel()
        pika_fill(ch, q, [b"p1", b"p2", b"p3"])

        def on_message(channel: Any, method: Any, _props: Any, body: bytes) -> None:
            seen.append(body)
            channel.basic_ack(delivery_tag=method.delivery_tag)
            if len(seen) == 3:
                channel.stop_consuming()

        ch.basic_consume(q, on_message, auto_ack=False)
        ch.start_consuming()
        ch.close()
    ctx.observe("bodies", seen)
    raw = amqp.channel()
    ctx.check((seen, raw.message_count(q)), ([b"p1", b"p2", b"p3"], 0), "(bodies seen, messages left)")


@case("acks.aio-pika-iterator-ack", rules=["basic/10"], sources=[f"{DOC}#basic-ack"], level=Level.MUST,
      client="aio-pika",
      description="aio-pika: queue.iterator() over three messages, message.ack() each, then close",
      expectation="the iterator yields the three bodies in order and, once acked, none is left in the queue")
def test_aio_pika_iterator_ack(amqp, broker_url, ctx, cleanup, queue_type) -> None:
    from conformance.verify import aio_pika_session, run_async

    q = cleanup.queue(ctx.name("q"))

    async def scenario() -> list[bytes]:
        async with aio_pika_session(broker_url, ctx.timeout) as conn:
            channel = await conn.channel()
            queue = await aio_pika_fill(channel, q, [b"a1", b"a2", b"a3"], **ctx.declare_fields())
            seen: list[bytes] = []
            async with queue.iterator() as it:
                async for message in it:
                    seen.append(message.body)
                    await message.ack()
                    if len(seen) == 3:
                        break
            return seen

    seen = run_async(scenario(), ctx.timeout, "aio-pika iterator over three messages")
    raw = amqp.channel()
    ctx.check((seen, raw.message_count(q)), ([b"a1", b"a2", b"a3"], 0), "(bodies seen, messages left)")


@case("acks.consumer-tag-channel-local", rules=["basic.consume/02"], sources=[f"{DOC}#consumer-cancellation"],
      level=Level.MUST,
      description="basic.cancel with a consumer tag of another channel of the same connection",
      expectation="spec: the tag is not valid there (connection.close 530 NOT_ALLOWED); rabbitmq: "
      "cancel-ok for "
      "an unknown tag; in both, the consumer on its own channel keeps receiving",
      expected={"spec": "connection.close 530", "rabbitmq": "basic.cancel-ok, consumer intact"},
      expected_sources={
          "spec": "basic.consume/02 (on-failure not-allowed)",
          "rabbitmq": "measured on RabbitMQ 3.10.8: basic.cancel of an unknown tag is answered "
          "cancel-ok and the other channel's consumer still receives",
      })
def test_consumer_tag_channel_local(declared_queue, amqp, ctx) -> None:
    conn = amqp()
    ch1 = conn.channel()
    ch2 = conn.channel()
    _, q = declared_queue(ch=ch1)
    tag = ch1.consume(q, no_ack=True, consumer_tag=ctx.name("ctag"))
    ch2.send(spec.Basic.Cancel(consumer_tag=tag))
    try:
        ch2.wait(spec.Basic.CancelOk, "basic.cancel-ok on the other channel")
    except UnexpectedClose as exc:
        ev = exc.event
        m = getattr(ev, "method", None)
        observed = (
            f"{'connection' if isinstance(m, spec.Connection.Close) else 'channel'}.close {m.reply_code}"
            if m is not None
            else ev.describe()
        )
        ctx.check_profile(observed, "answer to basic.cancel of another channel's tag")
        return
    ch1.publish("", q, b"after-foreign-cancel")
    ev = ch1.next_delivery(what="a delivery to the consumer whose tag was cancelled on another channel")
    observed = (
        "basic.cancel-ok, consumer intact" if ev.body == b"after-foreign-cancel" else f"got {ev.body!r}"
    )
    ctx.check_profile(observed, "answer to basic.cancel of another channel's tag")
