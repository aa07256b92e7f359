"""Channel class and framing errors: channel.open on an open / unopened channel, channel.flow,
the close handshake, and frames the broker must refuse (content without a method, bad
frame-end, unknown frame type).

Documents: the spec XML's ``channel`` class rules (``channel.open/state``, ``channel.flow/*``,
``channel.close/stability``) and its reply-code constants (``amqp0-9-1.xml#constants``:
unexpected-frame 505, frame-error 501, channel-error 504 — all hard errors). RabbitMQ 3.10.8
behaviour measured with the raw client where it differs is kept as per-profile data.
"""

from __future__ import annotations

import pytest
from pamqp import commands as spec
from pamqp import frame as pframe

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import content_body, content_header
from conformance.verify import (
    CaseTimeout,
    aio_pika_session,
    check,
    check_outcome,
    expect_connection_close,
    expect_second_open,
    outcome,
    pika_session,
    run_async,
)

RMQ = "measured on RabbitMQ 3.10.8 with the raw client"
CONSTANTS = "amqp0-9-1.xml#constants"


@case("channel.open-twice-504", rules=["channel.open/state"], level=Level.MUST,
      description="channel.open on a channel that is already open",
      expectation="connection.close 504 CHANNEL_ERROR")
def test_open_twice(amqp, ctx):
    conn = amqp()
    expect_second_open(conn, conn.channel())


@case("channel.method-on-unopened-504", sources=[f"{CONSTANTS} (channel-error 504)"],
      rules=["channel.open/state"], level=Level.MUST,
      description="queue.declare on a channel number that was never opened",
      expectation="connection.close 504 CHANNEL_ERROR")
def test_method_on_unopened(amqp, ctx, cleanup):
    conn = amqp()
    ch = conn.channel()
    q = cleanup.queue(ctx.name("q"))
    conn.send_method(ch.id + 7, spec.Queue.Declare(queue=q))
    expect_connection_close(conn, 504, what="a method on an unopened channel", probe_channel=ch)


@case("channel.flow-initially-active", rules=["channel.flow/initial-state"], level=Level.MAY,
      description="A new channel is active: a consumer on it receives messages without any channel.flow",
      expectation="basic.deliver arrives on the fresh channel")
def test_flow_initial(declared_queue, ctx):
    ch, q = declared_queue()
    ch.consume(q, no_ack=True)
    ch.publish("", q, b"flowing")
    ctx.check(ch.next_delivery().body, b"flowing", "delivery on a fresh channel")


@case("channel.flow-stop", rules=["channel.flow/throttling"], level=Level.MAY,
      description="The client asks the broker to stop sending content (channel.flow active=false)",
      expectation="spec: channel.flow-ok; RabbitMQ 3.x: connection.close 540 NOT_IMPLEMENTED",
      expected={"spec": "channel.flow-ok", "rabbitmq": "connection.close 540"},
      expected_sources={"spec": "channel.flow/throttling (a peer MAY use channel.flow)",
                        "rabbitmq": f"{RMQ}: connection.close 540 'NOT_IMPLEMENTED - active=false'"})
def test_flow_stop(amqp, ctx):
    ch = amqp.channel()
    check_outcome(
        ctx, outcome(ch, spec.Channel.Flow(active=False), spec.Channel.FlowOk), "channel.flow active=false"
    )


@case("channel.flow-resume", rules=["channel.flow/throttling"], level=Level.MUST,
      description="channel.flow active=true on an active channel",
      expectation="channel.flow-ok with active=true")
def test_flow_resume(amqp, ctx):
    ch = amqp.channel()
    got = outcome(ch, spec.Channel.Flow(active=True), spec.Channel.FlowOk)
    ctx.check(got[0], "channel.flow-ok", "channel.flow active=true")
    ok = [e for e in ch.history() if isinstance(e.method, spec.Channel.FlowOk)][-1]
    ctx.check(ok.method.active, True, "channel.flow-ok active")


@case("channel.close-stability", rules=["channel.close/stability"], level=Level.MUST,
      description="After the broker's channel.close, a method on that channel is discarded and a crossing "
                  "channel.close is answered with close-ok",
      expectation="after the broker's channel.close only channel.close-ok arrives on that channel")
def test_close_stability(amqp, ctx, cleanup):
    conn = amqp()
    conn.auto_close_ok = False  # we answer the broker's close ourselves, late
    ch = conn.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.send(spec.Queue.Declare(queue=ctx.name("missing"), passive=True))
    close = ch.wait(spec.Channel.Close, "channel.close 404")
    ch.send(spec.Queue.Declare(queue=q))  # must be discarded
    ch.send(spec.Channel.Close(reply_code=200, reply_text="crossing close", class_id=0, method_id=0))
    try:
        conn.wait_event(ch.id, lambda e: isinstance(e.method, spec.Channel.CloseOk), "channel.close-ok")
    except CaseTimeout:
        pass  # reported below with what did arrive
    after = [e.name for e in ch.history() if e.seq > close.seq]
    ctx.check(after, ["channel.close-ok"], "methods from the broker after its channel.close")


