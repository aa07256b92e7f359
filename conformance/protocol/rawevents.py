"""What a raw connection reports: the events the broker sent, the end of the socket, and the
close that interrupts a wait (see :mod:`conformance.protocol.raw`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pamqp import commands as spec

from conformance.protocol.errors import Mismatch
from conformance.protocol.wire import describe, method_name


@dataclass(frozen=True)
class Event:
    """One thing the broker sent: a method, with its content when it carries one."""

    seq: int  # arrival order across the whole connection
    channel: int
    method: Any
    properties: spec.Basic.Properties | None = None
    body: bytes | None = None
    at: float = 0.0  # time.monotonic() of arrival

    @property
    def name(self) -> str:
        return method_name(self.method)

    def describe(self) -> str:
        return describe(self.method, self.body)


@dataclass(frozen=True)
class SocketClosed:
    """The socket ended without a connection.close (or after it)."""

    reason: str
    at: float = 0.0

    def describe(self) -> str:
        return f"socket closed ({self.reason})"


class UnexpectedClose(Mismatch):
    """The broker closed the channel or connection while the case waited for something else."""

    def __init__(self, waiting_for: str, event: Event | SocketClosed) -> None:
        super().__init__(
            f"broker closed while waiting for {waiting_for}", expected=waiting_for, observed=event.describe()
        )
        self.event = event

    @property
    def reply_code(self) -> int | None:
        m = getattr(self.event, "method", None)
        return getattr(m, "reply_code", None)
