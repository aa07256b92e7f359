"""A local cluster made steady before and between cases: its stream coordinator started and saved
when it forms, a node whose boot failed started again, restarted quorum members caught up.

The stream coordinator.

RabbitMQ starts its stream coordinator (a Raft cluster with a member on every node) on the first
stream declaration, and Ra registers each member's name in a dets table that is written to disk
by its auto-save, up to 500 ms later, not synchronously. A node killed with kill -9 inside that
window restarts without the registration (its names.dets "not properly closed, repairing ...";
``ra:restart_server`` then answers ``name_not_registered``), and
``rabbit_stream_coordinator:recover/0`` takes that for a first boot: the node's member never comes
back. The coordinator is left with two of its three members, and losing the node of its leader
afterwards leaves no majority to elect another: no stream gets a new writer, every publish to a
stream stays unconfirmed until that node returns. Measured on RabbitMQ 4.0.5 (a stream declared,
a node killed 0.3 s later and restarted: its member ``noproc`` for as long as it was watched,
60 s; the same steps with 10 s between the declaration and the kill: the member back, a new
writer 0.4 s after the leader's node was killed) and on 3.10.8 (rabbitmq-cluster.triage.toml).

No cluster case is about that window: each is about a replicated queue on a steady cluster. So
the cluster is made steady first: a stream is declared and deleted through node 0 when the
cluster has formed (which starts the coordinator on every node), and each node's registration
table is synced to disk (``dets:sync``, what the auto-save would do) once its member runs. A
cluster case's kill then finds the coordinator as a long-running cluster has it, whatever case
runs first. docs/versions.md and docs/findings.md keep the finding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from conformance.cluster.base import ClusterError
from conformance.protocol.errors import ProtocolOutcome
from conformance.protocol.raw import RawConnection
from conformance.protocol.wire import URL
from conformance.targets.erleval import EvalError, evaluate

__all__ = ["SAVE_MEMBER", "restart_failed", "settle_stream_coordinator", "wait_caught_up"]

#: how often wait_running starts again a node whose process ended on its own, at most
MAX_RESTARTS = 3

#: on one node: "none" while its coordinator member is not running, "saved" once its name
#: registration is synced to disk, else the error (text)
SAVE_MEMBER = (
    # variable names of its own (erleval refuses one of its WRAPPER_VARS: they bind around it)
    "case erlang:whereis(rabbit_stream_coordinator) of "
    "undefined -> <<\"none\">>; "
    "_ -> case catch ra_system:fetch(coordination) of "
    "#{names := #{directory_rev := SyncTab}} -> case dets:sync(SyncTab) of ok -> <<\"saved\">>; "
    "SyncErr -> iolist_to_binary(io_lib:format(\"~0p\", [SyncErr])) end; "
    "SyncOther -> iolist_to_binary(io_lib:format(\"~0p\", [SyncOther])) end end"
)


class _Node(Protocol):
    name: str
    env: dict[str, str]

    @property
    def url(self) -> URL: ...


def settle_stream_coordinator(nodes: Sequence[_Node], run_id: str, log: Callable[[str], Any],
                              timeout: float = 30.0) -> bool:
    """Start the stream coordinator through the first of ``nodes`` and save each node's member
    registration (through its name and erl_call environment). True when every node's is
    saved; otherwise False, with what was seen logged (a release without streams refuses the
    declaration: nothing to settle). Bounded by ``timeout``."""
    name = f"amqpc-settle-{run_id}"
    try:
        conn = RawConnection.open(nodes[0].url, timeout=min(10.0, timeout))
        try:
            ch = conn.channel()
            ch.declare_queue(name, durable=True, arguments={"x-queue-type": "stream"})
            ch.delete_queue(name)
        finally:
            conn.close(timeout=1.0)
    except (OSError, ProtocolOutcome) as exc:
        log(f"cluster {run_id}: no stream coordinator started ({type(exc).__name__}: {exc})")
        return False
    deadline = time.monotonic() + timeout
    for node in nodes:
        state: object = "none"
        while True:
            try:
                left = max(1.0, deadline - time.monotonic())
                state = evaluate(node.name, node.env, SAVE_MEMBER, timeout=left)
            except EvalError as exc:
                state = str(exc)
            if state == "saved":
                break
            if time.monotonic() > deadline:
                log(f"cluster {run_id}: the stream coordinator member of {node.name} not saved: {state}")
                return False
            time.sleep(0.1)  # the leader starts the members; nothing a controller can wait on
    return True


class _Proc(Protocol):
    index: int
    name: str
    base: Any
    proc: Any  # the node's process; None before it was ever started

    def alive(self) -> bool: ...


def restart_failed(nodes: Sequence[_Proc], restarts: dict[int, int], spawn: Callable[[Any], None],
                   log: Callable[[str], Any]) -> None:
    """Start again each of ``nodes`` whose process has ended though every node should run (what
    ``wait_running`` waits for), at most :data:`MAX_RESTARTS` times each (``restarts`` counts).

    RabbitMQ's Debian package runs a node under systemd with ``Restart=on-failure`` (its
    rabbitmq-server.service, 3.10.8 and 4.0.5 alike), and a node can fail its boot. Seen on 4.0.5: two
    nodes killed with kill -9 and started together beside a paused third, one of them ended with
    "BOOT FAILED" (Mnesia: "FATAL Schema update error"; the kept logs of local runs of
    cluster.majority-down-no-confirm.*). Its cause was the harness's: the node ran in the root's
    unwritable / (chroot's working directory), and Mnesia, briefly without its dir at boot, writes
    there (LocalCluster._spawn, docs/findings.md); nodes now run in their own folder. Without a
    supervisor the suite waited for a node that was no longer there. The unit's RestartSec=10 guards
    against a crash loop; here the count does, so the node starts again at once."""
    for node in nodes:
        if node.alive() or node.proc is None:
            continue
        done = restarts.get(node.index, 0)
        if done >= MAX_RESTARTS:
            raise ClusterError(f"node {node.name} ended on its own {done + 1} times "
                               f"(see {node.base}/stdout.log)")
        restarts[node.index] = done + 1
        log(f"node {node.name} ended on its own (its boot failed?): started again, as systemd's "
            f"Restart=on-failure would ({node.base}/stdout.log)")
        spawn(node)


def wait_caught_up(lagging: Callable[[], list[str]], deadline: float, log: Callable[[str], Any]) -> None:
    """Until no quorum queue has a member its leader has not reached since the member's node
    restarted (``lagging``: :func:`conformance.targets.rabbitnode.lagging_quorum_queues` on one
    node): the leader reaches it on its next tick, up to 5 s later, and a queue.delete waits for
    that. Never an error: a node that cannot say, or a deadline passed, ends the wait (logged)."""
    while True:
        try:
            behind = lagging()
        except ClusterError as exc:
            log(f"cannot tell whether replicas caught up: {exc}")
            return
        if not behind:
            return
        if time.monotonic() > deadline:
            log(f"replicas still catching up: {', '.join(behind[:3])}")
            return
        time.sleep(0.2)  # the leader's tick sends nothing a controller can wait on; a look: one erl_call
