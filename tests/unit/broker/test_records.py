"""Typed log records: the tuple encoding, its refusals, and recovery of a log written as
bare tuples (the format before the record types existed)."""

from __future__ import annotations

import pickle
import struct
import zlib
from pathlib import Path

import pytest

from conformance.broker.records import (
    BindingAdded,
    BindingRemoved,
    ExchangeDeclared,
    ExchangeDeleted,
    MessageDelivered,
    MessagesRemoved,
    MessageStored,
    QueueDeclared,
    QueueDeleted,
    Record,
    decode,
    encode,
)
from conformance.broker.store import MAGIC, Store, decode_records, encode_record

from .link import FakeClock, Link, make_broker

SAMPLES: list[Record] = [
    ExchangeDeclared("/", "dx", "topic", False, True, {"alternate-exchange": "ae"}),
    ExchangeDeleted("/", "dx"),
    QueueDeclared("/", "dq", True, {"x-max-length": 3}),
    QueueDeleted("/", "dq"),
    BindingAdded("/", "dx", "q", "dq", "a.#", {"x-match": "all"}),
    BindingRemoved("/", "dx", "e", "other", "", {}),
    MessageStored("/", "dq", 7, "dx", "a.b", b"\x00\x00", b"body", 1.5e9),
    MessageDelivered("/", "dq", 7),
    MessagesRemoved("/", "dq", (7, 8)),
]


@pytest.mark.parametrize("rec", SAMPLES, ids=lambda r: type(r).__name__)
def test_encode_decode_round_trip(rec: Record) -> None:
    raw = encode(rec)
    assert raw[0] == type(rec).KIND and isinstance(raw, tuple)
    back = decode(raw)
    assert back == rec and type(back) is type(rec)
    assert decode_records(encode_record(rec), 0) == ([rec], len(encode_record(rec)))


def test_tuple_layout_is_the_first_formats() -> None:
    # the on-disk layout is fixed: a log written before the record types must still read
    assert encode(QueueDeclared("/", "q", False, {})) == ("q", "/", "q", False, {})
    assert encode(MessageDelivered("/", "q", 3)) == ("d", "/", "q", 3)
    assert encode(BindingRemoved("/", "x", "q", "q", "k", {})) == ("B", "/", "x", "q", "q", "k", {})


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (["q", "/", "q", False, {}], "not a non-empty tuple"),
        ((), "not a non-empty tuple"),
        ((7, "/"), "unknown log record kind 7"),
        (("z", "/"), "unknown log record kind 'z'"),
        (("Q", "/"), "has 1 fields, expected 2"),
        (("d", "/", "q", 1, 2), "has 4 fields, expected 3"),
    ],
)
def test_decode_refuses_what_is_no_record(raw: object, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        decode(raw)


def test_crc_valid_frame_that_is_no_record_refuses(tmp_path: Path) -> None:
    # not a torn tail (the CRC holds): truncating would silently lose what follows
    payload = pickle.dumps(("z", 1))
    blob = MAGIC + struct.pack(">II", len(payload), zlib.crc32(payload)) + payload
    (tmp_path / "broker.log").write_bytes(blob)
    with pytest.raises(ValueError, match="unknown log record kind"):
        Store(tmp_path).recover()


def _old_frame(rec: tuple[object, ...]) -> bytes:
    payload = pickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL)
    return struct.pack(">II", len(payload), zlib.crc32(payload)) + payload


def test_log_of_bare_tuples_recovers(tmp_path: Path, clock: FakeClock) -> None:
    props = b"\x10\x00\x02"  # delivery-mode 2
    old = [
        ("x", "/", "dx", "direct", False, False, {}),
        ("q", "/", "dq", False, {}),
        ("b", "/", "dx", "q", "dq", "k", {}),
        ("m", "/", "dq", 1, "dx", "k", props, b"one", None),
        ("m", "/", "dq", 2, "dx", "k", props, b"two", None),
        ("m", "/", "dq", 3, "dx", "k", props, b"three", None),
        ("d", "/", "dq", 2),
        ("r", "/", "dq", [1]),  # the first format wrote a list
    ]
    (tmp_path / "broker.log").write_bytes(MAGIC + b"".join(_old_frame(r) for r in old))
    broker = make_broker(clock, store=Store(tmp_path))
    vh = broker.vhosts["/"]
    assert vh.exchanges["dx"].type == "direct" and vh.exchanges["dx"].durable
    assert [(b.dest, b.routing_key) for b in vh.exchanges["dx"].bindings.values()] == [("dq", "k")]
    link = Link(broker)
    first = link.get("dq", no_ack=True)
    second = link.get("dq", no_ack=True)
    assert first is not None and (first.body, first.method.redelivered) == (b"two", True)
    assert second is not None and (second.body, second.method.redelivered) == (b"three", False)
    assert first.properties.delivery_mode == 2
    assert link.get("dq") is None
    broker.store.close()
