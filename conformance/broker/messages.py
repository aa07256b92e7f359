"""Messages as the broker holds them.

``Message`` is one publication (shared by every queue it was routed to);
``QueuedMessage`` is one queue's copy of it. (Consumers are what queues hand messages to:
``queues.py``.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pamqp import commands as spec

from .errors import precondition


def decode_properties(raw: bytes) -> spec.Basic.Properties:
    props = spec.Basic.Properties()
    flags, offset, index = 0, 0, 0
    while True:
        part = int.from_bytes(raw[offset : offset + 2], "big")
        flags |= part << (16 * index)
        offset += 2
        index += 1
        if not part & 1:
            break
    props.unmarshal(flags, raw[offset:])
    return props


_SHARED_PROPS: dict[bytes, spec.Basic.Properties] = {}
_SHARED_PROPS_MAX = 256


def decode_properties_shared(raw: bytes) -> spec.Basic.Properties:
    """``decode_properties`` for a publish: most publishers send the same few property sets,
    so a decoded set without headers is kept and handed out again.  Nothing changes such an
    object afterwards (only ``headers`` is ever rewritten, on a private decode); the cache
    is bounded and dropped whole when full."""
    props = _SHARED_PROPS.get(raw)
    if props is None:
        props = decode_properties(raw)
        if props.headers is None:
            if len(_SHARED_PROPS) >= _SHARED_PROPS_MAX:
                _SHARED_PROPS.clear()
            _SHARED_PROPS[raw] = props
    return props


#: rabbit_misc:check_expiry's ceiling: "10 years in milliseconds" (TTLs, x-expires, expiration)
MAX_EXPIRY = 315_360_000_000
_LEADING_INTEGER = re.compile(r"[+-]?[0-9]+")


def parse_expiration(value: str) -> int:
    """rabbit_basic:parse_expiration: Erlang's string:to_integer, then check_expiry; its errors
    as rabbit_channel:check_expiration_header words them (406)."""
    m = _LEADING_INTEGER.match(value)
    if m is None:
        raise precondition(f"invalid expiration '{value}': no_integer")
    if m.end() < len(value):
        raise precondition(f'invalid expiration \'{value}\': {{leftover_string,"{value[m.end():]}"}}')
    n = int(m.group())
    if n < 0:
        raise precondition(f"invalid expiration '{value}': {{value_negative,{n}}}")
    if n > MAX_EXPIRY:
        raise precondition(f"invalid expiration '{value}': {{value_too_large,{n}}}")
    return n


@dataclass(eq=False, slots=True)
class Message:
    exchange: str
    routing_key: str
    #: content-header property flags and values exactly as received (re-sent verbatim)
    props: bytes
    body: bytes
    persistent: bool = False
    expiration: int | None = None
    #: routing key followed by the CC and BCC header keys (sender-selected distribution)
    routing_keys: tuple[str, ...] = ()
    headers: dict[str, Any] | None = None
    #: the priority property (0 without one); only queues with x-max-priority order by it
    priority: int = 0
    #: the delivery frames' per-message parts, encoded on first delivery (frames.message_wire)
    wire: tuple[bytes, bytes] | None = None

    @classmethod
    def from_publish(
        cls, exchange: str, routing_key: str, props_raw: bytes, body: bytes, props: spec.Basic.Properties
    ) -> Message:
        expiration = parse_expiration(props.expiration) if props.expiration is not None else None
        headers = props.headers or None
        keys: list[str] = [routing_key]
        if headers and ("CC" in headers or "BCC" in headers):
            for name in ("CC", "BCC"):
                extra = headers.get(name)
                if isinstance(extra, list):
                    keys.extend(k for k in extra if isinstance(k, str))
            if "BCC" in headers:
                # RabbitMQ removes BCC before delivery ("blind" copy).
                headers = dict(headers)
                del headers["BCC"]
                props.headers = headers
                props_raw = props.marshal()
        return cls(
            exchange=exchange,
            routing_key=routing_key,
            props=props_raw,
            body=body,
            persistent=props.delivery_mode == 2,
            expiration=expiration,
            routing_keys=tuple(keys),
            headers=headers,
            priority=props.priority or 0,
        )


@dataclass(eq=False, slots=True)
class QueuedMessage:
    """One queue's copy of a message.  ``seq`` orders the queue (publication order)."""

    seq: int
    msg: Message
    expires_at: float | None = None
    redelivered: bool = False
    persisted: bool = False
    delivered_logged: bool = False
    delivery_count: int = 0  # quorum queues: earlier deliveries returned to the queue (x-delivery-count)


class ContentState(Enum):
    METHOD = "method"
    HEADER = "header"
    BODY = "body"


@dataclass(eq=False)
class PendingPublish:
    method: spec.Basic.Publish
    body_size: int = 0
    props_raw: bytes = b""
    props: spec.Basic.Properties | None = None
    parts: list[bytes] | None = None
    received: int = 0
    oversize: bool = False  # above max_message_size: the body is counted, not kept
