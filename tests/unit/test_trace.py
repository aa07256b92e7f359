"""The case frame trace: bounded, ordered, both directions, short decoded texts."""

from __future__ import annotations

from pamqp import commands as spec
from pamqp import header as pheader
from pamqp.body import ContentBody

from conformance.protocol import trace


def test_the_trace_keeps_the_last_frames_of_all_connections() -> None:
    t = trace.FrameTrace(limit=5)
    a, b = t.connection(), t.connection("pika")
    assert (a, b) == ("raw#1", "pika#2")
    for i in range(8):
        t.add(a if i % 2 else b, trace.SENT, 1, f"frame {i}")
    kept = t.entries()
    assert [e["frame"] for e in kept] == [f"frame {i}" for i in range(3, 8)]
    assert {e["conn"] for e in kept} == {"raw#1", "pika#2"}
    assert t.text().splitlines()[0] == "(3 earlier frames not kept)"
    assert all(float(e["t"]) >= 0 for e in kept)


def test_frame_texts_name_what_tells_frames_apart() -> None:
    deliver = spec.Basic.Deliver(
        consumer_tag="c", delivery_tag=7, redelivered=True, exchange="x", routing_key="k"
    )
    assert trace.frame_text(deliver) == "basic.deliver tag=7 redelivered=True exchange='x' routing_key='k'"
    assert (
        trace.frame_text(pheader.ContentHeader(0, 12, spec.Basic.Properties()))
        == "content header body_size=12"
    )
    assert trace.frame_text(ContentBody(b"abc")) == "content body 3 bytes"
    close = spec.Channel.Close(reply_code=404, reply_text="NOT_FOUND", class_id=50, method_id=10)
    assert trace.frame_text(close).startswith("channel.close 404")


def test_connections_record_only_inside_a_case() -> None:
    trace.end()
    assert trace.current() is None
    t = trace.begin()
    assert trace.current() is t
    trace.end()
    assert trace.current() is None
