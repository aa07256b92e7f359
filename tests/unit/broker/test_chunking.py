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
