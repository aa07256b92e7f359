"""``faults``: a Jepsen-style workload against a cluster — publishers with confirms and consumers
with manual acks on one replicated queue while a nemesis kills, pauses and partitions nodes.

Entry points: :func:`main` (argv -> exit code) here, and :func:`conformance.faults.run.run_faults`
(a started controller and a :class:`FaultsConfig` -> :class:`FaultsResult`), for a benchmark.
The target is named as ``run`` names one: ``--broker local:rabbitmq-cluster`` (the default,
``--cluster-size`` nodes of the installed rabbitmq-server) or ``--cluster-url`` nodes with
``--cluster-cmd-kill|start|pause|resume|partition|heal`` and ``--cluster-node-names``, the
options of the one option table (:mod:`conformance.plugin.options`).

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
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conformance.argparsing import command_parser
from conformance.cluster.base import ClusterController, ClusterError, Unsupported
from conformance.faults.records import records, render, write_records
from conformance.faults.run import (
    NEMESES,
    QUEUE_TYPES,
    FaultsConfig,
    FaultsResult,
    run_faults,
)
from conformance.plugin.commandline import add_command_options, target_of
from conformance.targets.spec import TargetSpec

EXIT_OK, EXIT_LOST, EXIT_USAGE, EXIT_INTERNAL, EXIT_CLUSTER = 0, 1, 2, 3, 4
#: the option table's target options faults takes (the same names as ``run``'s)
CLUSTER_OPTIONS = ("broker", "cluster-size", "cluster-url", "cluster-node-names", "cluster-inject-loss",
                   *(f"cluster-cmd-{a}" for a in ("kill", "start", "pause", "resume", "partition", "heal")))
DEFAULT_KIND = "local:rabbitmq-cluster"


def _csv(values: Sequence[str] | None) -> list[str]:
    return [x.strip() for v in values or [] for x in v.split(",") if x.strip()]


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "faults",
        (__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 no confirmed message lost; 1 a queue type whose profile promises no loss "
        "lost one;\n2 bad arguments; 3 internal error; 4 the cluster could not be started, reached or "
        "checked,\nor a node command failed; 130 interrupted (^C). Records go to --results for "
        "`amqp-conformance report`.\n"
        "examples:\n  amqp-conformance faults --duration 120 --queue-type quorum\n"
        "  amqp-conformance faults --cluster-url amqp://u:p@h1/,amqp://u:p@h2/,amqp://u:p@h3/ \\\n"
        "    --cluster-cmd-kill 'docker kill {node}' --cluster-cmd-start 'docker start {node}'",
    )
    add_command_options(p, CLUSTER_OPTIONS)
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
    p.add_argument(
        "--ha-sync",
        choices=("automatic", "manual"),
        default="automatic",
        help="classic mirrored queues: the policy's ha-sync-mode (default automatic)",
    )
    return p


def _target(ns: argparse.Namespace) -> TargetSpec:
    """The cluster the options name, by the rules every command shares, plus faults' own: a
    cluster target of at least 3 nodes (a majority must survive one faulty node)."""
    spec = target_of(ns, default=DEFAULT_KIND)
    if not spec.is_cluster:
        raise ValueError(f"--broker {spec.kind}: faults needs a cluster (--broker {DEFAULT_KIND} or "
                         "--cluster-url)")
    c = spec.cluster
    nodes = len(c.urls) if c.urls else c.size
    if nodes < 3:
        what = "--cluster-url gives" if c.urls else "--cluster-size"
        raise ValueError(f"{what} {nodes} node(s): at least 3 (a majority must survive one faulty node)")
    if c.inject_loss is not None and not 0 <= c.inject_loss < 1:
        raise ValueError("--cluster-inject-loss is a share in [0, 1)")
    return spec


def _config(ns: argparse.Namespace, spec: TargetSpec) -> FaultsConfig:
    nemesis = () if ns.nemesis.strip() in ("", "none") else tuple(_csv([ns.nemesis]))
    bad = [n for n in nemesis if n not in NEMESES]
    if bad:
        raise ValueError(f"--nemesis: unknown {', '.join(bad)} (known: {', '.join(NEMESES)}, none)")
    if ns.duration <= 0 or ns.interval < 0 or ns.hold < 0:
        raise ValueError("--duration must be > 0, --interval and --hold >= 0")
    if ns.publishers < 1 or ns.consumers < 1:
        raise ValueError("--publishers and --consumers must be at least 1")
    if ns.rate < 0:
        raise ValueError("--rate must be >= 0")
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
        target="cluster-url" if spec.cluster.urls else DEFAULT_KIND,
    )


def _console() -> Any:
    """A rich console on a terminal (live status line), else None (plain lines on stderr)."""
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
        spec = _target(ns)
        config = _config(ns, spec)
    except ValueError as exc:
        print(f"amqp-conformance faults: {str(exc).splitlines()[0]}", file=sys.stderr)
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

            cluster = _open_cluster(spec, stack, log)
            run_id = getattr(cluster, "run_id", None) or f"{int(time.time()):x}"
            urls, injected = None, None
            if spec.cluster.inject_loss:
                from conformance.cluster.injector import loss_proxy

                proxy_url, injected = stack.enter_context(loss_proxy(cluster.nodes[0].url,
                                                                     spec.cluster.inject_loss))
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


def _open_cluster(spec: TargetSpec, stack: contextlib.ExitStack,
                  log: Callable[[str], None]) -> ClusterController:
    c = spec.cluster
    if c.urls:
        from conformance.cluster.user import UserCluster

        user = UserCluster.from_options(c.urls, c.node_names or None, dict(c.templates))
        stack.callback(user.close)
        user.validate()
        return user
    from conformance.cluster.local import LocalCluster
    from conformance.targets.kinds import lookup

    root = lookup(spec.kind)[1] if spec.kind.startswith("local:rabbitmq-cluster@") else ""
    where = f" of the {root} root" if root else ""
    log(f"starting a local {c.size}-node RabbitMQ cluster{where} (about a minute)")
    return stack.enter_context(LocalCluster(c.size, on_log=log, root=root))


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["FaultsConfig", "FaultsResult", "main", "records", "render", "run_faults"]
