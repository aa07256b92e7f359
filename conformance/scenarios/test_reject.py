"""basic.reject: requeue, discard, dead-lettering and the tag errors.

Documents: 002_4ef6b84472723893.txt (RabbitMQ's basic.reject semantics: requeue=true re-enqueues
the message as new and may hand it to the same consumer; requeue=false discards it or, with a
dead-letter exchange, dead-letters it; the spec's contradictions), 003_50388870ec53b6aa.txt
(delivery tags are channel-local; reject vs nack; the delivery guarantee summary) and the spec
XML's ``basic.reject`` method (rules ``basic.reject.requeue/01``, ``basic.reject/02``).

Transactional reject (RabbitMQ >= 2.8, 001_27f7ea2622bbc99f.txt#tx "transactional basic.reject")
is one row of the tx table and lives in test_tx.py; every reject here is outside a transaction.

Note on waiting: RabbitMQ's queue process answers a passive queue.declare (message count) ahead
of casts still queued for it (reject/requeue), so a count taken right after a reject is not proof
the reject was processed. A basic.get on the rejecting channel is ordered after the reject and is
used as the barrier instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import Event, RawChannel
from conformance.verify import (
    CaseTimeout,
    competing_consumers,
    consume_published,
    expect_channel_close,
    get_one,
    pika_deliveries,
    pika_queue_channel,
    pika_session,
    publish_confirmed,
    quiet_window,
    settle,
)

R002 = "002_4ef6b84472723893.txt"
R003 = "003_50388870ec53b6aa.txt"
SRC_REQUEUE = f"{R002}#requeue-true"
SRC_DISCARD = f"{R002}#requeue-false"
SRC_CONTRADICTION = f"{R002}#spec-contradictions"
SRC_TAG = f"{R003}#the-delivery-tag"
SRC_REJECT = f"{R003}#basic-reject"
SRC_SUMMARY = f"{R003}#delivery-guarantee-summary"


# -- helpers -------------------------------------------------------------------------------------


def next_from_any(chs: Sequence[RawChannel], timeout: float, what: str) -> tuple[int, Event]:
    """The next basic.deliver on any of ``chs``: (index, event); TIMEOUT after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        for i, ch in enumerate(chs):
            try:
                return i, ch.next_delivery(timeout=0.02, what=what)
            except CaseTimeout:
                pass
        if time.monotonic() > deadline:
            raise CaseTimeout(what, timeout)


# -- requeue=true ----------------------------------------------------------------------------------


@case("reject.requeue-true-requeues", rules=["basic.reject/02"], sources=[SRC_REQUEUE, SRC_SUMMARY],
      level=Level.MUST, description="basic.reject(requeue=true) of a message taken with basic.get",
      expectation="the message is back in the queue: the next basic.get returns the same body")
def test_requeue_true_requeues(declared_queue, ctx):
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [b"r1"])
    ev = get_one(ch, q, "the published message")
    ch.reject(ev.method.delivery_tag, requeue=True)
    again = ch.get(q, no_ack=True)
    ctx.check(again.body if again else "basic.get-empty", b"r1", "basic.get after reject(requeue=true)")


@case("reject.requeue-same-consumer", rules=["basic.reject.requeue/01"],
      sources=[SRC_REQUEUE, SRC_CONTRADICTION], level=Level.MUST,
      description="The only consumer of a queue rejects a delivery with requeue=true",
      expectation="rabbitmq: the same consumer receives it again; spec: it is not delivered again to "
                  "the same client within the current channel",
      expected={"rabbitmq": "redelivered to the same consumer",
                "spec": "not redelivered on the rejecting channel"},
      expected_sources={
          "rabbitmq": f"{SRC_REQUEUE}: 'RabbitMQ doesn't take care to stop the same consumer getting the "
                      "message again'; measured on RabbitMQ 3.10.8",
          "spec": "basic.reject.requeue/01: 'The server MUST NOT deliver the message to the same client "
                  "within the context of the current channel'",
      })
