"""Framing and encoding shared by the channel and connection layers: the spec's frame
constants, method marshalling without pamqp's name validation, content frames, and the
payload snippets RabbitMQ puts in its frame-error texts."""

from __future__ import annotations

import inspect
import struct
from typing import Any, TypeVar

from pamqp import base, encode
from pamqp import commands as spec

from .messages import Message, QueuedMessage, decode_properties_shared

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
#: headers answered with connection.start and spoken to in 0-9-1: ours, and AMQP 0-9's (class 1,
#: instance 1, version 0-9), which RabbitMQ 3.10 (rabbit_reader) serves with its 0-9-1 framing
ACCEPTED_HEADERS = frozenset({PROTOCOL_HEADER, b"AMQP\x01\x01\x00\x09"})
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
FRAME_MIN_SIZE = 4096  # spec: frame-max "MUST accept frames of up to frame-min-size"
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"
_FRAME_HDR = struct.Struct(">BHI")
_CONTENT_HDR = struct.Struct(">HHQ")
#: RabbitMQ 3.10 default max_message_size (128 MiB); the broker's own is ``Limits.max_message_size``
MAX_MESSAGE_SIZE = 134217728
HANDSHAKE_TIMEOUT = 10.0
CLOSE_OK_TIMEOUT = 5.0
#: after a client's connection.close RabbitMQ sends close-ok and leaves the socket for the client to
#: close, ending it itself after the heartbeat interval, at most ?CLOSING_TIMEOUT (30 s; rabbit_reader)
CLIENT_CLOSE_TIMEOUT = 30.0
FATAL_FRAME_CLOSE_DELAY = 3.0  # RabbitMQ 3.10 keeps the socket about 3 s after a frame error


_INIT_PARAMS: dict[type, tuple[tuple[str, Any], ...]] = {}
_FIELD_TYPES: dict[type, tuple[tuple[str, str], ...]] = {}


def _init_params(cls: type[base.Frame]) -> tuple[tuple[str, Any], ...]:
    """(name, default) of each constructor parameter; computed once per class, since
    ``inspect.signature`` costs more than the rest of an encoding."""
    params = _INIT_PARAMS.get(cls)
    if params is None:
        params = tuple(
            (p.name, p.default) for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
        )
        _INIT_PARAMS[cls] = params
    return params


def unvalidated(cls: type[base.Frame], *args: Any, **kwargs: Any) -> base.Frame:
    """Build a pamqp method without its ``validate()``: RabbitMQ accepts any UTF-8 name
    (spaces, ``!``, ``*``…) and echoes it back; pamqp's constructors would refuse such names."""
    obj = cls.__new__(cls)
    params = _init_params(cls)
    bound = dict(params)
    bound.update(zip((name for name, _ in params), args, strict=False))
    bound.update(kwargs)
    for name, value in bound.items():
        setattr(obj, name, value)
    return obj


def _field_types(cls: type[base.Frame]) -> tuple[tuple[str, str], ...]:
    types = _FIELD_TYPES.get(cls)
    if types is None:
        types = tuple((name, cls.amqp_type(name)) for name in cls.__slots__)
        _FIELD_TYPES[cls] = types
    return types


def marshal_method(method: base.Frame, channel: int) -> bytes:
    """Encode a method frame.  Same as pamqp's marshal minus ``validate()``: RabbitMQ
    accepts any UTF-8 in names, pamqp's regex would refuse to echo them back."""
    out: list[bytes] = [struct.pack(">I", method.index)]
    bits, offset, in_bits = 0, 0, False
    for name, kind in _field_types(type(method)):
        value = getattr(method, name, 0)
        if kind == "bit":
            if not in_bits:
                bits, offset, in_bits = 0, 0, True
            bits = encode.bit(value, bits, offset)
            offset += 1
            if offset == 8:
                out.append(encode.octet(bits))
                in_bits = False
            continue
        if in_bits:
            out.append(encode.octet(bits))
            in_bits = False
        out.append(encode.by_type(value, kind))
    if in_bits:
        out.append(encode.octet(bits))
    payload = b"".join(out)
    return _FRAME_HDR.pack(FRAME_METHOD, channel, len(payload)) + payload + b"\xce"


