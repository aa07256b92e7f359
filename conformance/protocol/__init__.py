"""The AMQP 0-9-1 protocol client: a raw connection, its channels, frames and events, the
handshake, URIs and TLS. It raises its own exceptions (``conformance.protocol.errors``) and knows
nothing of verdicts, cases, the plugin or pytest: usable on its own.

The names below are its public surface; the modules behind them are ``wire`` (the vocabulary),
``handshake``, ``raw`` / ``rawchannel`` / ``rawevents`` (connection, channels, events),
``errors`` (what a call raises), ``frames`` (content frames by hand), ``uri`` (pika / aio-pika
parameters), ``trace`` and ``invariants`` (the evidence of a case) and ``loopback`` (a listener
for the suite's own peers).
"""

from conformance.protocol.errors import AnswerTimeout, ClientFault, Mismatch, ProtocolOutcome, Strictness
from conformance.protocol.frames import content_body, content_header, publish_unsplit
from conformance.protocol.handshake import Handshake, HandshakeError, HandshakeRefused
from conformance.protocol.raw import (
    Event,
    RawChannel,
    RawConnection,
    SocketClosed,
    UnexpectedClose,
    bodies,
    default_client_properties,
    tags,
)
from conformance.protocol.wire import PROTOCOL_HEADER, URL, describe, method_name, reply_name

__all__ = [
    "PROTOCOL_HEADER", "URL", "AnswerTimeout", "ClientFault", "Event", "Handshake", "HandshakeError",
    "HandshakeRefused", "Mismatch", "ProtocolOutcome", "RawChannel", "RawConnection", "SocketClosed",
    "Strictness", "UnexpectedClose", "bodies", "content_body", "content_header",
    "default_client_properties", "describe", "method_name", "publish_unsplit", "reply_name", "tags",
]
