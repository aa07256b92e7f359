"""Fill a queue through a client library: the first steps of most pika / aio-pika cases.

The same as :func:`conformance.verify.steps.fill` for the raw client: declare the queue, then
publish the given bodies to it by the default exchange, in order. Run them inside the case's
bounded session (``libs.pika_session`` / ``libs.run_async``): every library call here waits on
the broker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def pika_fill(ch: Any, queue: str, bodies: Sequence[bytes], *, confirm: bool = False) -> None:
    """On a pika ``BlockingChannel``: queue_declare(``queue``), confirm_delivery() first when
    ``confirm`` (each basic_publish then returns once the broker confirmed it), and one
    basic_publish per body."""
    ch.queue_declare(queue)
    if confirm:
        ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", queue, body)


async def aio_pika_fill(channel: Any, queue: str, bodies: Sequence[bytes], **declare: Any) -> Any:
    """On an aio-pika channel: declare_queue(``queue``, **``declare``) and one publish per body
    (a plain aio_pika.Message) by the default exchange; the declared queue object."""
    import aio_pika

    declared = await channel.declare_queue(queue, **declare)
    for body in bodies:
        await channel.default_exchange.publish(aio_pika.Message(body), routing_key=queue)
    return declared
