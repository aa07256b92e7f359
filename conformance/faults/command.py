"""``faults``: a Jepsen-style workload against a cluster — publishers with confirms and consumers
with manual acks on one replicated queue while a nemesis kills, pauses and partitions nodes.

Entry points: :func:`main` (argv -> exit code) and :func:`run_faults` (a started controller and a
:class:`FaultsConfig` -> :class:`FaultsResult`), for a CLI subcommand or a benchmark.

Exit codes: 0 nothing lost (or lost on a queue type that promises nothing); 1 a queue type whose
profile promises no loss lost a confirmed message; 2 bad arguments (one line); 3 internal error;
4 the cluster could not be started, reached or checked, or a node command failed (one line);
130 interrupted (^C; the cluster is torn down).

Records (JSON lines, ``--results``/faults-<run>-<queue type>.jsonl), one ``record`` field naming
the kind (the report reads them beside the suite's results; the gate and the compliance tables
leave them out):

- ``faults.summary``: run_id, time, target, broker_product, broker_version, cluster_size,
  queue_type, promise, promise_source, nemesis (list), interval_s, hold_s, duration_s, events
  (nemesis actions), faults (fault actions), published, confirmed, outcomes {ack, nack, unknown},
  counts {ok, lost, recovered, unconfirmed, unexpected, duplicated, duplicated_unflagged,
  recovered_after_nack}, fractions (same keys, of published), confirm_latency_ms {p50, p99, max},
  drain (how the final drain ended), lost_ids (first 50), injected (the injector's description or
  null), verdict (PASS | FAIL).
- ``faults.bucket``: run_id, queue_type, t (bucket start, s), width_s, published, confirmed, consumed,
  lost (lost messages sent in the bucket), faults (fault actions active in the bucket, e.g. ["kill n1"]).
- ``faults.event``: run_id, queue_type, phase (schedule | final), t (s since start), action (kill |
  start | pause | resume | partition | heal | unsupported), node (index or null), node_name, ok, detail.
- ``faults.client``: run_id, queue_type, t, client (thread name), node, event (connected, or the
  error that ended its connection: what the client saw meanwhile).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pika
import pika.exceptions

from conformance.argparsing import command_parser
from conformance.cluster.base import ACTIONS, ClusterController, ClusterError, Unsupported
from conformance.faults.checker import CLASSES, Verdict, buckets, check
from conformance.faults.workload import Consumer, History, Progress, Publisher, drain, params

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
    urls: Sequence[str] | None = None,
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


# -- output ---------------------------------------------------------------------------------


def scheduled_events(events: list[dict[str, Any]]) -> int:
    """Nemesis actions the schedule carried out (faults and their recoveries, Jepsen's start/stop
    operations); the final recovery before the drain and UNSUPPORTED notes are not counted."""
    return sum(
        1 for e in events if e.get("phase", "schedule") == "schedule" and e["action"] in ACTIONS and e["ok"]
    )


def records(result: FaultsResult) -> list[dict[str, Any]]:
    cfg, v = result.config, result.verdict
    promise, source = PROMISES[cfg.queue_type]
    base = {"run_id": result.run_id, "queue_type": cfg.queue_type}
    summary = {
        "record": "faults.summary",
        **base,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "target": cfg.target,
        "broker_product": result.broker[0],
        "broker_version": result.broker[1],
        "cluster_size": None,
        "promise": promise,
        "promise_source": source,
        "nemesis": list(cfg.nemesis),
        "interval_s": cfg.interval,
        "hold_s": cfg.hold,
        "duration_s": round(result.duration, 1),
        "events": scheduled_events(result.events),
        "faults": sum(1 for e in result.events if e["action"] in RECOVERY and e["ok"]),
        "published": v.published,
        "confirmed": v.confirmed,
        "outcomes": v.outcomes,
        "counts": v.counts,
        "fractions": {k: round(v.fraction(k), 6) for k in v.counts},
        "confirm_latency_ms": {k: (None if x != x else round(x, 2)) for k, x in v.latency_ms.items()},
        "drain": result.drain,
        "lost_ids": list(v.lost_ids[:50]),
        "injected": result.injected,
        "verdict": "FAIL" if result.failed else "PASS",
    }
    out: list[dict[str, Any]] = [summary]
    out += [{"record": "faults.bucket", **base, "width_s": cfg.bucket, **row} for row in result.buckets]
    out += [{"record": "faults.event", **base, **e} for e in result.events]
    out += [{"record": "faults.client", **base, **e} for e in result.client_events]
    return out


def write_records(result: FaultsResult, folder: Path, cluster_size: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"faults-{result.run_id}-{result.config.queue_type}.jsonl"
    rows = records(result)
    rows[0]["cluster_size"] = cluster_size
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")
    return path


def render(result: FaultsResult) -> str:
    v = result.verdict
    cfg = result.config
    lines = [
        f"faults {result.run_id}: {cfg.queue_type} queue, nemesis {','.join(cfg.nemesis)}, "
        f"{result.duration:.0f} s, {scheduled_events(result.events)} scheduled nemesis events "
        f"({sum(1 for e in result.events if e['action'] in RECOVERY and e['ok'])} faults)"
    ]
    if result.injected:
        lines.append(f"injected fault: {result.injected}")
    lines.append(
        f"published {v.published} (broker ack {v.outcomes.get('ack', 0)}, nack {v.outcomes.get('nack', 0)}, "
        f"no answer {v.outcomes.get('unknown', 0)}); final drain: {result.drain}"
    )
    for name in CLASSES:
        lines.append(f"  {name:<21} {v.counts[name]:>8}  {100 * v.fraction(name):8.4f} %")
    lat = v.latency_ms
    lines.append(f"confirm latency p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms")
    lines.append("throughput (per bucket: t published/confirmed/consumed lost faults):")
    for row in result.buckets:
        faults = ",".join(row.get("faults") or []) or "-"
        lines.append(
            f"  {row['t']:6.0f}s {row['published']:6}/{row['confirmed']:6}/{row['consumed']:6} "
            f"{row.get('lost', 0):6}  {faults}"
        )
    lines.append("nemesis timeline:")
    for e in result.events:
        node = "" if e["node"] is None else f" n{e['node']}"
        lines.append(f"  {e['t']:8.1f}s {e['action']}{node}{'' if e['ok'] else ' FAILED: ' + e['detail']}")
    promise, source = PROMISES[cfg.queue_type]
    if result.aborted is not None:
        lines.append(f"ABORTED: {result.aborted} (no verdict, no records)")
    elif result.failed:
        lines.append(
            f"FAIL: {v.counts['lost']} confirmed message(s) lost; {cfg.queue_type} promises "
            f"{promise} ({source}); first: {', '.join(v.lost_ids[:5])}"
        )
    else:
        lines.append(f"PASS: no confirmed message lost ({cfg.queue_type}: {promise})")
    return "\n".join(lines)


# -- command line ---------------------------------------------------------------------------


def _csv(values: Sequence[str] | None) -> list[str]:
    return [x.strip() for v in values or [] for x in v.split(",") if x.strip()]


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "faults",
        __doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 no confirmed message lost; 1 a queue type whose profile promises no loss "
        "lost one;\n2 bad arguments; 3 internal error; 4 the cluster could not be started, reached or "
        "checked,\nor a node command failed; 130 interrupted (^C). Records go to --results for "
        "`amqp-conformance report`.\n"
        "examples:\n  amqp-conformance faults --duration 120 --queue-type quorum\n"
        "  amqp-conformance faults --cluster-url amqp://u:p@h1/,amqp://u:p@h2/,amqp://u:p@h3/ \\\n"
        "    --node-cmd-kill 'docker kill {node}' --node-cmd-start 'docker start {node}'",
    )
    p.add_argument("--cluster-size", type=int, default=3, help="local cluster nodes (default 3)")
    p.add_argument("--queue-type", choices=QUEUE_TYPES, default="quorum")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of publishing (default 60)")
    p.add_argument(
        "--nemesis", default="kill,pause,partition", help="comma list of kill,pause,partition or none"
    )
    p.add_argument(
        "--interval", type=float, default=4.0, help="seconds between a recovery and the next fault"
    )
    p.add_argument("--hold", type=float, default=6.0, help="seconds a fault lasts")
    p.add_argument("--publishers", type=int, default=2, help="publishing clients (default 2)")
    p.add_argument("--consumers", type=int, default=2, help="consuming clients (default 2)")
    p.add_argument("--rate", type=float, default=100.0, help="messages/s per publisher (0: unpaced)")
    p.add_argument("--seed", type=int, default=1, help="seed of the nemesis' node choice (default 1)")
    p.add_argument(
        "--results",
        type=Path,
        default=Path("reports/results"),
        help="folder of the records (default reports/results, where the report looks)",
    )
    p.add_argument("--cluster-url", action="append", help="one node's amqp:// URL (repeat, or a comma list)")
    p.add_argument("--node-names", help="comma list of the names {node} stands for (default: URL hosts)")
    for action in ("kill", "start", "pause", "resume", "partition", "heal"):
        p.add_argument(
            f"--node-cmd-{action}", help=f"command template to {action} a node ({{node}} names it)"
        )
    p.add_argument(
        "--inject-loss",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="put a proxy in front of node 0 that confirms and discards this share of its publishes",
    )
    p.add_argument(
        "--ha-sync",
        choices=("automatic", "manual"),
        default="automatic",
        help="classic mirrored queues: the policy's ha-sync-mode (default automatic)",
    )
    return p


def _config(ns: argparse.Namespace) -> FaultsConfig:
    nemesis = () if ns.nemesis.strip() in ("", "none") else tuple(_csv([ns.nemesis]))
    bad = [n for n in nemesis if n not in NEMESES]
    if bad:
        raise ValueError(f"--nemesis: unknown {', '.join(bad)} (known: {', '.join(NEMESES)}, none)")
    if ns.duration <= 0 or ns.interval < 0 or ns.hold < 0:
        raise ValueError("--duration must be > 0, --interval and --hold >= 0")
    if ns.publishers < 1 or ns.consumers < 1:
        raise ValueError("--publishers and --consumers must be at least 1")
    if not 0 <= ns.inject_loss < 1:
        raise ValueError("--inject-loss is a share in [0, 1)")
    if ns.rate < 0:
        raise ValueError("--rate must be >= 0")
    _check_cluster_options(ns)
    return FaultsConfig(
        queue_type=ns.queue_type,
        duration=ns.duration,
        nemesis=nemesis,
        interval=ns.interval,
        hold=ns.hold,
        publishers=ns.publishers,
        consumers=ns.consumers,
        rate=ns.rate,
        seed=ns.seed,
        ha_sync=ns.ha_sync,
        target="cluster-url" if ns.cluster_url else "local:rabbitmq-cluster",
    )


def _templates(ns: argparse.Namespace) -> dict[str, str]:
    return {a: t for a in ACTIONS if (t := getattr(ns, f"node_cmd_{a}", None))}


def _check_cluster_options(ns: argparse.Namespace) -> None:
    """The cluster options that can be judged without a node: one line naming the option."""
    from conformance.cluster.user import check_templates

    templates = _templates(ns)
    if not ns.cluster_url:
        if templates:
            raise ValueError(f"--node-cmd-{next(iter(templates))} acts on a --cluster-url node; give "
                             "--cluster-url (a local cluster is controlled by the run itself)")
        if ns.node_names:
            raise ValueError("--node-names names --cluster-url nodes; give --cluster-url")
        if ns.cluster_size < 3:
            raise ValueError(f"--cluster-size {ns.cluster_size}: at least 3 nodes (a majority must survive "
                             "one faulty node)")
        return
    urls = _csv(ns.cluster_url)
    for url in urls:
        if urlsplit(url).scheme not in ("amqp", "amqps"):
            raise ValueError(f"--cluster-url {url!r} is not an amqp:// or amqps:// URL")
    if ns.node_names and len(_csv([ns.node_names])) != len(urls):
        raise ValueError(
            f"--node-names gives {len(_csv([ns.node_names]))} names for {len(urls)} --cluster-url nodes"
        )
    if len(urls) < 3:
        raise ValueError(f"--cluster-url gives {len(urls)} node(s): at least 3 (a majority must survive "
                         "one faulty node)")
    try:
        check_templates(templates)
    except ClusterError as exc:
        raise ValueError(str(exc)) from exc


def _console() -> Any:
    """A rich console on a terminal (a live status line), else None (plain lines)."""
    if not sys.stderr.isatty():
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(stderr=True, highlight=False)


def main(argv: Sequence[str] | None = None) -> int:
    ns = parser().parse_args(argv)
    try:
        config = _config(ns)
    except ValueError as exc:
        print(f"amqp-conformance faults: {exc}", file=sys.stderr)
        return EXIT_USAGE
    console = _console()

    def log(line: str) -> None:
        if console is not None:
            console.print(line, markup=False)
        else:
            print(line, file=sys.stderr, flush=True)

    try:
        with contextlib.ExitStack() as stack:
            status: Callable[[str], None] | None = None
            if console is not None:
                status = stack.enter_context(console.status("starting", spinner="dots")).update

            cluster = _open_cluster(ns, stack, log)
            run_id = getattr(cluster, "run_id", None) or f"{int(time.time()):x}"
            urls, injected = None, None
            if ns.inject_loss:
                from conformance.cluster.injector import loss_proxy

                proxy_url, injected = stack.enter_context(loss_proxy(cluster.nodes[0].url, ns.inject_loss))
                urls = [proxy_url, *[n.url for n in cluster.nodes[1:]]]
            result = run_faults(
                cluster, config, run_id=run_id, urls=urls, log=log, injected=injected, status=status
            )
    except Unsupported as exc:
        print(f"amqp-conformance faults: {exc}", file=sys.stderr)
        return EXIT_CLUSTER
    except ClusterError as exc:
        print(f"amqp-conformance faults: {exc}", file=sys.stderr)
        return EXIT_CLUSTER
    except KeyboardInterrupt:
        print("amqp-conformance faults: interrupted; cluster torn down", file=sys.stderr)
        return 130
    print(render(result))
    if result.aborted is not None:
        # A node left in an unknown state: no records, the counts would mislead.
        print(f"amqp-conformance faults: {result.aborted}", file=sys.stderr)
        return EXIT_CLUSTER
    path = write_records(result, ns.results, len(cluster.nodes))
    print(f"records: {path}")
    return EXIT_LOST if result.failed else EXIT_OK


def _open_cluster(
    ns: argparse.Namespace, stack: contextlib.ExitStack, log: Callable[[str], None]
) -> ClusterController:
    if ns.cluster_url:
        from conformance.cluster.user import UserCluster

        user = UserCluster.from_options(
            _csv(ns.cluster_url), _csv([ns.node_names]) if ns.node_names else None, _templates(ns)
        )
        stack.callback(user.close)
        user.validate()
        return user
    from conformance.cluster.local import LocalCluster

    log(f"starting a local {ns.cluster_size}-node RabbitMQ cluster (about a minute)")
    return stack.enter_context(LocalCluster(ns.cluster_size, on_log=log))


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["FaultsConfig", "FaultsResult", "main", "records", "render", "run_faults"]
