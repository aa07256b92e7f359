"""Mandatory and immediate publishing, basic.return, and publish errors.

Covers: the spec XML's ``basic.publish`` fields and rules (``basic.publish.mandatory/01``,
``basic.publish.immediate/01``, ``basic.publish/must-exist``, ``basic.publish/02``) and the
``basic.return`` method ("returns an undeliverable message that was published with the
'immediate' flag set, or an unroutable message published with the 'mandatory' flag set");
RabbitMQ's behaviour as measured on 3.10.8 (immediate=true → connection closed with
540 NOT_IMPLEMENTED; RabbitMQ 3.0 dropped support for the immediate flag).
"""

from __future__ import annotations

from typing import Any

from pamqp import commands as spec

from conformance.model.cases import Level, case
from conformance.protocol import Event, RawChannel, SocketClosed, UnexpectedClose
from conformance.verify import (
    CaseTimeout,
    Mismatch,
    close_fence,
    expect_channel_close,
    quiet_window,
    reply_or_probe,
    short,
)
from conformance.verify import extensions as ext

MANDATORY = "basic.publish.mandatory/01"
IMMEDIATE_540 = ("measured on RabbitMQ 3.10.8: connection.close 540 NOT_IMPLEMENTED 'NOT_IMPLEMENTED - "
                 "immediate=true' (class 60, method 40); RabbitMQ removed the immediate flag in 3.0")


def _props() -> spec.Basic.Properties:
    return spec.Basic.Properties(content_type="text/plain", message_id="amqpc-return-1", delivery_mode=2,
                                 headers={"x-amqpc": "kept"}, correlation_id="c-1")


def _prop_view(p: spec.Basic.Properties | None) -> dict[str, Any]:
    if p is None:
        return {}
    return {"content_type": p.content_type, "message_id": p.message_id, "delivery_mode": p.delivery_mode,
            "headers": dict(p.headers or {}), "correlation_id": p.correlation_id}


def _returns_until_closed(ch: RawChannel, timeout: float) -> list[Event]:
    """Every basic.return ``ch`` ever gets: a round trip (the broker processed every publish
    before it; a close here is an UnexpectedClose), then channel.close, whose close-ok is the
    channel's last frame (docs/waits.md). The channel is closed afterwards."""
    ch.barrier()
    end = close_fence(ch, timeout=timeout)
    return [e for e in ch.history() if isinstance(e.method, spec.Basic.Return) and e.seq < end.seq]


def _first_answer(ch: RawChannel, within: float) -> str:
    """What the broker does first after a publish: a basic.return, a close, or nothing (the
    probe is answered and no return follows within ``within`` seconds)."""
    try:
        first = reply_or_probe(ch, (spec.Basic.Return,), "basic.return, a close or the probe's declare-ok")
        ev: Event | SocketClosed = first
        if isinstance(first.method, spec.Exchange.DeclareOk):
            ev = ch.conn.wait_event(ch.id, lambda e: isinstance(e.method, spec.Basic.Return),
                                    "a late basic.return", timeout=within)
    except UnexpectedClose as exc:
        ev = exc.event
    except CaseTimeout:
        return "no basic.return and no close (message accepted)"
    return short(ev)


@case(
    "returns.mandatory-unroutable-312", rules=[MANDATORY], level=Level.SHOULD,
    description="A mandatory message published to an exchange with no bindings",
    expectation="basic.return 312 NO_ROUTE with the exchange, routing key, body and properties as published",
)
def test_mandatory_unroutable(declared_exchange, ctx) -> None:
    ch, ex = declared_exchange("direct")
    body = b"nobody routes me \x00\xff"
    ch.publish(ex, "no-such-key", body, mandatory=True, properties=_props())
    ev = ch.wait(spec.Basic.Return, "basic.return for the unroutable mandatory message")
    m = ev.method
    observed = (m.reply_code, m.exchange, m.routing_key, ev.body, _prop_view(ev.properties))
    ctx.check(observed, (312, ex, "no-such-key", body, _prop_view(_props())),
              "(reply-code, exchange, routing-key, body, properties) of basic.return")


@case("returns.mandatory-routable-no-return", rules=[MANDATORY], level=Level.SHOULD,
      description="A mandatory message published to a queue that exists (default exchange)",
      expectation="no basic.return is sent, and the message is queued")
