"""Where dead letters go: the exchange a queue names in ``x-dead-letter-exchange`` and a queue
behind it, so a case can read what was dead-lettered (RabbitMQ's dead letter exchanges guide)."""

from __future__ import annotations

from typing import Any

from conformance.protocol.raw import RawChannel


def dead_letter_target(ch: RawChannel, ctx: Any, cleanup: Any) -> tuple[str, str]:
    """A fanout exchange ``ctx.name("dlx")`` with the queue ``ctx.name("dlq")`` bound to it,
    declared on ``ch`` and deleted after the case; returns (exchange, queue). The queue is a
    plain one whatever ``--amqp-queue-type`` says: it only collects."""
    dlx = cleanup.exchange(ctx.name("dlx"))
    dlq = cleanup.queue(ctx.name("dlq"))
    ch.declare_exchange(dlx, "fanout")
    ch.declare_queue(dlq)
    ch.bind(dlq, dlx)
    return dlx, dlq
