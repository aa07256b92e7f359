"""A consumer that has taken deliveries: the starting point of the cases that settle them later
(basic.reject, basic.nack, basic.recover)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.protocol.raw import Event, RawChannel
from conformance.verify.fixtures import DeclareQueue
from conformance.verify.steps import publish_confirmed


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