def content_frames(channel: int, msg: Message, frame_max: int) -> list[bytes]:
    hdr = _CONTENT_HDR.pack(60, 0, len(msg.body)) + msg.props
    frames = [_FRAME_HDR.pack(FRAME_HEADER, channel, len(hdr)), hdr, b"\xce"]
    body = msg.body
    chunk = (frame_max - 8) if frame_max else len(body) or 1
    for i in range(0, len(body), chunk):
        part = body[i : i + chunk]
        frames += (_FRAME_HDR.pack(FRAME_BODY, channel, len(part)), part, b"\xce")
    return frames


# -- the hot path's frames, encoded with one struct call each ---------------------------------
# Byte for byte what ``marshal_method`` / ``content_frames`` produce for the same values
# (tests/unit/broker/test_fastpath.py compares them), without building pamqp objects.

_METHOD_HDR = struct.Struct(">BHII")  # frame type, channel, size, class/method index
_ACK_FRAME = struct.Struct(">BHIIQBB")  # ... delivery-tag, bits, frame-end
_TAG_BITS = struct.Struct(">QB")
BASIC_PUBLISH = spec.Basic.Publish.index
BASIC_ACK = spec.Basic.Ack.index
BASIC_NACK = spec.Basic.Nack.index
BASIC_DELIVER = spec.Basic.Deliver.index


def shortstr(value: str) -> bytes:
    """A shortstr as pamqp encodes it (TypeError beyond 255 octets, as in ``marshal_method``),
    without pamqp's generic string helper: every delivery carries three of them."""
    if not isinstance(value, str):
        return encode.short_string(value)  # pamqp's TypeError
    raw = value.encode("utf-8")
    if len(raw) > 255:
        return encode.short_string(value)  # pamqp's TypeError
    return _LEN_BYTE[len(raw)] + raw


_LEN_BYTE = tuple(bytes((n,)) for n in range(256))


def ack_frame(channel: int, index: int, tag: int, bits: int) -> bytes:
    """basic.ack (bits: multiple) or basic.nack (bits: multiple | requeue << 1), server to client."""
    return _ACK_FRAME.pack(FRAME_METHOD, channel, 13, index, tag, bits, FRAME_END)


#: exchange + routing-key shortstrs by (exchange, routing key): most publishers use a few of
#: them, and encoding two strings costs more than a lookup; bounded, dropped whole when full
_ROUTES: dict[tuple[str, str], bytes] = {}
_ROUTES_MAX = 1024
#: frame-end of one frame followed by the header (type, channel, size) of the next
_END_NEXT = struct.Struct(">BBHI")


def message_wire(msg: Message) -> tuple[bytes, bytes]:
    """The parts of a delivery that depend only on the message, computed once per message:
    exchange + routing-key shortstrs, and the content-header payload."""
    wire = msg.wire
    if wire is None:
        key = (msg.exchange, msg.routing_key)
        route = _ROUTES.get(key)
        if route is None:
            route = shortstr(msg.exchange) + shortstr(msg.routing_key)
            if len(_ROUTES) >= _ROUTES_MAX:
                _ROUTES.clear()
            _ROUTES[key] = route
        wire = msg.wire = (route, _CONTENT_HDR.pack(60, 0, len(msg.body)) + msg.props)
    return wire


def content_bytes(channel: int, msg: Message, frame_max: int, hdr_payload: bytes) -> bytes:
    """``b"".join(content_frames(channel, msg, frame_max))`` with the header payload given."""
    body = msg.body
    hdr = _FRAME_HDR.pack(FRAME_HEADER, channel, len(hdr_payload)) + hdr_payload + b"\xce"
    n = len(body)
    if not n:
        return hdr
    chunk = (frame_max - 8) if frame_max else n
    if n <= chunk:
        return hdr + _FRAME_HDR.pack(FRAME_BODY, channel, n) + body + b"\xce"
    return hdr + b"".join(
        _FRAME_HDR.pack(FRAME_BODY, channel, len(part)) + part + b"\xce"
        for part in (body[i : i + chunk] for i in range(0, n, chunk))
    )


