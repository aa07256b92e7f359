"""Sans-IO AMQP 0-9-1 server connection (h11 style).

``ConnectionCore.receive_data(bytes)`` feeds bytes in, ``data_to_send()`` hands bytes out,
``events()`` reports what happened (frozen dataclasses).  No sockets, no awaits: the
asyncio shell (``server.py``) only moves bytes and calls ``tick()`` / ``on_durable()``.

Split along h11's lines: ``events`` (what the core reports), ``frames`` (framing and
encoding), ``channel`` (one channel's state and methods), ``connection`` (the stream, the
handshake, connection methods); ``states`` holds the one transition table.  This module
is the public surface: what the asyncio shell, the in-process fuzzer and the tests drive the
core with (the core itself, its events, the timeouts that bound it and ``marshal_method``);
everything else is imported from the module that defines it.
"""

from __future__ import annotations

from .connection import ConnectionCore
from .events import ChannelClosed, ChannelOpened, CloseTransport, ConnectionClosed, ConnectionOpened, Event
from .frames import (
    CLIENT_CLOSE_TIMEOUT,
    CLOSE_OK_TIMEOUT,
    FATAL_FRAME_CLOSE_DELAY,
    HANDSHAKE_TIMEOUT,
    marshal_method,
)
from .version import server_properties

__all__ = [
    "CLIENT_CLOSE_TIMEOUT",
    "CLOSE_OK_TIMEOUT",
    "FATAL_FRAME_CLOSE_DELAY",
    "HANDSHAKE_TIMEOUT",
    "ChannelClosed",
    "ChannelOpened",
    "CloseTransport",
    "ConnectionClosed",
    "ConnectionCore",
    "ConnectionOpened",
    "Event",
    "marshal_method",
    "server_properties",
]
