"""Framing and encoding shared by the channel and connection layers: the spec's frame
constants, method marshalling without pamqp's name validation, content frames, and the
payload snippets RabbitMQ puts in its frame-error texts."""

from __future__ import annotations

import inspect
import struct
from typing import Any

from pamqp import base, encode
from pamqp import commands as spec

from .messages import Message

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
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
FATAL_FRAME_CLOSE_DELAY = 3.0  # RabbitMQ 3.10 keeps the socket about 3 s after a frame error


def unvalidated(cls: type[base.Frame], *args: Any, **kwargs: Any) -> base.Frame:
    """Build a pamqp method without its ``validate()``: RabbitMQ accepts any UTF-8 name
    (spaces, ``!``, ``*``…) and echoes it back; pamqp's constructors would refuse such names."""
    obj = cls.__new__(cls)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    bound = {p.name: p.default for p in params}
    bound.update(zip((p.name for p in params), args, strict=False))
    bound.update(kwargs)
    for name, value in bound.items():
        setattr(obj, name, value)
    return obj


def marshal_method(method: base.Frame, channel: int) -> bytes:
    """Encode a method frame.  Same as pamqp's marshal minus ``validate()``: RabbitMQ
    accepts any UTF-8 in names, pamqp's regex would refuse to echo them back."""
    out: list[bytes] = [struct.pack(">I", method.index)]
    bits, offset, in_bits = 0, 0, False
    for name in method.__slots__:
        kind = method.amqp_type(name)
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
