"""What the tx table's variant cases share: their environment and two answer classifiers.

``Env`` is what a variant of ``scenarios/test_tx.py`` gets (connections, names, clean-up, an
observer channel on its own connection, and the usual start: a filled queue and a tx channel that
got its messages); ``closes_with``, ``counted`` and ``committed_only`` turn what a broker did into
a table value or a channel.close.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from conformance.model.verdicts import Mismatch
from conformance.protocol.raw import Event, RawChannel, UnexpectedClose
from conformance.protocol.wire import URL
from conformance.verify.expect import quiet_window
from conformance.verify.steps import get_tags, publish_confirmed, tx_select


@dataclass
class Env:
    """What a variant gets: connections, names, cleanup, and a separate observer channel."""

    amqp: Any
    ctx: Any
    cleanup: Any
    broker_url: URL
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

    def filled(self, n: int) -> str:
        """A new queue holding ``n`` messages."""
        q = self.queue()
        self.fill(q, n)
        return q

    def got_in_tx(self, n: int) -> tuple[str, RawChannel, list[int]]:
        """A new queue of ``n`` messages, a tx channel, and the delivery tags of the ``n`` messages
        that channel got (basic.get, manual ack): the start of the ack and reject rows."""
        q = self.filled(n)
        ch = self.tx_channel()
        return q, ch, get_tags(ch, q, n)


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


def committed_only(ctx: Any, bodies: list[bytes], client: str) -> str:
    """A client library's tx.rollback of one publish and tx.commit of the next, as a table value:
    ``yes`` when only the committed message is in the queue, ``no`` when the rolled-back one is
    there too; anything else is a Mismatch."""
    ctx.observe("queue contents", bodies)
    if bodies == [b"committed"]:
        return "yes"
    if bodies == [b"rolled-back", b"committed"]:
        return "no"
    raise Mismatch(f"queue contents after {client} rollback + commit", expected=[b"committed"],
                   observed=bodies)
