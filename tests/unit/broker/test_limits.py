"""The broker's limits on the sans-IO core: frame and channel maxima, max message size,
max connections, and the memory alarm behind connection.blocked / unblocked."""

from __future__ import annotations

import struct

import pytest
from pamqp import commands as spec

from conformance.broker.limits import MEMORY_ALARM_REASON, Limits, parse_size

from .link import CAPS, Content, FakeClock, Link, make_broker


def frame(ftype: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"


def limited(**kw: int) -> Link:
    return Link(make_broker(FakeClock(), limits=Limits(**kw)))


def test_tune_offers_the_configured_maxima() -> None:
    broker = make_broker(FakeClock(), limits=Limits(frame_max=8192, channel_max=3))
    link = Link(broker, handshake=False)
    link.feed(b"AMQP\x00\x00\x09\x01")
    link.expect(spec.Connection.Start, 0)
    link.send(spec.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\0guest\0guest"), 0)
    tune = link.expect(spec.Connection.Tune, 0)
    assert (tune.frame_max, tune.channel_max) == (8192, 3)
    link.send(spec.Connection.TuneOk(channel_max=4, frame_max=8192, heartbeat=0), 0)
    assert link.transport_closed  # above the offered channel_max: silent close (RabbitMQ)


def test_frame_above_negotiated_frame_max_is_501_but_the_fudge_is_accepted() -> None:
    link = limited(frame_max=8192)
    q = link.declare("f").queue
    # RabbitMQ's FRAME_SIZE_FUDGE: a payload of exactly frame_max (frame of frame_max + 8) passes
    link.publish(b"a" * 8192, routing_key=q)
    assert link.get(q).body == b"a" * 8192
    link.feed(frame(3, 1, b"b" * 8193))
    close = link.connection_closed(501)
    assert close.reply_text.endswith("{frame_too_large,8193,8184}")


def test_channel_max_counts_open_channels() -> None:
    link = limited(channel_max=2)
    link.open(7)  # a number above channel_max is fine while the count is below it
    link.send(spec.Channel.Open(), 9)
    close = link.connection_closed(530)
    assert "number of channels opened (2) has reached the negotiated channel_max (2)" in close.reply_text
    assert (close.class_id, close.method_id) == (0, 0)


def test_max_message_size_judged_after_the_whole_body() -> None:
    link = limited(max_message_size=10)
    q = link.declare("m").queue
    link.publish(b"x" * 10, routing_key=q)  # at the limit: accepted
    assert link.get(q, no_ack=True).body == b"x" * 10
    link.send(spec.Basic.Publish(routing_key=q))
    link.feed(frame(2, 1, struct.pack(">HHQ", 60, 0, 11) + b"\x00\x00"))
    link.feed(frame(3, 1, b"x" * 5))
    link.nothing()
    link.feed(frame(3, 1, b"x" * 6))
    close = link.channel_closed(406)
    assert close.reply_text.endswith("message size 11 is larger than configured max size 10")
    assert (close.class_id, close.method_id) == (60, 40)
    link.open(1)
    assert link.rpc(spec.Queue.Declare(queue=q, passive=True), spec.Queue.DeclareOk).message_count == 0


def test_max_connections_refuses_connection_open_and_frees_the_slot() -> None:
    broker = make_broker(FakeClock(), limits=Limits(max_connections=1))
    first = Link(broker)
    second = Link(broker, handshake=False)
    second.feed(b"AMQP\x00\x00\x09\x01")
    second.expect(spec.Connection.Start, 0)
    second.send(
        spec.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\0guest\0guest"), 0
    )
    tune = second.expect(spec.Connection.Tune, 0)
    second.send(
        spec.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0), 0
    )
    second.send(spec.Connection.Open(virtual_host="/"), 0)
    close = second.connection_closed(530)
    assert "connection limit (1) is reached" in close.reply_text
    assert broker.open_connections == 1
    first.send(spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 0)
    assert broker.open_connections == 0
    Link(broker)  # the slot is free again


def test_limits_are_validated() -> None:
    for bad in ({"frame_max": 100}, {"channel_max": 0}, {"max_message_size": 0}, {"max_message_size": 2**30},
                {"max_connections": -1}):
        with pytest.raises(ValueError):
            Limits(**bad)
    assert (
        parse_size("200MB") == 200_000_000 and parse_size("1MiB") == 1048576 and parse_size(" 4096 ") == 4096
    )
    for bad_text in ("", "12XB", "-3", "MB"):
        with pytest.raises(ValueError):
            parse_size(bad_text)


# -- memory alarm ---------------------------------------------------------------------------------


def test_forced_alarm_blocks_a_publisher_with_the_capability_and_unblocks_it() -> None:
    broker = make_broker(FakeClock())
    caps = dict(CAPS, **{"connection.blocked": True})
    pub, idle = Link(broker, caps=caps), Link(broker, caps=caps)
    q = pub.declare("a").queue
    broker.force_alarm(True)
    assert broker.alarm and not pub.core.blocked
    pub.nothing()
    idle.nothing()  # only publishing connections are told (RabbitMQ's doc)
    pub.publish(b"during", routing_key=q)
    assert pub.core.blocked and not idle.core.blocked
    assert pub.expect(spec.Connection.Blocked, 0).reason == MEMORY_ALARM_REASON
    pub.publish(b"again", routing_key=q)
    pub.nothing()  # one connection.blocked per alarm
    broker.force_alarm(False)
    pub.expect(spec.Connection.Unblocked, 0)
    assert not pub.core.blocked
    idle.nothing()
    assert [pub.get(q).body, pub.get(q).body] == [b"during", b"again"]  # nothing lost


def test_a_client_without_the_capability_is_blocked_silently() -> None:
    broker = make_broker(FakeClock())
    link = Link(broker)  # CAPS has no connection.blocked
    q = link.declare("s").queue
    broker.force_alarm(True)
    link.publish(b"m", routing_key=q)
    assert link.core.blocked
    link.nothing()
    broker.force_alarm(False)
    assert not link.core.blocked
    link.nothing()


def test_watermark_counts_queued_bodies_ready_and_unacked() -> None:
    clock = FakeClock()
    broker = make_broker(clock, limits=Limits(memory_watermark=100))
    caps = dict(CAPS, **{"connection.blocked": True})
    link = Link(broker, caps=caps)
    q = link.declare("w").queue
    link.publish(b"x" * 60, routing_key=q)
    broker.tick()
    assert not broker.alarm and broker.memory_used() == 60
    link.publish(b"y" * 60, routing_key=q)
    broker.tick()  # 120 > 100
    assert broker.alarm
    link.publish(b"z", routing_key=q)
    link.expect(spec.Connection.Blocked, 0)
    got = link.get(q)  # unacked still counts
    assert isinstance(got, Content) and broker.memory_used() == 121
    broker.tick()
    assert broker.alarm
    link.send(spec.Basic.Ack(delivery_tag=got.method.delivery_tag))
    broker.tick()  # 61 left
    assert not broker.alarm
    link.expect(spec.Connection.Unblocked, 0)
    # a requeued or rejected unacked message leaves the unacked count
    got = link.get(q)
    link.send(spec.Basic.Reject(delivery_tag=got.method.delivery_tag, requeue=True))
    got = link.get(q)
    link.send(spec.Basic.Reject(delivery_tag=got.method.delivery_tag, requeue=False))
    assert broker.memory_used() == 1


def test_a_connection_lost_while_blocked_forgets_it() -> None:
    broker = make_broker(FakeClock())
    link = Link(broker)
    q = link.declare("l").queue
    broker.force_alarm(True)
    link.publish(b"m", routing_key=q)
    assert link.core.blocked
    link.core.connection_lost()
    assert not link.core.blocked and broker.open_connections == 0
    broker.force_alarm(False)


def test_requeue_after_the_queue_is_gone_counts_nothing() -> None:
    broker = make_broker(FakeClock())
    link = Link(broker)
    q = link.declare("gone").queue
    link.publish(b"abc", routing_key=q)
    assert link.get(q) is not None  # unacked on channel 1
    link.open(2)
    link.rpc(spec.Queue.Delete(queue=q), spec.Queue.DeleteOk, 2)
    link.send(spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0))
    link.expect(spec.Channel.CloseOk)
    assert broker.memory_used() == 0