def deliver_bytes(
    channel: int, ctag: bytes, tag: int, redelivered: bool, msg: Message, frame_max: int
) -> bytes:
    """basic.deliver (consumer tag already a shortstr) and the message's content frames."""
    route, hdr_payload = message_wire(msg)
    body = msg.body
    n = len(body)
    if n and (not frame_max or n <= frame_max - 8):
        # the usual delivery, a body in one frame: nine parts joined once
        return b"".join((
            _METHOD_HDR.pack(FRAME_METHOD, channel, 13 + len(ctag) + len(route), BASIC_DELIVER), ctag,
            _TAG_BITS.pack(tag, 1 if redelivered else 0), route,
            _END_NEXT.pack(FRAME_END, FRAME_HEADER, channel, len(hdr_payload)), hdr_payload,
            _END_NEXT.pack(FRAME_END, FRAME_BODY, channel, n), body, b"\xce",
        ))
    return b"".join((
        _METHOD_HDR.pack(FRAME_METHOD, channel, 13 + len(ctag) + len(route), BASIC_DELIVER), ctag,
        _TAG_BITS.pack(tag, 1 if redelivered else 0), route, b"\xce",
        content_bytes(channel, msg, frame_max, hdr_payload),
    ))


def deliver_run_bytes(channel: int, ctag: bytes, tag: int, qms: list[QueuedMessage], frame_max: int) -> bytes:
    """``deliver_bytes`` of each of ``qms`` (tags from ``tag`` on), joined: what consecutive
    messages share (route, properties, body size: a publisher's stream) is encoded once, so a
    delivery costs one struct call and its share of one join."""
    parts: list[bytes] = []
    pack_tag = _TAG_BITS.pack
    head = mid = b""
    last: tuple[str, str, bytes, int] | None = None
    for qm in qms:
        msg = qm.msg
        body = msg.body
        n = len(body)
        if last is None or n != last[3] or msg.props != last[2] or msg.routing_key != last[1] \
                or msg.exchange != last[0]:
            if not n or (frame_max and n > frame_max - 8):  # no body frame, or several
                parts.append(deliver_bytes(channel, ctag, tag, qm.redelivered, msg, frame_max))
                tag += 1
                last = None
                continue
            route, hdr_payload = message_wire(msg)
            head = _METHOD_HDR.pack(FRAME_METHOD, channel, 13 + len(ctag) + len(route), BASIC_DELIVER) + ctag
            mid = b"".join((route, _END_NEXT.pack(FRAME_END, FRAME_HEADER, channel, len(hdr_payload)),
                            hdr_payload, _END_NEXT.pack(FRAME_END, FRAME_BODY, channel, n)))
            last = (msg.exchange, msg.routing_key, msg.props, n)
        parts += (head, pack_tag(tag, 1 if qm.redelivered else 0), mid, body, b"\xce")
        tag += 1
    return b"".join(parts)


_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")  # pamqp decodes longlong (delivery-tag) signed


def decode_hot_method(payload: bytes) -> base.Frame | None:
    """basic.publish or basic.ack decoded straight into its pamqp object, or None for any
    other method and for any payload this reader does not take exactly as pamqp would
    (truncated, not UTF-8): those go through ``pamqp`` and its errors as before."""
    n = len(payload)
    if n < 9:
        return None
    index = _U32.unpack_from(payload)[0]
    if index == BASIC_PUBLISH:
        fields = decode_publish(payload, 0, n)
        if fields is None:
            return None
        pub = _PUBLISH.__new__(_PUBLISH)
        pub.ticket = _U16.unpack_from(payload, 4)[0]
        pub.exchange, pub.routing_key, pub.mandatory, pub.immediate = fields
        return pub
    if index == BASIC_ACK and n >= 13:
        ack = _ACK.__new__(_ACK)
        ack.delivery_tag = _I64.unpack_from(payload, 4)[0]
        ack.multiple = payload[12] & 1 != 0
        return ack
    return None


_PUBLISH, _ACK = spec.Basic.Publish, spec.Basic.Ack
_PUBLISH_INDEX = _U32.pack(BASIC_PUBLISH)


