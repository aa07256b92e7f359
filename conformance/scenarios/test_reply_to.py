"""Direct reply-to: RabbitMQ's ``amq.rabbitmq.reply-to`` pseudo-queue for RPC without a reply queue.

Documents: RabbitMQ's Direct Reply-to guide (``rabbitmq-direct-reply-to#use``, ``#caveats``): the
requester consumes from ``amq.rabbitmq.reply-to`` in no-ack mode and publishes its request with
``reply-to: amq.rabbitmq.reply-to``; the broker rewrites that property to a name of the form
``amq.rabbitmq.reply-to.<opaque>``, and a reply published to the default exchange with that name as
routing key is delivered to the requester's consumer. The refusals (an acknowledging reply consumer,
a request without one, a second reply consumer) and their codes are measured on RabbitMQ 3.10.8.
"""

from __future__ import annotations

from typing import Any

import pytest
from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.body import ContentBody

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import RawChannel
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


def _request_reached_server(declared_queue: Any, amqp: Any,
                            ctx: Any) -> tuple[RawChannel, RawChannel, str]:
    """A requester consuming amq.rabbitmq.reply-to publishes (confirmed) a request with that reply-to
    to the server's queue, and the server takes it: (server channel, requester channel, the
    request's reply-to name as the server sees it)."""
    server, q = declared_queue("rpc")
    requester = amqp.channel()
    requester.consume(REPLY_TO, no_ack=True, consumer_tag=ctx.name("reply"))
    requester.confirm_select()
    drain_confirms(requester, requester.publish("", q, b"request", properties=spec.Basic.Properties(
        reply_to=REPLY_TO)))
    request = server.get(q, no_ack=True)
    ctx.check(request is not None and request.properties is not None, True, "the request reached the server")
    assert request is not None and request.properties is not None
    return server, requester, str(request.properties.reply_to)


@case("reply_to.mandatory-reply-requester-gone", sources=[CAVEATS], level=Level.EXTENSION,
      description="A request with reply-to amq.rabbitmq.reply-to reaches the server's queue; the requester's "
      "connection closes; the server (confirm mode) publishes its reply with mandatory=true to the request's "
      "reply-to name",
      expectation="basic.return 312 NO_ROUTE, then basic.ack: a reply-to name is not a queue, so a reply "
      "to a requester no longer there is unroutable (Direct Reply-to caveats); from RabbitMQ 4.2 a "
      "mandatory publish treats amq.rabbitmq.reply-to.* as a queue without checking the requester: "
      "basic.ack only (release row reply-to-mandatory-routed)",
      default="basic.return 312, basic.ack")
def test_mandatory_reply_requester_gone(declared_queue, amqp, ctx):
    server, requester, reply_to = _request_reached_server(declared_queue, amqp, ctx)
    requester.conn.close()  # the requester is gone before its reply is published
    server.confirm_select()
    after = max((e.seq for e in server.history()), default=0)
    confirms = drain_confirms(server, server.publish("", reply_to, b"reply", mandatory=True))
    returns = [e for e in server.history() if e.seq > after and isinstance(e.method, spec.Basic.Return)]
    got = [f"basic.return {int(e.method.reply_code)}" for e in returns] + [
        "basic.ack" if isinstance(e.method, spec.Basic.Ack) else "basic.nack" for e in confirms]
    ctx.observe("the reply's return and confirm", [e.describe() for e in (*returns, *confirms)])
    ctx.check_profile(", ".join(got), "what the server's mandatory reply got")


@case("reply_to.bind-pseudo-queue", sources=[USE], level=Level.EXTENSION,
      description="A request with reply-to amq.rabbitmq.reply-to reaches the server's queue; the server "
      "binds the request's reply-to name (amq.rabbitmq.reply-to.<opaque>) to amq.direct",
      expectation="channel.close 404 NOT_FOUND: no queue of that name (measured on 3.8.9, 3.10.8, 4.0.5); "
      "from RabbitMQ 4.3 channel.close 403 ACCESS_REFUSED 'cannot bind or unbind to a volatile (direct "
      "reply-to) queue' (release row reply-to-binding-refused)",
      default="channel.close 404")
def test_bind_pseudo_queue(declared_queue, amqp, ctx):
    server, _, name = _request_reached_server(declared_queue, amqp, ctx)
    check_outcome(ctx, outcome(server, _Bind(queue=name, exchange="amq.direct", routing_key=ctx.name("k")),
                               spec.Queue.BindOk), "queue.bind of the request's reply-to name")


class _Bind(spec.Queue.Bind):
    """queue.bind of any name: a reply-to name holds characters (``+``, ``/``, ``=``) pamqp's
    client-side queue-name check refuses, which RabbitMQ takes."""

    def validate(self) -> None:
        return None


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
