"""Scenarios that basic.reject and basic.nack share, written once.

basic.nack is RabbitMQ's basic.reject with a ``multiple`` field, so for a single delivery the two
must behave alike: test_reject.py and test_nack.py each list these scenarios in a table of their
own cases (own ids, levels and sources) and pass ``how`` = ``"reject"`` or ``"nack"``. Every
raw-client scenario takes the case's fixtures (``declared_queue``, ``amqp``, ``ctx``, ``cleanup``)
and ``how``; the aio-pika one takes ``broker_url``, ``ctx``, ``cleanup`` and ``how``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from conformance.model.verdicts import CaseTimeout, Mismatch
from conformance.protocol.raw import Event, RawChannel
from conformance.protocol.wire import URL
from conformance.verify.expect import expect_get_empty
from conformance.verify.fixtures import DeclareQueue
from conformance.verify.libs import aio_pika_settle_then_get, run_async
from conformance.verify.steps import consume_published, dead_letter_target, get_one, publish_confirmed

How = Literal["reject", "nack"]
Scenario = Callable[[DeclareQueue, Any, Any, Any, How], None]


def settle(ch: RawChannel, how: How, tag: int, *, requeue: bool) -> None:
    """basic.reject or a single (multiple=false) basic.nack of ``tag``."""
    if how == "reject":
        ch.reject(tag, requeue=requeue)
    else:
        ch.nack(tag, multiple=False, requeue=requeue)


def _body(how: How) -> bytes:
    return b"r1" if how == "reject" else b"n1"


def requeue_redelivered_flag(declared_queue: DeclareQueue, amqp: Any, ctx: Any, cleanup: Any,
                             how: How) -> None:
    """A consumer settles a delivery with requeue=true; its redelivery must carry redelivered=true."""
    ch, q = declared_queue()
    _, (first,) = consume_published(ch, q, [_body(how)])
    settle(ch, how, int(first.method.delivery_tag), requeue=True)
    again = ch.next_delivery(what=f"the redelivery after {how}(requeue=true)")
    ctx.observe("redelivery", again.describe())
    ctx.check(bool(again.method.redelivered), True, "redelivered flag of the redelivery")


def requeue_false_discards(declared_queue: DeclareQueue, amqp: Any, ctx: Any, cleanup: Any,
                           how: How) -> None:
    """requeue=false on a queue without a dead-letter exchange: the queue is empty afterwards."""
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [_body(how)])
    ev = get_one(ch, q, "the published message")
    settle(ch, how, int(ev.method.delivery_tag), requeue=False)
    expect_get_empty(ch, q, what=f"queue after {how}(requeue=false)")
    ctx.observe("queue", "empty")


def declare_dlx(ch: RawChannel, ctx: Any, cleanup: Any) -> tuple[str, str]:
    """A fanout dead-letter exchange with a bound queue, and a source queue dead-lettering to it."""
    dlx, dlq = dead_letter_target(ch, ctx, cleanup)
    src = cleanup.queue(ctx.name("src"))
    ch.declare_queue(src, **ctx.declare_fields(arguments={"x-dead-letter-exchange": dlx}))
    return src, dlq


def x_death_reason(ev: Event) -> Any:
    """The reason of the first x-death entry, or a description of why there is none."""
    headers: dict[str, Any] = (ev.properties.headers if ev.properties else None) or {}
    deaths: Any = headers.get("x-death")  # a field array of tables
    if not deaths:
        return f"no x-death header (headers {sorted(headers)})"
    reason = deaths[0].get("reason")
    return reason.decode() if isinstance(reason, bytes) else reason


def requeue_false_dead_letters(declared_queue: DeclareQueue, amqp: Any, ctx: Any, cleanup: Any,
                               how: How) -> None:
    """requeue=false on a queue with x-dead-letter-exchange: dead-lettered, x-death reason 'rejected'."""
    ch = amqp.channel()
    src, dlq = declare_dlx(ch, ctx, cleanup)
    publish_confirmed(ch, "", src, [_body(how)])
    ev = get_one(ch, src, "the published message")
    ch.consume(dlq, no_ack=True)
    settle(ch, how, int(ev.method.delivery_tag), requeue=False)
    wait = min(ctx.timeout, 5.0)
    try:
        dead = ch.next_delivery(timeout=wait, what="the dead-lettered message")
    except CaseTimeout as exc:
        raise Mismatch("dead-lettering", expected="the message arrives in the dead-letter queue",
                       observed=f"nothing in the dead-letter queue within {wait:.1f}s") from exc
    ctx.observe("dead-lettered", dead.describe())
    ctx.check(x_death_reason(dead), "rejected", "x-death[0].reason")


def aio_pika_requeue_false_discards(broker_url: URL, ctx: Any, cleanup: Any, how: How) -> None:
    """aio-pika: queue.get() then message.reject / message.nack (requeue=False) on a queue without a
    dead-letter exchange: a following queue.get() finds the queue empty."""
    q = cleanup.queue(ctx.name("q"))
    observed = run_async(aio_pika_settle_then_get(broker_url, q, how, ctx.timeout), ctx.timeout * 3,
                         f"the aio-pika {how} scenario")
    ctx.check(observed, "queue empty", f"queue.get() after message.{how}(requeue=False)")
