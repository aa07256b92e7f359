"""The faults workload itself: publishers with confirms and consumers with manual acks on one
replicated queue while a nemesis kills, pauses and partitions nodes (:func:`run_faults`, a started
controller and a :class:`FaultsConfig` in, a :class:`FaultsResult` out). The command line:
:mod:`conformance.faults.command`; the records and the terminal table: :mod:`conformance.faults.records`.
"""


from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pika
import pika.exceptions

from conformance.cluster.base import ClusterController, ClusterError
from conformance.faults.checker import Verdict, buckets, check
from conformance.faults.workload import Consumer, History, Progress, Publisher, drain, params
from conformance.protocol.wire import URL

QUEUE_TYPES = ("quorum", "classic-mirrored")
NEMESES = ("kill", "pause", "partition")
#: fault action -> its recovery action
RECOVERY = {"kill": "start", "pause": "resume", "partition": "heal"}

# What each queue type promises about a confirmed message, and where it says so.
PROMISES: dict[str, tuple[str, str]] = {
    "quorum": (
        "no-loss",
        "RabbitMQ quorum queues guide: a message is confirmed once a quorum of replicas has written "
        "it; the queue stays available and keeps its confirmed messages while a majority is up",
    ),
    "classic-mirrored": (
        "no-loss",
        "RabbitMQ publisher confirms guide (reference 000, 'When Will Published Messages Be Confirmed'): "
        "'For mirrored queues, this means that all mirrors have accepted the message'; the mirroring "
        "guide adds that promoting an unsynchronised mirror, and a paused minority discarding its "
        "contents on rejoin, can lose messages",
    ),
}

EXIT_OK, EXIT_LOST, EXIT_USAGE, EXIT_INTERNAL, EXIT_CLUSTER = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class FaultsConfig:
    queue_type: str = "quorum"
    duration: float = 60.0
    # >0: publishing ends once this many publishes are confirmed, ``duration`` only bounds it (a
    # workload of a known size whatever the machine's speed)
    messages: int = 0
    nemesis: tuple[str, ...] = NEMESES
    interval: float = 4.0  # quiet time between a recovery and the next fault (s)
    hold: float = 6.0  # how long a fault lasts (s)
    publishers: int = 2
    consumers: int = 2
    rate: float = 100.0  # per publisher, messages/s (0: as fast as confirms come)
    seed: int = 1
    bucket: float = 5.0
    drain_timeout: float = 180.0
    target: str = "local:rabbitmq-cluster"
    ha_sync: str = "automatic"  # classic mirrored: ha-sync-mode


@dataclass
class FaultsResult:
    run_id: str
    config: FaultsConfig
    verdict: Verdict
    events: list[dict[str, Any]]
    buckets: list[dict[str, Any]]
    drain: str
    duration: float
    injected: str | None = None
    client_events: list[dict[str, object]] = field(default_factory=list)
    broker: tuple[str | None, str | None] = (None, None)  # (product, version) node 0 announced
    aborted: str | None = None  # the node command failure that ended the schedule early

    @property
    def promise(self) -> str:
        return PROMISES[self.config.queue_type][0]

    @property
    def failed(self) -> bool:
        return self.promise == "no-loss" and self.verdict.counts["lost"] > 0