def test_requeue_same_consumer(declared_queue, ctx):
    ch, q = declared_queue()
    tag, (first,) = consume_published(ch, q, [b"r1"])
    ch.reject(first.method.delivery_tag, requeue=True)
    # The spec's "later stage" redelivery is allowed, so only a prompt redelivery counts as "same".
    window = max(quiet_window(ctx.timeout), min(ctx.timeout, 2.0))
    try:
        again = ch.next_delivery(timeout=window, what="a redelivery to the rejecting consumer")
    except CaseTimeout:
        observed = "not redelivered on the rejecting channel"
    else:
        ctx.observe("redelivery", again.describe())
        same = again.method.consumer_tag == tag and again.body == b"r1"
        observed = "redelivered to the same consumer" if same else f"other delivery: {again.describe()}"
    ctx.check_profile(observed, "where the rejected message went")


@case("reject.requeue-two-consumers-who-gets-it", sources=[SRC_REQUEUE, SRC_CONTRADICTION],
      rules=["basic.reject.requeue/01"], level=Level.INFO,
      description="Two consumers (two connections) on one queue; the first to receive a message rejects it "
                  "with requeue=true",
      expectation="recorded: which consumer receives the redelivery (RabbitMQ: either; spec: not the same "
                  "channel)")
def test_requeue_two_consumers(declared_queue, amqp, ctx):
    a, b, q = competing_consumers(declared_queue, amqp, prefetch=1)
    publish_confirmed(a, "", q, [b"r1"])
    chs = [a, b]
    first_i, first = next_from_any(chs, ctx.timeout, "the first delivery")
    chs[first_i].reject(first.method.delivery_tag, requeue=True)
    second_i, second = next_from_any(chs, ctx.timeout, "the redelivery")
    chs[second_i].ack(second.method.delivery_tag)
    ctx.informational({
        "first": "consumer A" if first_i == 0 else "consumer B",
        "redelivered to": "the same consumer" if second_i == first_i else "the other consumer",
        "redelivered flag": bool(second.method.redelivered),
    })


# -- requeue=false ---------------------------------------------------------------------------------


# -- the scenarios reject shares with nack (verify/settle.py) -------------------------------------

TWINS = [
    param(Case(
        id="reject.requeue-redelivered-flag", rules=("redelivered/implementation",),
        sources=(SRC_REQUEUE, f"{R003}#the-delivery-tag"), level=Level.SHOULD,
        description="A consumer rejects a delivery with requeue=true and receives it again",
        expectation="the redelivery carries redelivered=true",
    ), settle.requeue_redelivered_flag),
    param(Case(
        id="reject.requeue-false-discards", sources=(SRC_DISCARD, SRC_SUMMARY), level=Level.MUST,
        description="basic.reject(requeue=false) on a queue without a dead-letter exchange",
        expectation="the message is discarded: the queue is empty afterwards",
    ), settle.requeue_false_discards),
    param(Case(
        id="reject.requeue-false-dead-letters", sources=(f"{R003}#basic-nack", SRC_DISCARD),
        level=Level.EXTENSION,
        description=(
            "basic.reject(requeue=false) on a queue with x-dead-letter-exchange (RabbitMQ extension)"
        ),
        expectation=(
            "the message is dead-lettered to the DLX with an x-death entry whose reason is 'rejected'"
        ),
    ), settle.requeue_false_dead_letters),
]


@pytest.mark.parametrize("scenario", TWINS)
def test_settle_twin(declared_queue, amqp, ctx, cleanup, scenario: settle.Scenario):
    scenario(declared_queue, amqp, ctx, cleanup, "reject")


# -- tag errors ------------------------------------------------------------------------------------


def _unknown(ch: RawChannel, q: str) -> int:
    return 99


def _twice(ch: RawChannel, q: str) -> int:
    ev = get_one(ch, q, "the published message")
    ch.reject(ev.method.delivery_tag, requeue=False)
    return int(ev.method.delivery_tag)


