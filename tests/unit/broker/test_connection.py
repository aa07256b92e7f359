"""Connection class: handshake, auth, tune, open, close, heartbeats, framing errors."""

from __future__ import annotations

import struct

import pytest
from pamqp import commands as spec
from pamqp.heartbeat import Heartbeat

from conformance import __version__
from conformance.broker.core import (
    CLIENT_CLOSE_TIMEOUT,
    CLOSE_OK_TIMEOUT,
    FATAL_FRAME_CLOSE_DELAY,
    ChannelClosed,
    ChannelOpened,
    CloseTransport,
    ConnectionClosed,
    ConnectionOpened,
    marshal_method,
    server_properties,
)
from conformance.broker.model import Broker

from .link import CAPS, PROTOCOL_HEADER, FakeClock, Link, make_broker


def frame(ftype: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"


def started(broker: Broker) -> Link:
    link = Link(broker, handshake=False)
    link.feed(PROTOCOL_HEADER)
    link.expect(spec.Connection.Start, 0)
    return link


def test_start_advertises_server_properties(broker: Broker) -> None:
    link = Link(broker, handshake=False)
    link.feed(PROTOCOL_HEADER[:3])
    link.nothing()
    link.feed(PROTOCOL_HEADER[3:])
    start = link.expect(spec.Connection.Start, 0)
    assert (start.version_major, start.version_minor) == (0, 9)
    assert start.mechanisms == "PLAIN AMQPLAIN"
    props = start.server_properties
    assert props["product"] == "amqp-conformance reference broker"
    assert props["version"] == "3.10.8"  # the RabbitMQ release whose semantics it implements
    assert f"reference broker {__version__}," in props["information"]  # its own version
    assert props["platform"].startswith("Python 3.")
    caps = props["capabilities"]
    assert caps["publisher_confirms"] and caps["basic.nack"] and caps["exchange_exchange_bindings"]
    assert caps["connection.blocked"] is True and caps["direct_reply_to"] is True
    assert server_properties()["capabilities"]["consumer_priorities"] is True


def test_bad_protocol_header_gets_ours_and_close(broker: Broker) -> None:
    link = Link(broker, handshake=False)
    link.feed(b"AMQP\x00\x00\x08\x00")
    assert link.raw_out == PROTOCOL_HEADER
    assert link.transport_closed
    link.feed(PROTOCOL_HEADER)  # ignored after close
    assert link.raw_out == PROTOCOL_HEADER


def test_garbage_header(broker: Broker) -> None:
    link = Link(broker, handshake=False)
    link.feed(b"GET / HTTP/1.1\r\n")
    assert link.raw_out == PROTOCOL_HEADER and link.transport_closed


def test_full_handshake_events(broker: Broker) -> None:
    link = Link(broker, channel=None)
    assert ConnectionOpened("guest", "/") in link.core_events
    link.open(3)
    assert ChannelOpened(3) in link.core_events


def test_amqplain(broker: Broker) -> None:
    link = Link(broker, handshake=False)
    link.handshake(mechanism="AMQPLAIN")
    assert link.core.user == "guest"


@pytest.mark.parametrize("caps,notified", [(CAPS, True), ({}, False)])
def test_bad_credentials(broker: Broker, caps: dict, notified: bool) -> None:
    link = started(broker)
    link.send(
        spec.Connection.StartOk(
            client_properties={"capabilities": caps}, mechanism="PLAIN", response="\0guest\0nope"
        ),
        0,
    )
    if notified:
        close = link.connection_closed(403)
        assert "Login was refused using authentication mechanism PLAIN" in close.reply_text
        assert (close.class_id, close.method_id) == (0, 0)
        link.send(spec.Connection.CloseOk(), 0)
    else:
        link.nothing()
    assert link.transport_closed


@pytest.mark.parametrize("response", ["\0guest\0gü", "\0gäst\0guest"], ids=["password", "user"])
def test_non_ascii_credentials_are_refused_not_a_crash(broker: Broker, response: str) -> None:
    # secrets.compare_digest raises TypeError on non-ASCII str (found by the fuzzer)
    link = started(broker)
    link.send(
        spec.Connection.StartOk(
            client_properties={"capabilities": CAPS}, mechanism="PLAIN", response=response
        ),
        0,
    )
    link.connection_closed(403)


def test_non_ascii_password_can_log_in() -> None:
    broker = make_broker(users={"jürgen": "pässword"})
    link = Link(broker, handshake=False)
    link.handshake(user="jürgen", password="pässword")
    assert link.core.user == "jürgen"


@pytest.mark.parametrize("response", ["garbage", "\0only"])
def test_malformed_plain(broker: Broker, response: str) -> None:
    link = started(broker)
    link.send(
        spec.Connection.StartOk(
            client_properties={"capabilities": CAPS}, mechanism="PLAIN", response=response
        ),
        0,
    )
    link.connection_closed(403)


def test_malformed_amqplain_and_unknown_mechanism(broker: Broker) -> None:
    link = started(broker)
    link.send(spec.Connection.StartOk(client_properties={}, mechanism="AMQPLAIN", response="\x05zz"), 0)
    assert link.transport_closed  # pre-open errors without the capability: silent close
    link = started(broker)
    link.send(spec.Connection.StartOk(client_properties={}, mechanism="EXTERNAL", response=""), 0)
    link.nothing()
    assert link.transport_closed
    assert any(isinstance(e, ConnectionClosed) and e.reply_code == 503 for e in link.core_events)


@pytest.mark.parametrize(
    "frame_max,channel_max",
    [(1024, 10), (0, 10), (200000, 10), (131072, 0), (131072, 5000)],
)
def test_tune_ok_out_of_range_closes_silently(broker: Broker, frame_max: int, channel_max: int) -> None:
    link = started(broker)
    link.send(spec.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\0guest\0guest"), 0)
    link.expect(spec.Connection.Tune, 0)
    link.send(spec.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=0), 0)
    link.nothing()
    assert link.transport_closed
    ev = next(e for e in link.core_events if isinstance(e, ConnectionClosed))
    assert ev.reply_code == 530 and "negotiated" in ev.reply_text


def test_unknown_vhost_is_530(broker: Broker) -> None:
    link = Link(broker, handshake=False)
    with pytest.raises(AssertionError):
        link.handshake(vhost="nope")
    link.frames.clear()
    link.core_events.clear()
    link = Link(broker, handshake=False)
    link.feed(PROTOCOL_HEADER)
    link.expect(spec.Connection.Start, 0)
    link.send(spec.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\0guest\0guest"), 0)
    link.expect(spec.Connection.Tune, 0)
    link.send(spec.Connection.TuneOk(channel_max=10, frame_max=131072, heartbeat=0), 0)
    link.send(spec.Connection.Open(virtual_host="nope"), 0)
    close = link.connection_closed(530)
    assert close.reply_text == "NOT_ALLOWED - vhost nope not found"
    assert (close.class_id, close.method_id) == (10, 40)


def test_other_vhost(clock: FakeClock) -> None:
    broker = make_broker(clock, vhosts=["/", "v2"], users={"alice": "pw"})
    link = Link(broker, handshake=False)
    link.handshake(vhost="v2", user="alice", password="pw")
    link.open(1)
    link.declare("only-in-v2")
    other = Link(broker, handshake=False)
    other.handshake(user="alice", password="pw")
    other.open(1)
    other.send(spec.Queue.Declare(queue="only-in-v2", passive=True))
    other.channel_closed(404)


def test_wrong_method_in_handshake_closes_silently(broker: Broker) -> None:
    link = started(broker)
    link.send(spec.Connection.Open(virtual_host="/"), 0)
    link.nothing()
    assert link.transport_closed


def test_channel_frame_before_open(broker: Broker) -> None:
    link = started(broker)
    link.send(spec.Channel.Open(), 1)
    assert link.transport_closed


def test_content_frame_before_open(broker: Broker) -> None:
    link = started(broker)
    link.feed(frame(3, 1, b"x"))
    assert link.transport_closed


def test_client_close(link: Link, clock: FakeClock) -> None:
    link.send(spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 0)
    link.expect(spec.Connection.CloseOk, 0)
    assert ConnectionClosed(200, "bye", by_peer=True) in link.core_events
    # RabbitMQ leaves the socket to the client, discarding what else arrives ...
    assert not link.transport_closed
    link.send(spec.Queue.Declare(queue="after-close"), 1)
    link.publish(b"after-close")
    link.nothing()
    clock.advance(CLIENT_CLOSE_TIMEOUT - 1)
    link.core.tick()
    link.pump()
    assert not link.transport_closed
    # ... and ends it itself only when the client never does
    clock.advance(2)
    link.core.tick()
    link.pump()
    assert link.transport_closed


def test_client_close_with_heartbeat_ends_after_one_interval(broker: Broker, clock: FakeClock) -> None:
    link = Link(broker, heartbeat=5)
    link.send(spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 0)
    link.expect(spec.Connection.CloseOk, 0)
    clock.advance(5)
    link.core.tick()
    link.pump()
    assert link.transport_closed


def test_close_during_open_state(broker: Broker) -> None:
    link = started(broker)
    link.send(spec.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\0guest\0guest"), 0)
    link.expect(spec.Connection.Tune, 0)
    link.send(spec.Connection.TuneOk(channel_max=10, frame_max=131072, heartbeat=0), 0)
    link.send(spec.Connection.Close(reply_code=200, reply_text="", class_id=0, method_id=0), 0)
    link.expect(spec.Connection.CloseOk, 0)


def test_server_close_waits_for_close_ok_and_discards(link: Link, clock: FakeClock) -> None:
    link.core.close(320, "shutdown")
    close = link.connection_closed(320)
    assert close.reply_text == "CONNECTION_FORCED - shutdown"
    link.send(spec.Queue.Declare(queue="ignored"))  # discarded while closing
    link.publish(b"ignored")
    link.nothing()
    assert not link.transport_closed
    link.send(spec.Connection.CloseOk(), 0)
    assert link.transport_closed


def test_server_close_crossing_client_close(link: Link) -> None:
    link.core.close()
    link.expect(spec.Connection.Close, 0)
    link.send(spec.Connection.Close(reply_code=200, reply_text="", class_id=0, method_id=0), 0)
    link.expect(spec.Connection.CloseOk, 0)
    assert link.transport_closed


def test_close_ok_timeout(link: Link, clock: FakeClock) -> None:
    link.core.close()
    link.core.tick()
    assert not link.transport_closed
    clock.advance(10)
    link.core.tick()
    link.pump()
    assert link.transport_closed
    link.core.tick()  # no-op afterwards


def test_close_twice_is_idempotent(link: Link) -> None:
    link.core.close()
    link.core.close()
    link.expect(spec.Connection.Close, 0)
    link.nothing()


def test_connection_lost_cleans_up(broker: Broker) -> None:
    a = Link(broker)
    a.declare("ex-q", exclusive=True)
    a.core.connection_lost()
    assert "ex-q" not in broker.vhosts["/"].queues
    a.core.connection_lost()  # idempotent
    assert any(isinstance(e, ConnectionClosed) for e in a.core.events())


def test_heartbeats_sent_and_dead_peer(broker: Broker, clock: FakeClock) -> None:
    link = Link(broker, heartbeat=2)
    assert link.core.heartbeat == 2
    clock.advance(1.1)
    link.core.tick()
    assert any(isinstance(o, Heartbeat) for _, o in link.take())
    link.feed(b"\x08\x00\x00\x00\x00\x00\x00\xce")  # client heartbeat counts as traffic
    clock.advance(3.5)
    link.core.tick()
    assert not link.transport_closed
    clock.advance(1.0)
    link.core.tick()
    link.pump()
    assert link.transport_closed
    assert any(isinstance(e, ConnectionClosed) and "heartbeat" in e.reply_text for e in link.core_events)


def test_handshake_timeout(broker: Broker, clock: FakeClock) -> None:
    link = started(broker)
    link.core.tick()
    clock.advance(11)
    link.core.tick()
    link.pump()
    assert link.transport_closed
    link.core.tick()


def test_no_heartbeat_when_disabled(link: Link, clock: FakeClock) -> None:
    clock.advance(1000)
    link.core.tick()
    link.nothing()
    assert not link.transport_closed


def test_oversize_frame_is_frame_error(link: Link) -> None:
    link.feed(frame(1, 1, b"\x00" * 131073))  # payload above frame_max (RabbitMQ allows frame_max)
    close = link.connection_closed(501)
    assert "frame_too_large" in close.reply_text
    # The socket stays open for a grace period (input discarded), so the peer can read the close.
    assert not link.transport_closed
    link.feed(spec.Connection.CloseOk().marshal())
    link.broker.clock.advance(FATAL_FRAME_CLOSE_DELAY + 0.1)  # type: ignore[attr-defined]
    link.core.tick()
    link.pump()
    assert link.transport_closed


def test_bad_frame_end(link: Link) -> None:
    link.feed(b"\x01\x00\x01\x00\x00\x00\x04\x00\x14\x00\x0a\xff")
    close = link.connection_closed(501)
    assert (
        close.reply_text == "FRAME_ERROR - type 1, all octets = <<0,20,0,10>>: {invalid_frame_end_marker,255}"
    )


def test_unknown_frame_type(link: Link) -> None:
    link.feed(frame(9, 0, b""))
    assert link.connection_closed(501).reply_text == "FRAME_ERROR - type 9, all octets = <<>>: unknown_frame"


def test_long_payload_snippet(link: Link) -> None:
    link.feed(frame(7, 0, bytes(range(20))))
    assert "first 16 octets" in link.connection_closed(501).reply_text


def test_heartbeat_on_channel_is_frame_error(link: Link) -> None:
    link.feed(frame(8, 1, b""))
    link.connection_closed(501)


def test_short_method_and_undecodable_method(link: Link) -> None:
    link.feed(frame(1, 1, b"\x00\x14"))
    link.connection_closed(501)


def test_undecodable_method(broker: Broker) -> None:
    link = Link(broker)
    link.feed(frame(1, 1, b"\x00\x32\x00\x0a\x00"))  # queue.declare truncated
    assert "cannot decode" in link.connection_closed(501).reply_text


def test_unknown_method(link: Link) -> None:
    link.feed(frame(1, 1, b"\x00\x63\x00\x01"))
    link.connection_closed(503)


def test_content_on_channel_zero(link: Link) -> None:
    link.feed(frame(3, 0, b"x"))
    link.connection_closed(505)


def test_non_connection_method_on_channel_zero(link: Link) -> None:
    link.send(spec.Queue.Declare(queue="x"), 0)
    close = link.connection_closed(504)
    assert close.reply_text == "CHANNEL_ERROR - unexpected method in connection state running"


def test_connection_method_on_channel_one(link: Link) -> None:
    link.send(spec.Connection.Open(virtual_host="/"), 1)
    close = link.connection_closed(503)
    assert (close.class_id, close.method_id) == (10, 40)


def test_close_ok_without_close(link: Link) -> None:
    link.send(spec.Connection.CloseOk(), 0)
    link.connection_closed(504)


def test_frames_after_error_in_same_chunk_are_discarded(link: Link) -> None:
    data = marshal_method(spec.Queue.Declare(queue="x"), 0) + marshal_method(spec.Queue.Declare(queue="y"), 1)
    link.feed(data)
    link.connection_closed(504)
    link.nothing()
    assert "y" not in link.broker.vhosts["/"].queues


def test_channel_max_reached(clock: FakeClock) -> None:
    broker = make_broker(clock)
    link = Link(broker, handshake=False)
    link.feed(PROTOCOL_HEADER)
    link.expect(spec.Connection.Start, 0)
    link.send(spec.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\0guest\0guest"), 0)
    link.expect(spec.Connection.Tune, 0)
    link.send(spec.Connection.TuneOk(channel_max=2, frame_max=131072, heartbeat=0), 0)
    link.send(spec.Connection.Open(virtual_host="/"), 0)
    link.expect(spec.Connection.OpenOk, 0)
    link.open(1)
    link.open(7)
    link.send(spec.Channel.Open(), 3)
    close = link.connection_closed(530)
    # verified against RabbitMQ 3.10.8: the count is limited, not the number; ids 0/0
    assert (
        close.reply_text
        == "NOT_ALLOWED - number of channels opened (2) has reached the negotiated channel_max (2)"
    )
    assert (close.class_id, close.method_id) == (0, 0)


def test_events_record_channel_close(link: Link) -> None:
    link.send(spec.Channel.Close(reply_code=200, reply_text="done", class_id=0, method_id=0))
    link.expect(spec.Channel.CloseOk)
    assert ChannelClosed(1, 200, "done", by_peer=True) in link.core_events
    assert not any(isinstance(e, CloseTransport) for e in link.core_events)


def _feed_bounded(link: Link, data: bytes, seconds: float = 5.0) -> None:
    """Feed in a helper thread so that a core that never returns fails the test, not the run."""
    import threading

    worker = threading.Thread(target=link.feed, args=(data,), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "receive_data did not return: the core is spinning"


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(frame(9, 0, b"x")[:-1] + b"\x00", id="unknown-type-bad-end"),
        pytest.param(struct.pack(">BHI", 9, 0, 1_000_000), id="unknown-type-too-large"),
        pytest.param(frame(1, 0, b"\x00\x0a\x00\x32\x00"), id="undecodable-close"),
        pytest.param(frame(9, 0, b""), id="unknown-type"),
    ],
)
def test_issue12_error_while_closing_does_not_spin(broker: Broker, clock: FakeClock, garbage: bytes) -> None:
    # Issue 12: a method on a never-opened channel (-> connection.close 504), then a frame
    # the server cannot use, used to loop forever inside receive_data.
    link = Link(broker, channel=None)
    link.send(spec.Queue.Declare(queue="q"), 5)
    link.connection_closed(504)
    _feed_bounded(link, garbage)
    _feed_bounded(link, frame(1, 1, b"\x00\x32\x00\x0a") + spec.Connection.CloseOk().marshal())
    link.nothing()
    clock.advance(CLOSE_OK_TIMEOUT + 0.1)
    link.core.tick()
    link.pump()
    assert link.transport_closed
    # Nothing one connection sent affects another.
    other = Link(broker)
    other.declare("q2")


def test_closing_connection_discards_methods_without_decoding(link: Link) -> None:
    link.send(spec.Channel.Open(), 1)  # second open: connection error 504
    link.connection_closed(504)
    link.feed(frame(1, 1, b"\x00\x32"))  # would be a 501 if it were decoded
    link.feed(frame(3, 0, b"body"))  # content on channel 0: would be a 505
    link.nothing()
    assert not link.transport_closed
    link.send(spec.Connection.CloseOk(), 0)
    assert link.transport_closed


def test_input_after_a_refused_header_is_not_kept(broker: Broker) -> None:
    # found by the fuzzer: the rest of the first read stayed buffered on a closed connection
    link = Link(broker, handshake=False)
    link.feed(b"AMqP\x00\x00\x09\x01" + bytes(100_000))
    assert link.transport_closed
    assert len(link.core._in) == 0


def test_channel_open_ok_reserved_field_is_the_empty_long_string(broker: Broker) -> None:
    link = Link(broker, channel=None)
    link.send(spec.Channel.Open(), 1)
    # the whole frame: type 1, channel 1, size 8, class 20, method 11, reserved-1 = 00000000, end
    assert link.raw_out.endswith(bytes.fromhex("01 0001 00000008 0014 000b 00000000 ce"))


def test_update_secret_is_answered_and_the_connection_stays_open(broker: Broker) -> None:
    link = Link(broker)
    link.send(spec.Connection.UpdateSecret(new_secret="guest", reason="rotation"), 0)
    link.expect(spec.Connection.UpdateSecretOk, 0)
    link.open(2)  # still usable
    assert not link.transport_closed


def test_amqp_0_9_header_is_answered_with_connection_start(broker: Broker) -> None:
    link = Link(broker, handshake=False)
    link.feed(b"AMQP\x01\x01\x00\x09")
    start = link.expect(spec.Connection.Start, 0)
    assert (start.version_major, start.version_minor) == (0, 9)
    assert not link.transport_closed
