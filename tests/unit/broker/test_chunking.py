"""The core must not care how the byte stream is split into reads."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.body import ContentBody

from conformance.broker.core import marshal_method

from .link import Content, Link, make_broker


def session_bytes() -> bytes:
    data = marshal_method(spec.Queue.Declare(queue="chunky"), 1)
    for i in range(3):
        body = b"body-%d" % i * 50
        data += marshal_method(spec.Basic.Publish(routing_key="chunky"), 1)
        data += pframe.marshal(pheader.ContentHeader(0, len(body), spec.Basic.Properties(delivery_mode=2)), 1)
        data += pframe.marshal(ContentBody(body[:100]), 1) + pframe.marshal(ContentBody(body[100:]), 1)
    data += marshal_method(spec.Basic.Get(queue="chunky", no_ack=True), 1)
    return data


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=200))
def test_any_split_gives_the_same_result(cuts: list[int]) -> None:
    link = Link(make_broker())
    data = session_bytes()
    pos = 0
    i = 0
    while pos < len(data):
        n = cuts[i % len(cuts)]
        link.core.receive_data(data[pos : pos + n])
        pos += n
        i += 1
    link.pump()
    link.expect(spec.Queue.DeclareOk)
    got = link.expect(Content)
    assert got.body == b"body-0" * 50 and got.method.message_count == 2


def test_byte_by_byte_handshake() -> None:
    link = Link(make_broker(), handshake=False)
    for b in b"AMQP\x00\x00\x09\x01":
        link.feed(bytes([b]))
    link.expect(spec.Connection.Start, 0)


def test_connection_methods_discarded_while_closing() -> None:
    link = Link(make_broker())
    link.core.close()
    link.expect(spec.Connection.Close, 0)
    link.send(spec.Connection.Open(virtual_host="/"), 0)
    link.feed(b"\x08\x00\x00\x00\x00\x00\x00\xce")
    link.nothing()
    assert not link.transport_closed


def _publish(rk: str, body: bytes, *, exchange: str = "", mandatory: bool = False, immediate: bool = False,
             channel: int = 1, split: int = 0, **props: object) -> bytes:
    data = marshal_method(spec.Basic.Publish(exchange=exchange, routing_key=rk, mandatory=mandatory,
                                             immediate=immediate), channel)
    data += pframe.marshal(pheader.ContentHeader(0, len(body), spec.Basic.Properties(**props)), channel)
    parts = [body[:split], body[split:]] if split else ([body] if body else [])
    return data + b"".join(pframe.marshal(ContentBody(p), channel) for p in parts)


def whole_publish_session() -> bytes:
    """Publishes the one-step path takes (whole, one body frame) and ones it leaves to the
    frame-by-frame path, with every outcome a publish can have (no confirms: they are sent
    once a read is handled, so how the input is split decides how they coalesce)."""
    data = marshal_method(spec.Queue.Declare(queue="w"), 1)
    data += _publish("w", b"0123456789", content_type="text/plain", headers={"a": 1})
    data += _publish("w", b"")  # no body frame
    data += _publish("w", b"two frames", split=3)
    data += _publish("nowhere", b"r", mandatory=True)  # basic.return
    data += _publish("w", b"cc", headers={"CC": ["w"], "BCC": ["w"]})
    data += _publish("w", b"u", user_id="mallory")  # 406: the channel closes
    data += _publish("w", b"ignored while closing")
    data += marshal_method(spec.Channel.CloseOk(), 1) + marshal_method(spec.Channel.Open(), 1)
    data += _publish("w", b"x", exchange="missing")  # 404
    data += marshal_method(spec.Channel.CloseOk(), 1) + marshal_method(spec.Channel.Open(), 1)
    data += marshal_method(spec.Channel.Open(), 2)
    for _ in range(5):
        data += marshal_method(spec.Basic.Get(queue="w", no_ack=True), 2)
    return data + _publish("w", b"i", immediate=True, channel=2)  # 540: the connection closes


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=50))
def test_whole_publishes_and_frame_by_frame_agree(cuts: list[int]) -> None:
    """The one-step publish path (all three frames in one read) answers byte for byte as the
    frame-by-frame path (reads that split them)."""
    data = whole_publish_session()
    whole = Link(make_broker())
    whole.feed(data)
    split = Link(make_broker())
    pos = i = 0
    while pos < len(data):
        split.core.receive_data(data[pos : pos + cuts[i % len(cuts)]])
        pos += cuts[i % len(cuts)]
        i += 1
    split.pump()
    assert whole.raw_out == split.raw_out
    assert split.raw_out.count(b"\xce") > 20  # the session got as far as its last error