def decode_publish(buf: bytes, start: int, end: int) -> tuple[str, str, bool, bool] | None:
    """basic.publish's fields (exchange, routing-key, mandatory, immediate) from the method
    payload ``buf[start:end]`` (its index already checked; ``decode_hot_method`` reads a whole
    payload with it), or None where that would leave the frame to pamqp."""
    if end - start < 9:
        return None
    e_end = start + 7 + buf[start + 6]
    if e_end >= end:
        return None
    r_end = e_end + 1 + buf[e_end]
    if r_end >= end:
        return None
    try:
        exchange = buf[start + 7 : e_end].decode("utf-8")
        routing_key = buf[e_end + 1 : r_end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    bits = buf[r_end]
    return exchange, routing_key, bits & 1 != 0, bits & 2 != 0


def read_publish(
    buf: bytes, pos: int, end: int, channel: int, frame_max: int, max_message_size: int
) -> tuple[tuple[str, str, bool, bool], bytes, spec.Basic.Properties, bytes, int] | None:
    """A whole publish at ``buf[pos:]``: the basic.publish method frame (delimited and checked
    by the caller, its frame end at ``end``), then a content header and at most one body frame
    carrying the whole body, on the same channel: (publish fields, raw properties, properties,
    body, where the next frame starts).  None unless every frame is whole and well formed
    within the limits and the body fits ``max_message_size``: anything else (including every
    error) is the frame-by-frame path's."""
    fields = decode_publish(buf, pos + 7, end)
    if fields is None:
        return None
    n = len(buf)
    h = end + 1  # the content header: type 2, same channel, within the spec's limit, class 60
    if n < h + 7 + 14 + 1:
        return None
    ftype, hch, hsize = _FRAME_HDR.unpack_from(buf, h)
    if ftype != FRAME_HEADER or hch != channel or hsize < 14 or (frame_max and hsize > frame_max - 8):
        return None
    hend = h + 7 + hsize
    if n < hend + 1 or buf[hend] != FRAME_END:
        return None
    class_id, _weight, body_size = _CONTENT_HDR.unpack_from(buf, h + 7)
    if class_id != 60 or body_size > max_message_size:
        return None
    props_raw = buf[h + 19 : hend]
    try:
        props = decode_properties_shared(props_raw)
    except Exception:  # noqa: BLE001 - the frame-by-frame path reports it
        return None
    nxt = hend + 1
    body = b""
    if body_size:  # exactly one body frame with the whole body
        if n < nxt + 8 + body_size:
            return None
        ftype, bch, bsize = _FRAME_HDR.unpack_from(buf, nxt)
        if ftype != FRAME_BODY or bch != channel or bsize != body_size or (frame_max and bsize > frame_max):
            return None
        bend = nxt + 7 + bsize
        if buf[bend] != FRAME_END:
            return None
        body = buf[nxt + 7 : bend]
        nxt = bend + 1
    return fields, props_raw, props, body, nxt


def _snippet(payload: bytes) -> str:
    """RabbitMQ's payload_snippet: the first 16 octets as an Erlang binary."""
    part = payload[:16]
    label = "all octets" if len(payload) <= 16 else "first 16 octets"
    return f"{label} = <<{','.join(str(b) for b in part)}>>"


def _ids(method: base.Frame) -> tuple[int, int]:
    return method.index >> 16, method.index & 0xFFFF


_CLOSE_INDEXES = frozenset({spec.Connection.Close.index, spec.Connection.CloseOk.index})


def _is_close_method(ftype: int, channel: int, payload: bytes) -> bool:
    """Whether a frame is connection.close or close-ok, judged without decoding it."""
    return ftype == FRAME_METHOD and channel == 0 and int.from_bytes(payload[:4], "big") in _CLOSE_INDEXES


def _as_text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


_T = TypeVar("_T")


def decoded(value: _T | None) -> _T:
    """A field of a method decoded from the wire.  pamqp types some fields ``X | None``
    because its constructors default them to None; ``unmarshal`` always sets them.
    (The suite's clients have the same helper: the broker shares no code with its judge.)"""
    if value is None:
        raise AssertionError("a decoded method field is unset")
    return value


#: the method classes by their wire index (pamqp's own mapping is typed as plain ``type``)
METHOD_CLASSES: dict[int, type[base.Frame]] = {
    index: cls for index, cls in spec.INDEX_MAPPING.items() if issubclass(cls, base.Frame)
}
