"""Steps the pika (BlockingConnection) cases share: a confirm-mode channel with its queue and
messages in place, and a consumer loop whose every wait is bounded."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from conformance.verdicts import CaseTimeout


def pika_queue_channel(conn: Any, queue: str, bodies: Sequence[bytes] = ()) -> Any:
    """A channel of the pika connection ``conn`` with ``queue`` declared, in confirm mode
    (``confirm_delivery()``), and ``bodies`` published to the queue by the default exchange (each
    ``basic_publish`` returns once the broker has confirmed it)."""
    ch = conn.channel()
    ch.queue_declare(queue)
    ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", queue, body)
    return ch


def pika_deliveries(ch: Any, queue: str, timeout: float, seen: Sequence[Any]) -> Iterator[tuple[Any, bytes]]:
    """(method, body) of each delivery of a pika consumer loop on ``queue``, for as long as the
    caller goes on; no delivery within ``timeout`` is a TIMEOUT showing ``seen``, the caller's
    record of the deliveries so far. The caller cancels the consumer (``ch.cancel()``)."""
    for method, _props, body in ch.consume(queue, inactivity_timeout=timeout):
        if method is None:
            raise CaseTimeout("a delivery in the pika consumer loop", timeout,
                              observed=f"deliveries so far: {seen}")
        yield method, body
