"""What the tx table's variant cases share: their environment and two answer classifiers.

``Env`` is what a variant of ``scenarios/test_tx.py`` gets (connections, names, clean-up and an
observer channel on its own connection); ``closes_with`` and ``counted`` turn what a broker did
into a table value or a channel.close.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from conformance.clients.raw import Event, RawChannel, UnexpectedClose
from conformance.clients.steps import publish_confirmed, quiet_window, tx_select
from conformance.verdicts import Mismatch


@dataclass
class Env:
    """What a variant gets: connections, names, cleanup, and a separate observer channel."""

    amqp: Any
    ctx: Any
    cleanup: Any
    broker_url: str
    request: pytest.FixtureRequest
    _observer: RawChannel | None = None

    def observer(self) -> RawChannel:
        """A channel on its own connection, to look at queues as another client would."""
        if self._observer is None:
            self._observer = self.amqp.channel()
        return self._observer

    def count(self, q: str) -> int:
        return self.observer().message_count(q)

    def count_after_close(self, q: str, requeued: int) -> int:
        """The ready count after a channel close that may requeue ``requeued`` messages.

        A broker may requeue a closed channel's unacked deliveries just after close-ok, and
        nothing signals when it has: poll (bounded by a short window) until the count reaches
        ``requeued``; the last count is returned either way.
        """
        deadline = time.monotonic() + quiet_window(self.ctx.timeout)
        while True:
            n = self.count(q)
            if n == requeued or time.monotonic() >= deadline:
                return n
            time.sleep(0.02)  # no event announces a requeue; re-ask the queue

    def queue(self, suffix: str = "q", **kwargs: Any) -> str:
        q = self.cleanup.queue(self.ctx.name(suffix))
        self.observer().declare_queue(q, **self.ctx.declare_fields(**kwargs))
        return q

    def fill(self, q: str, n: int) -> None:
        """Put ``n`` messages into ``q`` (confirmed, so they are there before the case goes on)."""
        publish_confirmed(self.observer(), "", q, [b"m%d" % (i + 1) for i in range(n)])

    def tx_channel(self) -> RawChannel:
        ch = self.amqp.channel()
        tx_select(ch)
        return ch


def closes_with(ch: RawChannel, fn: Callable[[], Any]) -> Event | None:
    """Run ``fn`` (ending in a synchronous round trip); the channel.close it provoked, or None."""
    try:
        fn()
    except UnexpectedClose as exc:
        if isinstance(exc.event, Event):
            return exc.event
        raise
    return None


def counted(observed: int, mapping: dict[int, str], what: str) -> str:
    """Map a queue count to a table value; a count the table cannot explain is a Mismatch."""
    if observed in mapping:
        return mapping[observed]
    raise Mismatch(what, expected=" or ".join(f"{k} ({v})" for k, v in mapping.items()), observed=observed)
