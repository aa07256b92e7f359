"""The faults checker: classify every message of a history, Jepsen's queue checker in our terms.

A history is what the clients saw: every publish attempt (with its outcome: the broker's ack,
its nack, or nothing known — the connection died before an answer) and every delivery (with the
redelivered flag). Each message id falls in exactly one of:

- ``ok``          confirmed (basic.ack) and consumed at least once;
- ``lost``        confirmed, never consumed — not even by the final drain after every node is back;
- ``recovered``   not confirmed (nacked or outcome unknown) but consumed;
- ``unconfirmed`` not confirmed and not consumed: the broker never promised it, so it is never a loss;
- ``unexpected``  consumed but never published.

``duplicated`` counts ids consumed more than once; it overlaps the classes above (a duplicated
message is also ok or recovered). Duplicates are legal under at-least-once delivery when the
second delivery carries redelivered=true; ``duplicated_unflagged`` counts the ones that did not.
``recovered_after_nack`` counts the recovered ones the broker had nacked (a nack says the broker
did not take responsibility, yet the message was delivered: legal, and worth knowing).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

ACK, NACK, UNKNOWN = "ack", "nack", "unknown"
CLASSES = (
    "ok",
    "lost",
    "recovered",
    "unconfirmed",
    "unexpected",
    "duplicated",
    "duplicated_unflagged",
    "recovered_after_nack",
)


@dataclass(frozen=True)
class Publish:
    msg_id: str
    t_sent: float  # seconds since the run started
    outcome: str  # ack | nack | unknown
    t_settled: float | None = None  # when the ack/nack came (None for unknown)
    node: int = -1


@dataclass(frozen=True)
class Delivery:
    msg_id: str
    t: float
    redelivered: bool = False
    node: int = -1


@dataclass(frozen=True)
class Verdict:
    counts: dict[str, int]
    published: int  # attempts
    confirmed: int
    lost_ids: tuple[str, ...] = ()
    unexpected_ids: tuple[str, ...] = ()
    latency_ms: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)  # publishes by outcome: ack / nack / unknown

    def fraction(self, name: str) -> float:
        """``name``'s share of the published messages (unexpected: of the deliveries' ids)."""
        total = self.published or 1
        return self.counts.get(name, 0) / total


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def check(publishes: Iterable[Publish], deliveries: Iterable[Delivery]) -> Verdict:
    pubs: dict[str, Publish] = {}
    for p in publishes:
        # an id published twice keeps its best outcome (ack > nack > unknown): the suite's
        # publishers never reuse an id, so this only guards hand-made histories
        old = pubs.get(p.msg_id)
        if old is None or _rank(p.outcome) > _rank(old.outcome):
            pubs[p.msg_id] = p
    seen: Counter[str] = Counter()
    unflagged: set[str] = set()
    for d in deliveries:
        seen[d.msg_id] += 1
        if seen[d.msg_id] > 1 and not d.redelivered:
            unflagged.add(d.msg_id)
    counts = dict.fromkeys(CLASSES, 0)
    lost: list[str] = []
    for msg_id, p in pubs.items():
        consumed = seen[msg_id] > 0
        if p.outcome == ACK:
            if consumed:
                counts["ok"] += 1
            else:
                counts["lost"] += 1
                lost.append(msg_id)
        else:
            counts["recovered" if consumed else "unconfirmed"] += 1
            if consumed and p.outcome == NACK:
                counts["recovered_after_nack"] += 1
    unexpected = sorted(m for m in seen if m not in pubs)
    counts["unexpected"] = len(unexpected)
    counts["duplicated"] = sum(1 for n in seen.values() if n > 1)
    counts["duplicated_unflagged"] = len(unflagged)
    lat = [
        1000 * (p.t_settled - p.t_sent) for p in pubs.values() if p.outcome == ACK and p.t_settled is not None
    ]
    latency = {"p50": percentile(lat, 50), "p99": percentile(lat, 99), "max": max(lat) if lat else math.nan}
    return Verdict(
        counts=counts,
        published=len(pubs),
        confirmed=sum(1 for p in pubs.values() if p.outcome == ACK),
        lost_ids=tuple(sorted(lost)),
        unexpected_ids=tuple(unexpected),
        latency_ms=latency,
        outcomes=dict(Counter(p.outcome for p in pubs.values())),
    )


def _rank(outcome: str) -> int:
    return {ACK: 2, NACK: 1}.get(outcome, 0)


def buckets(
    publishes: Iterable[Publish],
    deliveries: Iterable[Delivery],
    width: float,
    end: float,
    lost: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Throughput over time: per ``width``-second bucket from 0 to ``end``, how many publishes
    were sent, confirmed (by ack time) and deliveries consumed, and how many of the ``lost``
    ids were sent in it (where in the timeline the losses come from)."""
    n = max(1, math.ceil(end / width))
    gone = set(lost)
    rows: list[dict[str, Any]] = [
        {"t": round(i * width, 3), "published": 0, "confirmed": 0, "consumed": 0, "lost": 0} for i in range(n)
    ]

    def slot(t: float) -> int:
        return min(n - 1, max(0, int(t // width)))

    for p in publishes:
        rows[slot(p.t_sent)]["published"] += 1
        if p.msg_id in gone:
            rows[slot(p.t_sent)]["lost"] += 1
        if p.outcome == ACK and p.t_settled is not None:
            rows[slot(p.t_settled)]["confirmed"] += 1
    for d in deliveries:
        rows[slot(d.t)]["consumed"] += 1
    return rows
