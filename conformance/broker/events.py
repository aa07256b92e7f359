"""What the sans-IO core reports to its shell (h11's events): frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionOpened:
    user: str
    vhost: str


@dataclass(frozen=True)
class ChannelOpened:
    channel: int


@dataclass(frozen=True)
class ChannelClosed:
    channel: int
    reply_code: int
    reply_text: str
    by_peer: bool


@dataclass(frozen=True)
class ConnectionClosed:
    reply_code: int
    reply_text: str
    by_peer: bool


@dataclass(frozen=True)
class CloseTransport:
    """The shell must flush ``data_to_send()`` and then close the socket."""

    reason: str


Event = ConnectionOpened | ChannelOpened | ChannelClosed | ConnectionClosed | CloseTransport