def test_mandatory_routable(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    ch.publish("", q, b"routable", mandatory=True)
    returned = _returns_until_closed(ch, ctx.timeout)
    if returned:
        raise Mismatch("basic.return for a routable message", expected="no basic.return",
                       observed=returned[0].describe())
    # The close-ok proves no return; the count may lag it: a quorum queue applies the publish
    # asynchronously (RabbitMQ 3.8.9 quorum: 0 messages right after the close-ok, once in 2 runs).
    ctx.check(ext.count_drops_to(ch.conn.channel(), q, 1, ctx.timeout), 1, "messages in the queue")


@case("returns.non-mandatory-unroutable-dropped", rules=[MANDATORY], level=Level.SHOULD,
      description="A message without the mandatory flag published to an exchange with no bindings",
      expectation="the message is dropped silently: no basic.return and the channel stays open "
                  "(mandatory field: 'If this flag is zero, the server silently drops the message')")
def test_non_mandatory_unroutable(declared_exchange, ctx) -> None:
    ch, ex = declared_exchange("direct")
    ch.publish(ex, "no-such-key", b"dropped")
    returned = _returns_until_closed(ch, ctx.timeout)  # a close here is an UnexpectedClose: FAIL
    ctx.check([e.describe() for e in returned], [], "basic.return events")


@case(
    "returns.immediate-no-consumer", rules=["basic.publish.immediate/01"], level=Level.SHOULD,
    description="immediate=true publish to a queue that has no consumer",
    expectation="per profile: spec → basic.return 313 NO_CONSUMERS; rabbitmq → the connection is closed with "
                "540 NOT_IMPLEMENTED (immediate is not supported since RabbitMQ 3.0)",
    expected={"rabbitmq": "connection.close 540 NOT_IMPLEMENTED", "spec": "basic.return 313 NO_CONSUMERS"},
    expected_sources={"rabbitmq": IMMEDIATE_540,
                      "spec": "basic.publish.immediate/01 + basic.return doc; constant no-consumers (313)"},
)
def test_immediate_no_consumer(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    ch.publish("", q, b"now or never", immediate=True)
    ctx.check_profile(_first_answer(ch, quiet_window(ctx.timeout)), "broker's answer to immediate=true")


@case("returns.immediate-not-enqueued", rules=["basic.publish.immediate/01"], level=Level.SHOULD,
      description="immediate=true publish to a queue that has no consumer; then the queue, seen from another "
      "connection", expected={"rabbitmq": 0, "spec": 0},
      expected_sources={"rabbitmq": IMMEDIATE_540 + " (the connection ends before the publish is routed)",
                        "spec": "basic.publish.immediate/01: the message is returned, not queued"},
      expectation="the queue holds no message whichever answer the publish got (basic.return or the "
      "connection closed)")
def test_immediate_not_enqueued(declared_queue, amqp, ctx) -> None:
    ch, q = declared_queue()
    ch.publish("", q, b"now or never", immediate=True)
    _first_answer(ch, quiet_window(ctx.timeout))
    other = amqp.channel()
    ctx.check_profile(other.message_count(q), "messages in the queue after the immediate publish")


@case("returns.publish-missing-exchange-404", rules=["basic.publish/must-exist"], level=Level.MUST,
      description="basic.publish to an exchange that does not exist",
      expectation="the channel is closed with 404 NOT_FOUND")
def test_publish_missing_exchange(amqp, ctx) -> None:
    ch = amqp.channel()
    ch.publish(ctx.name("missing-x"), "k", b"to nowhere")
    expect_channel_close(ch, 404, what="publish to a missing exchange", method=spec.Basic.Publish)


@case("returns.internal-exchange-403", rules=["basic.publish/02"], level=Level.MUST,
      description="basic.publish to an exchange declared internal",
      expectation="the channel is closed with 403 ACCESS_REFUSED")
def test_internal_exchange(declared_exchange, ctx) -> None:
    ch, ex = declared_exchange("direct", internal=True)
    ch.publish(ex, "k", b"not for clients")
    expect_channel_close(ch, 403, what="publish to an internal exchange", method=spec.Basic.Publish)


# -- client libraries -----------------------------------------------------------------------------


@case(
    "returns.pika-mandatory-unroutable-error", rules=[MANDATORY], level=Level.SHOULD, client="pika",
    requires=["publisher_confirms"],
    description="pika: confirm_delivery() then basic_publish(mandatory=True) to an exchange with no bindings",
    expectation="basic_publish raises UnroutableError carrying the returned message's body",
)
def test_pika_mandatory_unroutable(broker_url, ctx, cleanup) -> None:
    from pika import exceptions as pex

    from conformance.verify import pika_session

    ex = cleanup.exchange(ctx.name("x"))
    with pika_session(broker_url, ctx.timeout, "pika mandatory publish") as conn:
        ch = conn.channel()
        ch.exchange_declare(ex, "direct")
        ch.confirm_delivery()
        try:
            ch.basic_publish(ex, "no-such-key", b"pika unroutable", mandatory=True)
            observed: Any = "basic_publish returned normally"
        except pex.UnroutableError as exc:
            observed = [m.body for m in exc.messages]
    ctx.check(observed, [b"pika unroutable"], "UnroutableError's returned bodies")


@case("returns.aio-pika-mandatory-publish-error", rules=[MANDATORY], level=Level.SHOULD, client="aio-pika",
      requires=["publisher_confirms"],
      description="aio-pika: channel(on_return_raises=True), publish(mandatory=True) with an unroutable key",
      expectation="publish raises PublishError whose returned frame is basic.return 312 with the body")
def test_aio_pika_mandatory(broker_url, ctx) -> None:
    import aio_pika
    from aiormq import exceptions as aex

    from conformance.verify import aio_pika_session, run_async

    key = ctx.name("no-queue")

    async def scenario() -> Any:
        async with aio_pika_session(broker_url, ctx.timeout) as conn:
            channel = await conn.channel(on_return_raises=True)
            try:
                await channel.default_exchange.publish(aio_pika.Message(b"aio unroutable"), routing_key=key,
                                                       mandatory=True)
                return "publish completed without error"
            except aex.PublishError as exc:
                returned = exc.message
                if returned is None:
                    return f"PublishError without the returned message: {exc}"
                return (getattr(returned.delivery, "reply_code", None), returned.body)

    ctx.check(run_async(scenario(), ctx.timeout, "aio-pika mandatory publish"), (312, b"aio unroutable"),
              "(reply-code, body) of the returned message")