@case(
    "channel.client-close-handshake", rules=["channel.close/stability"], level=Level.MUST,
    description="The client closes a channel; the broker answers close-ok and the channel number is reusable",
    expectation="channel.close-ok, then channel.open on the same number is answered with open-ok",
)
def test_client_close(amqp, ctx):
    conn = amqp()
    ch = conn.channel()
    ch.send(spec.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    ch.wait(spec.Channel.CloseOk, "channel.close-ok")
    got = outcome(ch, spec.Channel.Open(), spec.Channel.OpenOk)
    ctx.check(got[0], "channel.open-ok", f"channel.open on channel {ch.id} after close / close-ok")


def _unexpected_frame_case(id_: str, description: str) -> Case:
    """A content frame where a method frame must come: connection.close 505 (RabbitMQ too)."""
    return Case(
        id_, sources=(f"{CONSTANTS} (unexpected-frame 505)",), level=Level.MUST, description=description,
        expectation="connection.close 505 UNEXPECTED_FRAME", default="connection.close 505",
        expected_sources={"rabbitmq": f"{RMQ}: 505 'expected method frame, got non method frame'"},
    )


def _frame_error_case(id_: str, description: str, rabbitmq_text: str) -> Case:
    """A malformed frame: connection.close 501 or the socket's end (RabbitMQ: 501 ``rabbitmq_text``)."""
    return Case(
        id_, sources=(f"{CONSTANTS} (frame-error 501)",), level=Level.MUST, description=description,
        expectation="the connection ends: connection.close 501 FRAME_ERROR or a socket close",
        default=("connection.close 501", "socket closed"),
        expected_sources={"rabbitmq": f"{RMQ}: connection.close 501 '{rabbitmq_text}'"},
    )


FRAMES = [
    param(_unexpected_frame_case("channel.content-header-without-method-505",
                                 "A content header frame with no content method before it"),
          "header"),
    param(_unexpected_frame_case("channel.content-body-without-method-505",
                                 "A content body frame with no content in progress"),
          "body"),
    param(_frame_error_case("channel.bad-frame-end", "A method frame whose frame-end octet is not 0xCE",
                            "invalid_frame_end_marker"),
          "frame-end"),
    param(_frame_error_case("channel.unknown-frame-type",
                            "A frame of type 9 (not method/header/body/heartbeat)", "unknown_frame"),
          "type"),
]


@pytest.mark.parametrize("kind", FRAMES)
def test_bad_frames(amqp, ctx, cleanup, kind):
    conn = amqp()
    ch = conn.channel()
    if kind == "header":
        raw = content_header(ch.id, 3)
    elif kind == "body":
        raw = content_body(ch.id, b"abc")
    elif kind == "frame-end":
        q = cleanup.queue(ctx.name("q"))
        raw = pframe.marshal(spec.Queue.Declare(queue=q), ch.id)[:-1] + b"\x00"
    else:
        raw = bytes([9]) + ch.id.to_bytes(2, "big") + (1).to_bytes(4, "big") + b"\x00\xce"
    check_outcome(ctx, outcome(ch, None, (), raw=raw), f"the broker's answer to a bad frame ({kind})")


# -- client libraries ----------------------------------------------------------------------------


@case("channel.pika-many-channels", rules=["channel.open/state"], level=Level.MUST, client="pika",
      description="pika: open 8 channels on one connection, close them, open another",
      expectation="every channel opens (is_open) and the connection stays open")
def test_pika_channels(broker_url, ctx):
    with pika_session(broker_url, ctx.timeout, "pika channels") as conn:
        chans = [conn.channel() for _ in range(8)]
        opened = [c.is_open for c in chans]
        for c in chans:
            c.close()
        again = conn.channel()
        check((opened, again.is_open, conn.is_open), ([True] * 8, True, True),
              "(8 channels open, a 9th after closing them, connection open)")


@case("channel.aio-pika-close-one-keeps-others", rules=["channel.close/stability"], level=Level.MUST,
      client="aio-pika",
      description="aio-pika: closing one channel leaves the other channels of the connection working",
      expectation="after channel A closes, channel B declares a queue and publishes/gets a message")
def test_aio_pika_close_one(broker_url, ctx, cleanup):
    import aio_pika

    q = cleanup.queue(ctx.name("q"))

    async def scenario() -> bytes | None:
        async with aio_pika_session(broker_url, ctx.timeout) as conn:
            a, b = await conn.channel(), await conn.channel()
            await a.close()
            queue = await b.declare_queue(q)
            await b.default_exchange.publish(aio_pika.Message(b"b-works"), routing_key=q)
            msg = await queue.get(timeout=ctx.timeout, fail=False)
            return msg.body if msg else None

    body = run_async(scenario(), ctx.timeout * 2, "aio-pika close-one scenario")
    check(body, b"b-works", "message through channel B after channel A closed")