def _after_ack(ch: RawChannel, q: str) -> int:
    ev = get_one(ch, q, "the published message")
    ch.ack(ev.method.delivery_tag)
    return int(ev.method.delivery_tag)


def _other_channel(ch: RawChannel, q: str) -> int:
    ev = get_one(ch, q, "the published message")
    return int(ev.method.delivery_tag)


TAG_ERRORS = [
    param(Case(
        "reject.unknown-tag-406", rules=("basic.ack/exists",), sources=(SRC_TAG,), level=Level.MUST,
        description="basic.reject of a delivery tag that was never delivered on the channel",
        expectation="channel.close 406 PRECONDITION_FAILED (the tag must refer to a delivered message)",
    ), _unknown, False),
    param(Case(
        "reject.double-reject-406", rules=("basic.ack/exists",), sources=(SRC_TAG, SRC_REJECT),
        level=Level.MUST, description="basic.reject of the same delivery tag twice",
        expectation="the second reject closes the channel with 406 PRECONDITION_FAILED",
    ), _twice, False),
    param(Case(
        "reject.after-ack-406", rules=("basic.ack/exists",), sources=(SRC_TAG, SRC_REJECT), level=Level.MUST,
        description="basic.reject of a delivery tag that was already acknowledged",
        expectation="channel.close 406 PRECONDITION_FAILED",
    ), _after_ack, False),
    param(Case(
        "reject.other-channel-tag-406", rules=("delivery-tag/channel-local", "basic.ack/exists"),
        sources=(SRC_TAG,), level=Level.MUST,
        description="basic.reject on channel B of a tag delivered on channel A (same connection)",
        expectation="channel B is closed with 406 PRECONDITION_FAILED: delivery tags are channel-local",
    ), _other_channel, True),
]


@pytest.mark.parametrize(("setup", "on_other_channel"), TAG_ERRORS)
def test_reject_tag_errors(declared_queue, ctx, setup, on_other_channel):
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [b"r1"])
    tag = setup(ch, q)
    target = ch.conn.channel() if on_other_channel else ch
    target.reject(tag, requeue=False)
    ev = expect_channel_close(target, 406, what=f"basic.reject of tag {tag}",
                              method=spec.Basic.Reject)
    ctx.observe("close", ev.describe())


# -- client libraries ------------------------------------------------------------------------------


@case("reject.pika-requeue-redelivers", sources=[SRC_REQUEUE, SRC_REJECT], level=Level.MUST, client="pika",
      description="A pika consumer loop: basic_reject(requeue=True) on the first delivery, ack the next",
      expectation="the pika consumer receives the rejected message again (same body) and can ack it; the "
                  "queue is then empty")
def test_pika_requeue(broker_url, ctx, cleanup):
    q = cleanup.queue(ctx.name("q"))
    with pika_session(broker_url, ctx.timeout, "pika reject/requeue loop") as conn:
        ch = pika_queue_channel(conn, q, [b"p1"])
        seen: list[tuple[bytes, bool]] = []
        for method, body in pika_deliveries(ch, q, ctx.timeout, seen):
            seen.append((body, bool(method.redelivered)))
            if len(seen) == 1:
                ch.basic_reject(method.delivery_tag, requeue=True)
            else:
                ch.basic_ack(method.delivery_tag)
                break
        ch.cancel()
        remaining = ch.queue_declare(q, passive=True).method.message_count
    ctx.observe("deliveries", seen)
    ctx.check((seen[1][0], remaining), (b"p1", 0), "(body of the second delivery, messages left)")


@case("reject.aio-pika-requeue-false-discards", sources=[SRC_DISCARD, SRC_SUMMARY], level=Level.MUST,
      client="aio-pika", description="aio-pika: queue.get() then message.reject(requeue=False)",
      expectation="the message is discarded: a following queue.get() finds the queue empty")
def test_aio_pika_reject_discards(broker_url, ctx, cleanup):
    settle.aio_pika_requeue_false_discards(broker_url, ctx, cleanup, "reject")
