"""Content frames marshalled by hand, for what the raw client will not send: a content header or
body with no basic.publish before it, or a body in one frame larger than the negotiated
frame-max. Send the bytes with ``RawConnection.send_bytes`` or ``outcome(ch, None, (), raw=…)``.
"""

from __future__ import annotations

from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.body import ContentBody


def content_header(channel: int, body_size: int) -> bytes:
    """A content header frame announcing ``body_size`` octets, no properties."""
    return pframe.marshal(pheader.ContentHeader(0, body_size, spec.Basic.Properties()), channel)


def content_body(channel: int, data: bytes) -> bytes:
    """One content body frame carrying ``data``, however long."""
    return pframe.marshal(ContentBody(data), channel)


def publish_unsplit(channel: int, exchange: str, routing_key: str, body: bytes) -> bytes:
    """basic.publish, its content header and the whole ``body`` in a single body frame (not split
    at frame-max)."""
    publish = pframe.marshal(spec.Basic.Publish(exchange=exchange, routing_key=routing_key), channel)
    return publish + content_header(channel, len(body)) + content_body(channel, body)
