"""One publisher and two consumers across a fault on the queue's leader: the run the order and the
duplicates cases of the cluster area judge.

C1 consumes through a surviving node and acks everything; C2 consumes through the leader's node
and never acks its first ``hold`` deliveries (so some are unacked when the fault lands); after the
``fault_at``-th publish the fault runs in the background (e.g. a kill of the leader's node) while
publishing goes on; once the last publish is confirmed ``heal`` undoes the fault (the node started
again); C1 consumes on until every confirmed message came to someone (bounded), then the rest is
drained through the surviving node.

Why heal before the rest: from RabbitMQ 4.3 a quorum queue holds the unacked deliveries of a
consumer whose node it lost (C2's) until that node is back or ``consumer_disconnected_timeout``
(60 s) has passed (4.3.0 release notes; conformance/profiles/rabbitmq_releases.toml); before 4.3
it returned them at once. With the node back, every release returns them within the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance.model.verdicts import CaseTimeout
from conformance.verify.cluster import (
    ClusterController,
    Confirms,
    Consuming,
    Seen,
    consumer_arguments,
    drain,
    in_background,
    publish_numbered,
    wait_for,
)

__all__ = ["FailoverRun", "two_consumer_run"]


@dataclass(frozen=True)
class FailoverRun:
    """What one publisher and two consumers saw across a fault (shared by the cases judging it)."""

    by: str  # the case id whose run this is
    confirms: Confirms
    seen: tuple[Seen, ...]  # every delivery (C1, C2, drain) in receipt order
    notes: dict[str, Any]
    fault_done_at: float | None  # time.monotonic() once the fault was over (None: it never returned)
    held: tuple[int, ...]  # the messages C2 received and never acked

    @property
    def after_fault(self) -> list[Seen]:
        """First deliveries (redelivered=false) received after the fault was over."""
        if self.fault_done_at is None:
            return []
        return [s for s in self.seen if s.at > self.fault_done_at and not s.redelivered]

    @property
    def repeated(self) -> set[int]:
        """The messages delivered more than once (to anyone, the drain included)."""
        counts: dict[int, int] = {}
        for s in self.seen:
            counts[s.number] = counts.get(s.number, 0) + 1
        return {n for n, k in counts.items() if k > 1}


def _summary(c: Consuming) -> str:
    return (f"{len(c.seen)} deliveries ({sum(s.redelivered for s in c.seen)} redelivered)"
            + (f"; ended: {c.ended}" if c.ended else ""))


def two_consumer_run(cluster: ClusterController, queue: str, qtype: str, roles: tuple[int, int, int], *,
                     fault: Callable[[], str], fault_at: int, messages: int, hold: int, timeout: float,
                     by: str, pace: float = 0.005, heal: Callable[[], None] | None = None) -> FailoverRun:
    """The run: ``roles`` = (L, P, S); ``fault()`` returns what it did, for the record; ``heal()``
    undoes it once publishing is over."""
    lead, via, survivor = roles
    args = consumer_arguments(qtype)  # a stream consumer reads from the first offset
    c1 = Consuming(cluster.nodes[survivor].url, queue, f"C1 on {cluster.nodes[survivor].name}",
                   timeout=timeout, arguments=args)
    c2 = Consuming(cluster.nodes[lead].url, queue, f"C2 on {cluster.nodes[lead].name}", timeout=timeout,
                   hold=hold, arguments=args)
    threads = []
    done_at: list[float] = []
    did: list[str] = []
    healed: list[float] = []

    def run_fault() -> None:
        did.append(fault())
        done_at.append(time.monotonic())

    def fault_mid_stream(i: int) -> None:
        if i == fault_at:
            threads.append(in_background(run_fault))

    try:
        confirms = publish_numbered(cluster.nodes[via].url, queue, range(messages), timeout=2 * timeout,
                                    between=fault_mid_stream, pace=pace)
        for t in threads:
            t.join(timeout=120)
        if heal is not None and done_at:
            heal()
            healed.append(time.monotonic())
        wait_for("every confirmed message consumed",
                 lambda: confirms.acked <= (c1.numbers | c2.numbers), 3 * timeout, interval=0.5)
    except CaseTimeout:
        pass  # the drain below collects the rest; what is missing then is the finding
    finally:
        c1.stop()
        c2.stop()
    drained = drain(cluster.nodes[survivor].url, queue, qtype, timeout=3 * timeout)
    seen = tuple(sorted([*c1.seen, *c2.seen, *drained.seen], key=lambda s: s.at))
    held = tuple(s.number for s in c2.seen[:hold])
    notes: dict[str, Any] = {
        "fault": f"after publish {fault_at} of {messages}: " + (did[0] if did else "did not return")
                 + (f"; undone {healed[0] - done_at[0]:.1f} s later" if healed and done_at else ""),
        "publisher": confirms.summary(),
        "C1": _summary(c1),
        "C2": _summary(c2),
        "drain": f"{len(drained.seen)} deliveries ({sum(s.redelivered for s in drained.seen)} redelivered)",
        "lost (confirmed, never consumed)": sorted(confirms.acked - {s.number for s in seen})[:20],
        "C2's unacked deliveries": list(held),
    }
    run = FailoverRun(by, confirms, seen, notes, done_at[0] if done_at else None, held)
    notes["first deliveries after the fault"] = len(run.after_fault)
    notes["messages delivered more than once"] = len(run.repeated)
    return run
