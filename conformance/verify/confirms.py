"""Publisher-confirm bookkeeping, written once: which publish sequence numbers a stream of
``basic.ack`` / ``basic.nack`` frames settled, and the bounded wait until all are settled.

Read with the confirms guide's semantics: a ``multiple=true`` confirm with tag T settles every
still-outstanding seq <= T; a single one only its own tag, so a gap left by a missing single
confirm keeps the wait going (and ends in TIMEOUT naming what is missing).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from pamqp import commands as spec

from conformance.model.verdicts import CaseTimeout
from conformance.protocol.raw import Event, RawChannel

CONFIRM_TYPES = (spec.Basic.Ack, spec.Basic.Nack)


def short_seqs(seqs: list[int], limit: int = 8) -> str:
    """``[1, 2, 3, …] (12)`` or ``none``: a seq list short enough for a message."""
    if not seqs:
        return "none"
    head = ", ".join(map(str, seqs[:limit]))
    return f"[{head}{', …' if len(seqs) > limit else ''}] ({len(seqs)})"


@dataclass
class Settlement:
    """Which publish sequence numbers 1..``published`` the confirms received so far settled.
    Mutable on purpose: it is filled frame by frame while a case waits.

    Linear in the confirms received: every seq below ``_low`` is settled, so a ``multiple=true``
    confirm looks only at seqs from ``_low`` up to its tag (a run of 5,000 publishes confirmed one
    by one once cost seconds of CPU in a rescan of 1..tag per confirm)."""

    published: int
    events: list[Event] = field(default_factory=list)
    acked: Counter[int] = field(default_factory=Counter)
    nacked: Counter[int] = field(default_factory=Counter)
    anomalies: list[str] = field(default_factory=list)
    _done: set[int] = field(default_factory=set, repr=False)
    _low: int = field(default=1, repr=False)

    def add(self, ev: Event) -> None:
        self.events.append(ev)
        tag = int(ev.method.delivery_tag)
        kind = self.nacked if isinstance(ev.method, spec.Basic.Nack) else self.acked
        if tag < 1 or tag > self.published:
            self.anomalies.append(f"{ev.describe()}: tag outside the published range 1..{self.published}")
            return
        if ev.method.multiple:
            covered = [s for s in range(self._low, tag + 1) if s not in self._done]
            if not covered:
                self.anomalies.append(
                    f"{ev.describe()}: covers no outstanding publish (all <= {tag} settled)"
                )
                kind[tag] += 1  # counted as a second settlement of its own tag
            for s in covered:
                kind[s] += 1
            self._done.update(covered)
        else:
            kind[tag] += 1
            self._done.add(tag)
        while self._low in self._done:
            self._low += 1

    @property
    def settled(self) -> set[int]:
        return set(self._done)

    @property
    def complete(self) -> bool:
        return len(self._done) == self.published

    def missing(self) -> list[int]:
        return [s for s in range(self._low, self.published + 1) if s not in self._done]

    def twice(self) -> list[str]:
        out = []
        for s in range(1, self.published + 1):
            a, n = self.acked.get(s, 0), self.nacked.get(s, 0)
            if a + n > 1:
                out.append(f"seq {s}: {a} ack(s), {n} nack(s)")
        return out

    def summary(self) -> str:
        multiples = sum(1 for e in self.events if e.method.multiple)
        return (
            f"{len(self.events)} confirm frames ({multiples} multiple=true) for {self.published} publishes; "
            f"{len(self.acked)} seqs acked, {len(self.nacked)} nacked, missing {short_seqs(self.missing())}"
        )


def settle_all(ch: RawChannel, published: int, timeout: float | None = None, *, quiet: float = 0.0,
               what: str = "") -> Settlement:
    """Collect confirms on ``ch`` until every seq 1..``published`` is settled, then listen ``quiet``
    seconds more for stray (duplicate) confirms. TIMEOUT names what was and was not settled."""
    limit = ch.conn.timeout if timeout is None else timeout
    st = Settlement(published)
    label = what or f"confirms for all {published} publishes"
    deadline = time.monotonic() + limit
    while not st.complete:
        remaining = deadline - time.monotonic()
        try:
            st.add(ch.wait(CONFIRM_TYPES, f"confirms for seqs 1..{published}", timeout=max(remaining, 0.0)))
        except CaseTimeout as exc:
            raise CaseTimeout(label, limit, expected=f"every seq 1..{published} acked or nacked",
                              observed=st.summary()) from exc
    end = time.monotonic() + quiet
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            break
        try:
            st.add(ch.wait(CONFIRM_TYPES, "no further confirms", timeout=remaining))
        except CaseTimeout:
            break
    return st
