"""Priority queues: queues declared with ``x-max-priority`` (RabbitMQ's classic queue priorities).

Documents: RabbitMQ's priority guide (``rabbitmq-priority``): a queue becomes a priority queue with
the ``x-max-priority`` argument; higher priorities are delivered first; a message without the
priority property counts as priority 0, one above the maximum as the maximum; maximums from 1 to
255 are supported. The spec's ``basic/08`` (same priority: publication order) holds within a level.
Every case here declares ``x-max-priority``, so a broker that accepts the argument and ignores it
fails (``test_priority.py`` covers a queue without it). Orders and codes measured on RabbitMQ 3.10.8.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import RawChannel
from conformance.verify import check_outcome, drain_confirms, outcome

ARGS = "rabbitmq-priority#using-arguments"
BEHAVIOUR = "rabbitmq-priority#behaviour"
MAXIMUM = "rabbitmq-priority#maximum"
RMQ = "DESIGN.md#facts-measured-on-rabbitmq-3-10-8"
# RabbitMQ's quorum queues refuse x-max-priority (quorum queue guide, feature matrix)
CLASSIC = ("classic",)
PREMISE = "x-max-priority makes a priority queue: classic queues (a quorum queue refuses the argument)"


def _publish(ch: RawChannel, q: str, messages: Sequence[tuple[str, int | None]]) -> None:
    """Publish (body, priority) pairs in order, confirmed, so they are all queued before reading."""
    ch.confirm_select()
    last = 0
    for body, prio in messages:
        last = ch.publish("", q, body.encode(), properties=spec.Basic.Properties(priority=prio))
    drain_confirms(ch, last)


def _drain(ch: RawChannel, q: str) -> list[tuple[str, int | None]]:
    got: list[tuple[str, int | None]] = []
    while (ev := ch.get(q, no_ack=True)) is not None:
        got.append(((ev.body or b"").decode(), ev.properties.priority if ev.properties else None))
    return got


def _order(name: str, max_priority: int, messages: list[tuple[str, int | None]], description: str,
           expectation: str, default: list[tuple[str, int | None]]) -> object:
    """A basic.get order case: ``messages`` published to a queue with ``max_priority``, then fetched."""
    return param(Case(
        f"priority_queue.{name}", rules=("basic/08",), sources=(BEHAVIOUR, RMQ), level=Level.EXTENSION,
        queue_types=CLASSIC, premise=PREMISE, description=description, expectation=expectation,
        default=default,
    ), max_priority, messages)


ORDERS = [
    _order("order", 10, [("n", None), ("a", 3), ("b", 6), ("c", 3), ("d", 9), ("z", 0)],
           "A queue with x-max-priority 10; messages with priorities none, 3, 6, 3, 9, 0 published "
           "in that order, then fetched with basic.get",
           "highest priority first, publication order within a priority, no priority = 0; each "
           "message keeps its priority property",
           [("d", 9), ("b", 6), ("a", 3), ("c", 3), ("n", None), ("z", 0)]),
    _order("above-maximum", 5, [("a", 7), ("b", 5), ("c", 9), ("d", 2), ("e", 5)],
           "A queue with x-max-priority 5; messages with priorities 7, 5, 9, 2, 5 published in that "
           "order, then fetched with basic.get",
           "priorities above 5 count as 5 (7, 5, 9, 5 in publication order), then 2; each message "
           "keeps its priority property",
           [("a", 7), ("b", 5), ("c", 9), ("e", 5), ("d", 2)]),
]


@pytest.mark.parametrize(("max_priority", "messages"), ORDERS)
def test_order(declared_queue, ctx, max_priority: int, messages: list[tuple[str, int | None]]) -> None:
    ch, q = declared_queue(arguments={"x-max-priority": max_priority})
    _publish(ch, q, messages)
    ctx.check(_drain(ch, q), ctx.expected, "(body, priority) in basic.get order")


@case("priority_queue.consumer-order", rules=["basic/08"], sources=[BEHAVIOUR, RMQ], level=Level.EXTENSION,
      queue_types=CLASSIC, premise=PREMISE,
      description="A queue with x-max-priority 10 holding messages with priorities 1, 5, 9, 5; then a no-ack "
      "consumer attaches",
      expectation="deliveries in the order 9, 5 (first), 5 (second), 1, delivery tags 1-4")
def test_consumer_order(declared_queue, ctx):
    ch, q = declared_queue(arguments={"x-max-priority": 10})
    _publish(ch, q, [("p1", 1), ("p5a", 5), ("p9", 9), ("p5b", 5)])
    ch.consume(q, no_ack=True)
    evs = ch.deliveries(4)
    got = [((e.body or b"").decode(), e.method.delivery_tag) for e in evs]
    ctx.check(got, [("p9", 1), ("p5a", 2), ("p5b", 3), ("p1", 4)], "(body, delivery-tag) of the deliveries")


@case("priority_queue.requeue-keeps-position", rules=["basic/08"], sources=[BEHAVIOUR, RMQ],
      level=Level.EXTENSION, queue_types=CLASSIC, premise=PREMISE,
      description="A queue with x-max-priority 10 holding priorities 5 (b), 1 (a), 5 (c); b is fetched with "
      "basic.get and rejected with requeue",
      expectation="b comes back ahead of c (its original position within priority 5), redelivered; then c, a")
def test_requeue_position(declared_queue, ctx):
    ch, q = declared_queue(arguments={"x-max-priority": 10})
    _publish(ch, q, [("b", 5), ("a", 1), ("c", 5)])
    first = ch.get(q)
    ctx.check(None if first is None else first.body, b"b", "first basic.get")
    assert first is not None
    ch.reject(first.method.delivery_tag, requeue=True)
    got = []
    while (ev := ch.get(q, no_ack=True)) is not None:
        got.append(((ev.body or b"").decode(), ev.method.redelivered))
    ctx.check(got, [("b", True), ("c", False), ("a", False)], "(body, redelivered) after the requeue")


def _refused(name: str, maximum: int, reason: str) -> object:
    """An x-max-priority RabbitMQ refuses with 406, giving ``reason`` and the value."""
    return param(Case(
        f"priority_queue.max-{name}-refused", sources=(MAXIMUM, RMQ), level=Level.EXTENSION,
        description=f"queue.declare with x-max-priority {maximum}",
        expectation="channel.close 406 PRECONDITION_FAILED (RabbitMQ: invalid arg 'x-max-priority' "
        f"... {{{reason},{maximum}}})",
        default="channel.close 406",
    ), maximum)


LIMITS = [
    param(Case(
        "priority_queue.max-255-accepted", sources=(MAXIMUM, RMQ), level=Level.EXTENSION,
        description="queue.declare with x-max-priority 255", expectation="queue.declare-ok",
        default="queue.declare-ok",
    ), 255),
    _refused("256", 256, "max_value_exceeded"),
    _refused("negative", -1, "value_negative"),
]


@pytest.mark.parametrize("maximum", LIMITS)
def test_maximum(amqp, ctx, cleanup, maximum: int) -> None:
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    declare = spec.Queue.Declare(queue=q, arguments={"x-max-priority": maximum})
    got = outcome(ch, declare, spec.Queue.DeclareOk)
    check_outcome(ctx, got, f"queue.declare with x-max-priority {maximum}")
