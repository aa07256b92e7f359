"""Direct reply-to: RabbitMQ's ``amq.rabbitmq.reply-to`` pseudo-queue for RPC without a reply queue.

Documents: RabbitMQ's Direct Reply-to guide (``rabbitmq-direct-reply-to#use``, ``#caveats``): the
requester consumes from ``amq.rabbitmq.reply-to`` in no-ack mode and publishes its request with
``reply-to: amq.rabbitmq.reply-to``; the broker rewrites that property to a name of the form
``amq.rabbitmq.reply-to.<opaque>``, and a reply published to the default exchange with that name as
routing key is delivered to the requester's consumer. The refusals (an acknowledging reply consumer,
a request without one, a second reply consumer) and their codes are measured on RabbitMQ 3.10.8.
"""

from __future__ import annotations

import pytest
from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.body import ContentBody

from conformance.model.cases import Case, Level, case, param
from conformance.verify import check_outcome, drain_confirms, outcome

REPLY_TO = "amq.rabbitmq.reply-to"
USE = "rabbitmq-direct-reply-to#use"
CAVEATS = "rabbitmq-direct-reply-to#caveats"
RMQ = "DESIGN.md#facts-measured-on-rabbitmq-3-10-8"


@case("reply_to.consume-ok", sources=[USE], level=Level.EXTENSION,
      description="basic.consume from amq.rabbitmq.reply-to in no-ack mode with a consumer tag",
      expectation="basic.consume-ok carrying that consumer tag")
def test_consume_ok(amqp, ctx):
    ch = amqp.channel()
    tag = ctx.name("reply")
    ok = ch.rpc(spec.Basic.Consume(queue=REPLY_TO, consumer_tag=tag, no_ack=True))
    ctx.check(ok.consumer_tag, tag, "basic.consume-ok consumer-tag")


@case("reply_to.round-trip", sources=[USE], level=Level.EXTENSION,
      description="A requester consumes from amq.rabbitmq.reply-to (no-ack) and publishes a request with "
      "reply-to amq.rabbitmq.reply-to and a correlation-id; the server takes it with basic.get and publishes "
      "its reply to the default exchange with the request's reply-to as routing key",
      expectation="the request's reply-to is rewritten to amq.rabbitmq.reply-to.<something>; the reply is a "
      "basic.deliver to the requester's consumer (its tag, delivery-tag 1, not redelivered, exchange '', "
      "routing key = that name) with the reply's body and correlation-id")
def test_round_trip(declared_queue, amqp, ctx):
    server, q = declared_queue("rpc")
    requester = amqp.channel()
    tag = requester.consume(REPLY_TO, no_ack=True, consumer_tag=ctx.name("reply"))
    props = spec.Basic.Properties(reply_to=REPLY_TO, correlation_id="c1")
    requester.confirm_select()  # confirmed: in the server's queue (of any type) before its basic.get
    drain_confirms(requester, requester.publish("", q, b"request", properties=props))
    request = server.get(q, no_ack=True)
    ctx.check(request is not None, True, "the request reached the server's queue")
    assert request is not None and request.properties is not None
    reply_to = str(request.properties.reply_to)
    ctx.check((reply_to.startswith(REPLY_TO + ".") and len(reply_to) > len(REPLY_TO) + 1,
               request.properties.correlation_id),
              (True, "c1"), f"request's (reply-to rewritten to {REPLY_TO}.<name>, correlation-id): "
              f"{reply_to!r}")
    server.publish("", reply_to, b"reply", properties=spec.Basic.Properties(correlation_id="c1"))
    ev = requester.next_delivery(what="the reply on the reply-to consumer")
    m = ev.method
    got = (m.consumer_tag, m.delivery_tag, m.redelivered, m.exchange, m.routing_key, ev.body,
           ev.properties.correlation_id if ev.properties else None)
    ctx.check(got, (tag, 1, False, "", reply_to, b"reply", "c1"),
              "basic.deliver (consumer-tag, delivery-tag, redelivered, exchange, routing-key, body, "
              "correlation-id)")


def _publish_bytes(channel: int, routing_key: str, props: spec.Basic.Properties) -> bytes:
    """basic.publish to the default exchange with ``props``, its header and a body, as one send."""
    body = b"request"
    return (pframe.marshal(spec.Basic.Publish(exchange="", routing_key=routing_key), channel)
            + pframe.marshal(pheader.ContentHeader(0, len(body), props), channel)
            + pframe.marshal(ContentBody(body), channel))


def _refusal(name: str, sources: tuple[str, ...], description: str, says: str, key: str) -> object:
    """One refusal case: RabbitMQ closes the channel with 406 and says ``says``."""
    return param(Case(
        f"reply_to.{name}-406", sources=sources, level=Level.EXTENSION, description=description,
        expectation=f"channel.close 406 PRECONDITION_FAILED (RabbitMQ: '{says}')",
        default="channel.close 406",
    ), key)


REFUSALS = [
    _refusal("ack-mode-consumer", (CAVEATS, RMQ),
             "basic.consume from amq.rabbitmq.reply-to with no-ack false",
             "reply consumer cannot acknowledge", "ack-mode"),
    _refusal("second-consumer", (USE, RMQ),
             "A second basic.consume from amq.rabbitmq.reply-to on a channel that has one",
             "reply consumer already set", "second"),
    _refusal("request-without-consumer", (USE, RMQ),
             "basic.publish with reply-to amq.rabbitmq.reply-to on a channel with no reply consumer",
             "fast reply consumer does not exist", "no-consumer"),
]


@pytest.mark.parametrize("refusal", REFUSALS)
def test_refusals(declared_queue, ctx, refusal: str) -> None:
    ch, q = declared_queue()
    if refusal == "ack-mode":
        got = outcome(ch, spec.Basic.Consume(queue=REPLY_TO, no_ack=False), spec.Basic.ConsumeOk)
    elif refusal == "second":
        ch.consume(REPLY_TO, no_ack=True)
        got = outcome(ch, spec.Basic.Consume(queue=REPLY_TO, no_ack=True), spec.Basic.ConsumeOk)
    else:
        got = outcome(ch, None, (), raw=_publish_bytes(ch.id, q, spec.Basic.Properties(reply_to=REPLY_TO)))
    check_outcome(ctx, got, f"{refusal}: the broker's answer")
