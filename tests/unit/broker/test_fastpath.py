"""The hot path's hand-written encoders and decoders agree with pamqp byte for byte.

``frames.decode_hot_method`` reads basic.publish / basic.ack without pamqp's generic
unmarshal, ``deliver_bytes`` / ``ack_frame`` write basic.deliver and confirms with one
``struct`` call: whatever they accept or produce must be what the generic path would.
"""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands as spec

from conformance.broker.frames import (
    BASIC_ACK,
    BASIC_NACK,
    ack_frame,
    content_frames,
    decode_hot_method,
    deliver_bytes,
    deliver_run_bytes,
    marshal_method,
    shortstr,
    unvalidated,
)
from conformance.broker.messages import Message, QueuedMessage, decode_properties, decode_properties_shared

names = st.text(max_size=40).filter(lambda s: len(s.encode()) <= 255)


def _generic(payload: bytes) -> object | None:
    index = int.from_bytes(payload[:4], "big")
    method = spec.INDEX_MAPPING[index]()
    try:
        method.unmarshal(payload[4:])
    except Exception:  # noqa: BLE001 - any refusal by pamqp counts as "not decodable"
        return None
    return method


def _slots(m: object) -> dict[str, object]:
    return {k: getattr(m, k) for k in type(m).__slots__}


@given(st.integers(0, 65535), names, names, st.integers(0, 255), st.binary(max_size=3), st.integers(0, 40))
@settings(max_examples=300, deadline=None)
def test_publish_decodes_as_pamqp(
    ticket: int, exchange: str, key: str, bits: int, tail: bytes, cut: int
) -> None:
    full = (struct.pack(">IH", spec.Basic.Publish.index, ticket) + shortstr(exchange) + shortstr(key)
            + bytes([bits]) + tail)
    for payload in (full, full[: max(4, len(full) - cut)]):
        fast = decode_hot_method(payload)
        if fast is None:
            continue  # left to pamqp
        slow = _generic(payload)
        assert slow is not None and type(fast) is type(slow) and _slots(fast) == _slots(slow)


@given(st.binary(min_size=0, max_size=30))
@settings(max_examples=300, deadline=None)
def test_garbage_after_a_hot_index_decodes_as_pamqp_or_not_at_all(rest: bytes) -> None:
    for index in (spec.Basic.Publish.index, spec.Basic.Ack.index):
        payload = struct.pack(">I", index) + rest
        fast = decode_hot_method(payload)
        if fast is not None:
            slow = _generic(payload)
            assert slow is not None and _slots(fast) == _slots(slow)


def test_invalid_utf8_is_left_to_pamqp() -> None:
    payload = struct.pack(">IH", spec.Basic.Publish.index, 0) + b"\x01\xff" + b"\x00" + b"\x00"
    assert decode_hot_method(payload) is None


@given(st.integers(0, 2**64 - 1), st.integers(0, 255))
def test_ack_decodes_as_pamqp(tag: int, bits: int) -> None:
    payload = struct.pack(">IQB", spec.Basic.Ack.index, tag, bits)
    fast = decode_hot_method(payload)
    slow = _generic(payload)
    assert fast is not None and slow is not None and _slots(fast) == _slots(slow)


def test_other_methods_are_not_taken() -> None:
    assert decode_hot_method(marshal_method(spec.Basic.Qos(prefetch_count=5), 1)[7:-1]) is None
    assert decode_hot_method(struct.pack(">IQB", spec.Basic.Ack.index, 1, 0)[:12]) is None


@given(names, st.integers(1, 2**63 - 1), st.booleans(), names, names, st.binary(max_size=300),
       st.sampled_from([0, 4096, 4097, 131072, 9]), st.integers(1, 65535))
