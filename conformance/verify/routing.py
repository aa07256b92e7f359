"""Where a published message went: publish it, then take it back from a queue.

Routing cases (the default exchange, the exchange types, exchange-to-exchange bindings, a body
of frame-min-size) all end the same way: publish one message, make sure the broker has
processed the publish (a round trip), and read the queue it should have reached.
"""

from __future__ import annotations

from pamqp import commands as spec

from conformance.protocol.raw import RawChannel


def routed_body(ch: RawChannel, exchange: str, routing_key: str, body: bytes, queue: str, *,
                properties: spec.Basic.Properties | None = None) -> bytes | None:
    """Publish ``body`` to ``exchange`` with ``routing_key`` and return what ``queue`` then holds:
    the body of its first message (taken with basic.get no-ack), or None when it is empty."""
    ch.publish(exchange, routing_key, body, properties=properties)
    ch.barrier()
    ev = ch.get(queue, no_ack=True)
    return ev.body if ev is not None else None
