"""A channel on a fresh connection of its own, for a question asked outside any case.

The harness asks a broker things before or between cases: is it still answering after a TIMEOUT
(``plugin/liveness.py``), does it offer a queue type (``queue_types.offered``). Each asks on a
new raw connection, declares a probe queue of its own and closes the connection whatever the
answer; only what the answer means differs, and that stays with the caller.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from conformance.model.verdicts import CaseOutcome
from conformance.protocol.raw import RawChannel, RawConnection
from conformance.protocol.wire import URL

CLOSE_TIMEOUT = 1.0  # the connection's close is bounded: a broker that does not answer it is let go


class NoConnection(Exception):
    """The fresh connection could not be opened; ``outcome`` says what happened."""

    def __init__(self, outcome: CaseOutcome) -> None:
        super().__init__(str(outcome))
        self.outcome = outcome


@contextmanager
def fresh_channel(url: URL, timeout: float) -> Iterator[RawChannel]:
    """A channel on a new connection to ``url`` (every wait bounded by ``timeout``); the
    connection is closed on leaving the block. A failed open raises :class:`NoConnection`; what
    the channel's methods raise (a refusal, a timeout) is the caller's to read."""
    try:
        conn = RawConnection.open(url, timeout=timeout)
    except CaseOutcome as exc:
        raise NoConnection(exc) from exc
    try:
        yield conn.channel()
    finally:
        conn.close(timeout=CLOSE_TIMEOUT)


def probe_queue_name(purpose: str) -> str:
    """A queue name no case and no other process uses: ``amqpc-<purpose>-<pid>-<random>``."""
    return f"amqpc-{purpose}-{os.getpid()}-{os.urandom(3).hex()}"