@settings(max_examples=300, deadline=None)
def test_deliver_bytes_equal_the_generic_encoding(
    ctag: str, tag: int, redelivered: bool, exchange: str, key: str, body: bytes, frame_max: int, channel: int
) -> None:
    props = spec.Basic.Properties(content_type="text/plain", delivery_mode=2, headers={"h": 1}).marshal()
    msg = Message(exchange, key, props, body)
    generic = b"".join([
        marshal_method(unvalidated(spec.Basic.Deliver, ctag, tag, redelivered, exchange, key), channel),
        *content_frames(channel, msg, frame_max),
    ])
    assert deliver_bytes(channel, shortstr(ctag), tag, redelivered, msg, frame_max) == generic
    # the per-message part is cached: a second delivery of the same message is the same
    assert deliver_bytes(channel, shortstr(ctag), tag, redelivered, msg, frame_max) == generic


_PROPS = (b"\x00\x00", spec.Basic.Properties(delivery_mode=2).marshal(),
          spec.Basic.Properties(content_type="text/plain", headers={"h": 1}).marshal())


@given(st.lists(st.tuples(st.sampled_from(["", "ex"]), st.sampled_from(["q", "r", "é" * 3]),
                          st.sampled_from(_PROPS), st.sampled_from([b"", b"x", b"y" * 64, b"z" * 300]),
                          st.booleans()), max_size=12),
       st.sampled_from([0, 4096, 131072, 9, 100]), st.integers(1, 65535), st.integers(1, 2**62))
@settings(max_examples=300, deadline=None)
def test_a_run_of_deliveries_equals_each_delivery_encoded_alone(
    msgs: list[tuple[str, str, bytes, bytes, bool]], frame_max: int, channel: int, tag: int
) -> None:
    # consecutive messages alike (route, properties, body size) share their encoding; any
    # change, an empty body or a body in several frames must come out as deliver_bytes has it
    qms = [QueuedMessage(i, Message(ex, key, props, body), redelivered=again)
           for i, (ex, key, props, body, again) in enumerate(msgs)]
    ctag = shortstr("ctag")
    alone = b"".join(deliver_bytes(channel, ctag, tag + i, qm.redelivered, Message(qm.msg.exchange,
                     qm.msg.routing_key, qm.msg.props, qm.msg.body), frame_max) for i, qm in enumerate(qms))
    assert deliver_run_bytes(channel, ctag, tag, qms, frame_max) == alone


@given(st.integers(0, 2**63 - 1), st.booleans(), st.integers(1, 65535))
def test_confirm_frames_equal_the_generic_encoding(tag: int, multiple: bool, channel: int) -> None:
    assert ack_frame(channel, BASIC_ACK, tag, multiple) == marshal_method(
        spec.Basic.Ack(delivery_tag=tag, multiple=multiple), channel)
    assert ack_frame(channel, BASIC_NACK, tag, multiple) == marshal_method(
        spec.Basic.Nack(delivery_tag=tag, multiple=multiple, requeue=False), channel)


def _raw_props(props: spec.Basic.Properties) -> bytes:
    from pamqp.header import ContentHeader

    return ContentHeader(0, 0, props).marshal()[12:]


def test_shared_properties_decode_alike_and_headers_are_never_shared() -> None:
    plain = _raw_props(spec.Basic.Properties(delivery_mode=2, content_type="x"))
    a, b = decode_properties_shared(plain), decode_properties_shared(plain)
    assert a is b and _slots(a) == _slots(decode_properties(plain))
    with_headers = _raw_props(spec.Basic.Properties(headers={"BCC": ["q"]}))
    c, d = decode_properties_shared(with_headers), decode_properties_shared(with_headers)
    assert c is not d and _slots(c) == _slots(d)


def test_the_shared_properties_cache_stays_bounded() -> None:
    from conformance.broker import messages

    for i in range(messages._SHARED_PROPS_MAX + 5):
        decode_properties_shared(_raw_props(spec.Basic.Properties(message_id=str(i))))
        assert len(messages._SHARED_PROPS) <= messages._SHARED_PROPS_MAX
