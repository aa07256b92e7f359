"""The wire invariant monitor: each invariant fires on frames that break it, and stays quiet on
the exchanges a correct broker produces."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.body import ContentBody

from conformance.protocol import invariants
from conformance.protocol.invariants import INVARIANTS, CaseMonitor, WireMonitor


def _from_wire(class_id: int, method_id: int, args: bytes) -> Any:
    """A method as decoded from the wire (pamqp's constructors refuse what brokers may send)."""
    payload = struct.pack(">HH", class_id, method_id) + args
    _, _, frm = pframe.unmarshal(struct.pack(">BHI", 1, 1, len(payload)) + payload + b"\xce")
    return frm


def _open_ok(reserved: bytes = b"") -> spec.Channel.OpenOk:
    """channel.open-ok with its reserved long string (pamqp's constructor insists on "0")."""
    frm = _from_wire(20, 11, struct.pack(">I", len(reserved)) + reserved)
    assert isinstance(frm, spec.Channel.OpenOk)
    return frm


def _monitor(*open_channels: int, frame_max: int = 4096) -> tuple[CaseMonitor, WireMonitor]:
    case = CaseMonitor()
    mon = WireMonitor(case, "raw#1")
    mon.frame_max = frame_max
    for ch in open_channels:
        mon.sent(ch, spec.Channel.Open())
        mon.received(ch, _open_ok(), 4)
    return case, mon


def _deliver(tag: int) -> spec.Basic.Deliver:
    return spec.Basic.Deliver(consumer_tag="c", delivery_tag=tag, exchange="", routing_key="q")


def _content(mon: WireMonitor, ch: int, method: Any, body: bytes, *, announced: int | None = None) -> None:
    mon.received(ch, method, 20)
    size = len(body) if announced is None else announced
    mon.received(ch, pheader.ContentHeader(0, size, spec.Basic.Properties()), 14)
    if body:
        mon.received(ch, ContentBody(body), len(body))


def _ids(case: CaseMonitor) -> list[str]:
    return [v.invariant for v in case.violations]


def test_a_correct_exchange_breaks_nothing() -> None:
    case, mon = _monitor(1, 2)
    for tag in (1, 2):
        _content(mon, 1, _deliver(tag), b"abc")
    _content(mon, 1, spec.Basic.GetOk(delivery_tag=3, exchange="", routing_key="q"), b"")
    _content(mon, 2, _deliver(1), b"x" * 10)  # tags are per channel
    mon.sent(2, spec.Confirm.Select())
    for frm in (spec.Basic.Ack(delivery_tag=2, multiple=False), spec.Basic.Ack(delivery_tag=3, multiple=True),
                spec.Basic.Nack(delivery_tag=4, multiple=False)):
        mon.received(2, frm, 13)  # a multiple covering an earlier single is how RabbitMQ coalesces
    mon.received(1, spec.Channel.Close(reply_code=406, reply_text="x", class_id=60, method_id=80), 30)
    mon.sent(1, spec.Channel.CloseOk())
    mon.sent(1, spec.Channel.Open())  # reopened: it starts afresh
    mon.received(1, _open_ok(), 4)
    _content(mon, 1, _deliver(1), b"again")
    mon.received(0, spec.Connection.Close(reply_code=320, reply_text="bye", class_id=0, method_id=0), 20)
    mon.received(0, spec.Connection.CloseOk(), 4)
    assert case.violations == []


@pytest.mark.parametrize("tags", [(1, 3), (2,), (1, 2, 2), (0,)])
def test_delivery_tags_must_go_up_by_one(tags: tuple[int, ...]) -> None:
    case, mon = _monitor(1)
    for tag in tags:
        _content(mon, 1, _deliver(tag), b"m")
    assert _ids(case) == ["wire.delivery-tags-consecutive"]


def test_nothing_but_close_ok_after_the_brokers_channel_close() -> None:
    case, mon = _monitor(1)
    mon.received(1, spec.Channel.Close(reply_code=404, reply_text="x", class_id=50, method_id=10), 30)
    mon.received(1, spec.Channel.CloseOk(), 4)
    assert case.violations == []
    _content(mon, 1, _deliver(1), b"late")
    assert _ids(case)[0] == "wire.nothing-after-channel-close"


def test_nothing_after_the_brokers_connection_close() -> None:
    case, mon = _monitor(1)
    mon.received(0, spec.Connection.Close(reply_code=504, reply_text="x", class_id=20, method_id=10), 30)
    mon.received(1, spec.Queue.DeclareOk(queue="q", message_count=0, consumer_count=0), 12)
    assert _ids(case) == ["wire.nothing-after-connection-close"]


def test_frames_stay_within_frame_max() -> None:
    case, mon = _monitor(1, frame_max=4096)
    mon.received(1, _deliver(1), 20)
    mon.received(1, pheader.ContentHeader(0, 5000, spec.Basic.Properties()), 14)
    mon.received(1, ContentBody(b"x" * 4088), 4088)  # 4096 with the frame's 8 bytes: allowed
    assert case.violations == []
    mon.received(1, ContentBody(b"x" * 912), 4089)
    assert _ids(case) == ["wire.frame-max"]


@pytest.mark.parametrize("shape", ["too-long", "cut-short", "no-header", "stray-body"])
def test_body_frames_add_up_to_the_headers_body_size(shape: str) -> None:
    case, mon = _monitor(1)
    if shape == "too-long":
        _content(mon, 1, _deliver(1), b"abcdef", announced=3)
    elif shape == "cut-short":
        _content(mon, 1, _deliver(1), b"ab", announced=3)
        mon.received(1, spec.Basic.CancelOk(consumer_tag="c"), 8)
    elif shape == "no-header":
        mon.received(1, _deliver(1), 20)
        mon.received(1, spec.Basic.CancelOk(consumer_tag="c"), 8)
    else:
        mon.received(1, ContentBody(b"?"), 1)
    assert _ids(case) == ["wire.body-size"]


def test_no_frames_on_channels_never_opened() -> None:
    case, mon = _monitor(1)
    mon.received(3, _open_ok(), 4)
    assert _ids(case) == ["wire.channel-opened"]


@pytest.mark.parametrize("confirms", [
    [(1, False), (1, False)],  # the same publish confirmed twice
    [(3, True), (2, False)],  # back below what a multiple covered
    [(2, True), (2, True)],  # a multiple repeated
])
def test_confirm_tags_never_settle_a_publish_again(confirms: list[tuple[int, bool]]) -> None:
    case, mon = _monitor(1)
    mon.sent(1, spec.Confirm.Select())
    for tag, multiple in confirms:
        mon.received(1, spec.Basic.Ack(delivery_tag=tag, multiple=multiple), 13)
    assert _ids(case) == ["wire.confirms-settle-once"]


@pytest.mark.parametrize("frm", [
    _open_ok(b"0"),  # the reference broker's default once: one client lost frame sync on it
    _from_wire(60, 72, b"\x01x"),  # basic.get-empty with cluster-id "x"
])
def test_a_non_empty_reserved_field_is_reported(frm: Any) -> None:
    case, mon = _monitor(1)
    mon.received(1, frm, 9)
    assert _ids(case) == ["wire.reserved-fields"]
    assert "reserved-1" in case.violations[0].detail


def test_empty_reserved_fields_are_not_reported() -> None:
    case, mon = _monitor(1)
    mon.received(1, spec.Basic.GetEmpty(cluster_id=""), 5)
    mon.received(1, spec.Queue.DeclareOk(queue="q", message_count=0, consumer_count=0), 12)
    assert case.violations == []


@pytest.mark.parametrize("frm", [
    spec.Channel.Close(reply_code=0, reply_text="x", class_id=50, method_id=10),
    spec.Basic.Return(reply_code=312, reply_text="", exchange="", routing_key="q"),
    spec.Queue.DeclareOk(queue="", message_count=0, consumer_count=0),
])
def test_a_null_notnull_field_is_reported(frm: Any) -> None:
    case, mon = _monitor(1)
    mon.received(1, frm, 20)
    assert _ids(case) == ["wire.field-asserts"]


def test_every_invariant_is_listed_with_a_rule_and_has_a_test() -> None:
    ids = {i.id for i in INVARIANTS}
    assert len(ids) == len(INVARIANTS) and all(i.text and i.rule for i in INVARIANTS)
    tested = {
        "wire.delivery-tags-consecutive",
        "wire.nothing-after-channel-close",
        "wire.nothing-after-connection-close",
        "wire.frame-max",
        "wire.body-size",
        "wire.reserved-fields",
        "wire.field-asserts",
        "wire.channel-opened",
        "wire.confirms-settle-once",
    }
    assert ids == tested
    assert len(invariants.listing()) == len(INVARIANTS)
