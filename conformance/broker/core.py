"""Sans-IO AMQP 0-9-1 server connection (h11 style).

``ConnectionCore.receive_data(bytes)`` feeds bytes in, ``data_to_send()`` hands bytes out,
``events()`` reports what happened (frozen dataclasses).  No sockets, no awaits: the
asyncio shell (``server.py``) only moves bytes and calls ``tick()`` / ``on_durable()``.

Split along h11's lines: ``events`` (what the core reports), ``frames`` (framing and
encoding), ``channel`` (one channel's state and methods), ``connection`` (the stream, the
handshake, connection methods); ``states`` holds the one transition table.  This module
is the public surface and re-exports them.
"""

from __future__ import annotations

from .channel import ChannelCore, ContentState, PendingPublish
from .connection import ConnectionCore, server_properties, transition_error
from .errors import not_found
from .events import ChannelClosed, ChannelOpened, CloseTransport, ConnectionClosed, ConnectionOpened, Event
from .frames import (
    CLOSE_OK_TIMEOUT,
    FATAL_FRAME_CLOSE_DELAY,
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_MIN_SIZE,
    HANDSHAKE_TIMEOUT,
    HEARTBEAT_FRAME,
    MAX_MESSAGE_SIZE,
    PROTOCOL_HEADER,
    content_frames,
    marshal_method,
    unvalidated,
)
from .settlement import Unacked

__all__ = [
    "CLOSE_OK_TIMEOUT",
    "FATAL_FRAME_CLOSE_DELAY",
    "FRAME_BODY",
    "FRAME_END",
    "FRAME_HEADER",
    "FRAME_HEARTBEAT",
    "FRAME_METHOD",
    "FRAME_MIN_SIZE",
    "HANDSHAKE_TIMEOUT",
    "HEARTBEAT_FRAME",
    "MAX_MESSAGE_SIZE",
    "PROTOCOL_HEADER",
    "ChannelClosed",
    "ChannelCore",
    "ChannelOpened",
    "CloseTransport",
    "ConnectionClosed",
    "ConnectionCore",
    "ConnectionOpened",
    "ContentState",
    "Event",
    "PendingPublish",
    "Unacked",
    "content_frames",
    "marshal_method",
    "not_found",
    "server_properties",
    "transition_error",
    "unvalidated",
]