class Nemesis:
    """Acts on the cluster on a schedule: fault, hold, recover, interval; one node at a time."""

    def __init__(
        self, cluster: ClusterController, config: FaultsConfig, history: History, log: Callable[[str], None]
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.history = history
        self.log = log
        self.events: list[dict[str, Any]] = []
        self.rng = random.Random(config.seed)
        self.active: str | None = None
        self.failure: str | None = None  # the first node command that failed: it ends the schedule
        self.phase = "schedule"  # "final": the recovery before the drain
        self.kinds: list[str] = []
        for kind in config.nemesis:
            reason = cluster.supports(kind)
            if reason is None:
                self.kinds.append(kind)
            else:
                self.record("unsupported", None, False, f"{kind}: {reason}")
                log(f"nemesis {kind}: UNSUPPORTED — {reason}")

    def record(self, action: str, node: int | None, ok: bool, detail: str = "") -> None:
        name = self.cluster.nodes[node].name if node is not None else None
        self.events.append(
            {
                "phase": self.phase,
                "t": round(self.history.now(), 3),
                "action": action,
                "node": node,
                "node_name": name,
                "ok": ok,
                "detail": detail,
            }
        )

    def act(self, action: str, node: int | None) -> bool:
        fn = getattr(self.cluster, action)
        try:
            fn() if node is None else fn(node)
        except (ClusterError, OSError) as exc:
            self.record(action, node, False, str(exc)[:300])
            self.log(f"nemesis {action} n{node}: failed: {exc}")
            if self.failure is None and self.phase == "schedule":
                # A node in an unknown state makes every later count doubtful: no further faults.
                name = self.cluster.nodes[node].name if node is not None else "every node"
                self.failure = f"nemesis {action} of {name} failed: {str(exc).splitlines()[0]}"
            return False
        self.record(action, node, True)
        return True

    def run(self, until: float, stop: threading.Event) -> None:
        step = 0
        while self.kinds and time.monotonic() < until and not stop.is_set():
            kind = self.kinds[step % len(self.kinds)]
            step += 1
            node = self.rng.randrange(len(self.cluster.nodes))
            if self.act(kind, node):
                self.active = f"{kind} n{node}"
                stop.wait(self.config.hold)
                recovery = RECOVERY[kind]
                self.act(recovery, None if recovery == "heal" else node)
                self.active = None
            if self.failure is not None:
                stop.set()  # the clients stop too: the run ends, recovered and drained
                return
            stop.wait(self.config.interval)

    def recover_all(self) -> None:
        """Undo everything: heal, resume every node, start the dead ones."""
        self.phase = "final"
        if "partition" in self.kinds:
            self.act("heal", None)
        for node in self.cluster.nodes:
            if "pause" in self.kinds:
                with contextlib.suppress(Exception):
                    self.cluster.resume(node.index)
        alive: Callable[[int], bool] | None = getattr(self.cluster, "answers", None)
        for node in self.cluster.nodes:
            if alive is not None and not alive(node.index):
                self.act("start", node.index)

    @property
    def fault_count(self) -> int:
        return sum(1 for e in self.events if e["action"] in RECOVERY and e["ok"])


def _declare(
    cluster: ClusterController, config: FaultsConfig, queue: str, policy: str
) -> tuple[str | None, str | None]:
    """Declare the run's queue (and its mirroring policy); the broker node 0 announces."""
    if config.queue_type == "classic-mirrored":
        cluster.set_policy(
            policy, f"^{queue}$", json.dumps({"ha-mode": "all", "ha-sync-mode": config.ha_sync})
        )
    args = {"x-queue-type": "quorum"} if config.queue_type == "quorum" else {}
    node = cluster.nodes[0]
    try:
        conn = pika.BlockingConnection(params(node.url))
        try:
            conn.channel().queue_declare(queue, durable=True, arguments=args)
            props = dict(conn._impl.server_properties or {})
        finally:
            with contextlib.suppress(Exception):
                conn.close()
    except pika.exceptions.AMQPError as exc:
        raise ClusterError(
            f"declaring the {config.queue_type} queue through node {node.name} failed: "
            f"{type(exc).__name__} {exc}".splitlines()[0]
        ) from exc

    def text(key: str) -> str | None:
        value = props.get(key)
        return value.decode(errors="replace") if isinstance(value, bytes) else (str(value) if value else None)

    return text("product"), text("version")


def _delete(cluster: ClusterController, queue: str) -> None:
    for node in cluster.nodes:
        try:
            conn = pika.BlockingConnection(params(node.url))
        except Exception:  # noqa: BLE001 - try the next node
            continue
        try:
            conn.channel().queue_delete(queue)
            return
        except Exception:  # noqa: BLE001 - best effort clean-up
            pass
        finally:
            with contextlib.suppress(Exception):
                conn.close()


def run_faults(
    cluster: ClusterController,
    config: FaultsConfig,
    *,
    run_id: str,
    urls: Sequence[URL] | None = None,
    log: Callable[[str], None] = print,
    injected: str | None = None,
    status: Callable[[str], None] | None = None,
) -> FaultsResult:
    """Run the workload on a started cluster; ``urls`` overrides the node URLs the clients use
    (the fault injector's proxy in front of a node); ``status`` takes the progress line instead
    of ``log`` (a live status line on a terminal)."""
    queue, policy = f"faults-{run_id}", f"faults-ha-{run_id}"
    client_urls = list(urls or [n.url for n in cluster.nodes])
    broker = _declare(cluster, config, queue, policy)
    history = History(goal=config.messages)
    stop_clients, stop_nemesis = threading.Event(), history.reached  # enough confirms end the schedule
    pubs = [
        Publisher(i, client_urls, queue, history, stop_clients, run_id, config.rate)
        for i in range(config.publishers)
    ]
    cons = [Consumer(i, client_urls, queue, history, stop_clients) for i in range(config.consumers)]
    nemesis = Nemesis(cluster, config, history, log)
    progress = Progress(history, nemesis, log, status=status)
    try:
        for t in (*cons, *pubs):
            t.start()
        progress.start()
        nemesis.run(time.monotonic() + config.duration, stop_nemesis)
        # the schedule may end early (no supported nemesis): keep the clients going to the end,
        # or until config.messages publishes are confirmed
        stop_nemesis.wait(max(0.0, config.duration - history.now()))
        for p in pubs:
            p.stop_event.set()
        for p in pubs:
            p.join(30)
        end = history.now()
        log(f"[{end:6.0f}s] publishers stopped; recovering every node for the final drain")
        nemesis.recover_all()
        _wait_clustered(cluster, time.monotonic() + 120, log)
        for c in cons:
            c.join(15)
        how = drain(client_urls, queue, history, time.monotonic() + config.drain_timeout)
    finally:
        stop_clients.set()
        stop_nemesis.set()
        progress.stop()
    verdict = check(history.publishes, history.deliveries)
    with contextlib.suppress(Exception):
        _delete(cluster, queue)
        if config.queue_type == "classic-mirrored":
            cluster.clear_policy(policy)
    rows = buckets(history.publishes, history.deliveries, config.bucket, history.now(), verdict.lost_ids)
    for row in rows:
        row["faults"] = _active(nemesis.events, float(row["t"]), float(row["t"]) + config.bucket)
    return FaultsResult(
        run_id, config, verdict, nemesis.events, rows, how, end, injected, history.client_events, broker,
        nemesis.failure,
    )


def _wait_clustered(cluster: ClusterController, deadline: float, log: Callable[[str], None]) -> None:
    """Wait until every node runs again (local clusters; a user's cluster is trusted)."""
    wait: Callable[[float], None] | None = getattr(cluster, "wait_running", None)
    if wait is None:
        return
    try:
        wait(max(1.0, deadline - time.monotonic()))
    except ClusterError as exc:
        log(f"before the drain: {exc}")


def _active(events: list[dict[str, Any]], start: float, end: float) -> list[str]:
    """Faults active at any time within [start, end) from the event log."""
    out: list[str] = []
    open_: dict[str, float] = {}
    for e in events:
        if not e["ok"]:
            continue
        action, node = e["action"], e["node"]
        if action in RECOVERY:
            open_[f"{action} n{node}"] = e["t"]
        elif action in ("start", "resume", "heal"):
            for key in [
                k
                for k in open_
                if RECOVERY[k.split()[0]] == action and (action == "heal" or k.endswith(f"n{node}"))
            ]:
                if open_[key] < end and e["t"] >= start:
                    out.append(key)
                del open_[key]
    out.extend(k for k, t in open_.items() if t < end)
    return sorted(set(out))
