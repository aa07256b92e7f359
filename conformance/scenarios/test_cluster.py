"""Clusters: what a publisher confirm, a replicated queue and a consumer are promised when a node dies.

Documents: RabbitMQ's quorum queues guide (a confirm after a quorum of replicas; a queue without
a majority is unavailable; a new leader is elected), its classic mirroring guide (a confirm after
every mirror; exclusive queues are not mirrored; unacked deliveries are requeued on failover;
``x-cancel-on-ha-failover``) and its clustering guide (clients of a node that goes down are
disconnected). Each case runs once per replicated queue type — ``quorum``, and ``mirrored``: a
classic queue with an ``ha-mode: all`` policy the case sets on exactly its queue and removes — and
kills nodes with ``kill -9`` through the target's controller (``--broker local:rabbitmq-cluster``
or ``--cluster-url`` with ``--cluster-cmd-*``). Every message body is its number, so a confirmed
message never consumed is a set difference; an unconfirmed message is counted, never called lost.
On a single-node target every case is UNSUPPORTED with one reason (the ``cluster`` fixture).

Roles: ``L`` is the node the queue leads on (asked from the cluster, never assumed), ``P`` another
node the client publishes through, ``S`` the third, which survives.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import pytest
from pamqp import commands as spec

from conformance.cases import Case, Level, param
from conformance.protocol.raw import RawConnection
from conformance.verify.cluster import (
    HA_ALL,
    MIRRORED,
    REPLICATED,
    ClusterController,
    Confirms,
    declare_replicated,
    drain_ids,
    in_background,
    index_of,
    publish_numbered,
    require,
    wait_for,
)

QUORUM_DOC = "rabbitmq-quorum-queues"
MIRROR_DOC = "rabbitmq-classic-mirroring"
CLUSTER_DOC = "rabbitmq-clustering"
CONFIRMS_DOC = "000_cd470977c809f5f5.txt#when-will-messages-be-confirmed"
#: per queue type: the documents behind "a confirm means the message is replicated"
CONFIRM_SOURCES = {
    "quorum": (f"{QUORUM_DOC}#data-safety", CONFIRMS_DOC),
    MIRRORED: (f"{MIRROR_DOC}#publisher-confirms", f"{MIRROR_DOC}#ha-policy", CONFIRMS_DOC),
}
FAILOVER_SOURCES = {
    "quorum": (f"{QUORUM_DOC}#leader-election", f"{QUORUM_DOC}#poison-message-handling"),
    MIRRORED: (f"{MIRROR_DOC}#failover", f"{MIRROR_DOC}#ha-policy"),
}
N_MESSAGES = 100


def family(slug: str, types: tuple[str, ...], sources: Mapping[str, tuple[str, ...]],
           **meta: Any) -> list[Any]:
    """One case per replicated queue type, ``cluster.<slug>.<type>`` (explicit ids, from data)."""
    return [param(Case(id=f"cluster.{slug}.{t}", level=Level.EXTENSION,
                       sources=(*sources[t], f"{CLUSTER_DOC}#node-failure"), **meta), t) for t in types]


def _roles(cluster: ClusterController, leader: str) -> tuple[int, int, int]:
    """(L, P, S): the leader's node, a node to publish through, a third that survives."""
    lead = index_of(cluster, leader)
    others = [n.index for n in cluster.nodes if n.index != lead]
    return lead, others[0], others[1]


def _setup(cluster: ClusterController, amqp: Any, ctx: Any, cleanup: Any, request: Any, qtype: str,
           via: int = 0) -> tuple[str, int, int, int]:
    require(cluster, "kill", "start")
    ch = amqp.channel(cluster.nodes[via].url)
    queue = ctx.name("q")
    where = declare_replicated(cluster, ch, queue, qtype, cleanup, 3 * ctx.timeout, request.addfinalizer)
    ctx.observe("leader", f"{where.leader} (members {', '.join(where.members)}; by {where.how})")
    return (queue, *_roles(cluster, where.leader))


def _check_nothing_lost(ctx: Any, confirms: Confirms, consumed: set[int]) -> None:
    ctx.observe("client", confirms.summary())
    ctx.observe("recovered (unconfirmed, consumed)", len(confirms.unconfirmed & consumed))
    ctx.observe("unconfirmed, not consumed (never a loss)", len(confirms.unconfirmed - consumed))
    lost = sorted(confirms.acked - consumed)
    ctx.check(lost[:20], [], "confirmed messages never consumed (lost)")


@pytest.mark.parametrize("qtype", family(
    "confirm-survives-publisher-node", REPLICATED, CONFIRM_SOURCES,
    description=f"{N_MESSAGES} persistent messages published with confirms through P (not the leader's "
                "node); every confirm received; P killed with kill -9; the queue drained through S",
    expectation="every confirmed message is consumed from S: a confirm means the message is replicated, "
                "not held by the node that took the publish",
))
def test_confirm_survives_publisher_node(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    queue, _lead, via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)
    confirms = publish_numbered(cluster.nodes[via].url, queue, range(N_MESSAGES), timeout=2 * ctx.timeout)
    ctx.check(len(confirms.acked), N_MESSAGES, "publishes confirmed before the kill")
    cluster.kill(via)
    drained = drain_ids(cluster.nodes[survivor].url, queue, timeout=3 * ctx.timeout)
    _check_nothing_lost(ctx, confirms, drained.numbers)


@pytest.mark.parametrize("qtype", family(
    "confirm-survives-leader-loss", REPLICATED, CONFIRM_SOURCES,
    description=f"{N_MESSAGES} persistent messages published with confirms through P; every confirm "
                "received; the leader's (master's) node L killed with kill -9; the queue drained through S",
    expectation="every confirmed message is consumed from S after a new leader takes over",
))
def test_confirm_survives_leader_loss(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    queue, lead, via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)
    confirms = publish_numbered(cluster.nodes[via].url, queue, range(N_MESSAGES), timeout=2 * ctx.timeout)
    ctx.check(len(confirms.acked), N_MESSAGES, "publishes confirmed before the kill")
    cluster.kill(lead)
    drained = drain_ids(cluster.nodes[survivor].url, queue, timeout=3 * ctx.timeout)
    _check_nothing_lost(ctx, confirms, drained.numbers)


STREAM = 300
KILL_AT = 100


@pytest.mark.parametrize("qtype", family(
    "confirms-across-leader-kill", REPLICATED, CONFIRM_SOURCES,
    description=f"{STREAM} persistent messages published with confirms through P at a steady pace; after "
                f"the {KILL_AT}th the leader's node L is killed with kill -9 while publishing goes on; then "
                "the queue is drained through S",
    expectation="every message confirmed before, during and after the kill is consumed; unconfirmed ones "
                "(nack or no answer) are counted, never called lost; what the client saw is recorded",
))
def test_confirms_across_leader_kill(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    queue, lead, via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)
    faults = []
    sent_at_kill: list[int] = []

    def kill_mid_stream(i: int) -> None:
        if i == KILL_AT:
            def kill() -> None:
                cluster.kill(lead)
                sent_at_kill.append(len(confirms.published))  # the node is gone: how far the stream was

            faults.append(in_background(kill))

    confirms = Confirms()
    publish_numbered(cluster.nodes[via].url, queue, range(STREAM), timeout=2 * ctx.timeout,
                     between=kill_mid_stream, pace=0.005, got=confirms)
    for t in faults:
        t.join(timeout=30)
    ctx.observe("kill", f"sent after publish {KILL_AT}; the node was gone after publish "
                        f"{sent_at_kill[0] if sent_at_kill else '?'} of {STREAM}")
    drained = drain_ids(cluster.nodes[survivor].url, queue, timeout=3 * ctx.timeout)
    ctx.observe("nacked", len(confirms.nacked))
    ctx.observe("duplicated (consumed more than once)", sum(1 for d in drained.got.values() if len(d) > 1))
    _check_nothing_lost(ctx, confirms, drained.numbers)


MAJORITY_WINDOW = 5.0  # seconds a publisher waits for a confirm a minority must not give


@pytest.mark.parametrize("qtype", family(
    "majority-down-no-confirm", ("quorum",), {"quorum": (f"{QUORUM_DOC}#data-safety",
                                                         f"{QUORUM_DOC}#leader-election")},
    description="a publisher on the leader's node sends message 0; the two other nodes are killed with "
                f"kill -9; messages 1-19 follow on the same channel, confirms awaited "
                f"{MAJORITY_WINDOW:.0f} s; "
                "the two nodes started again; 20 more published; the queue drained",
    expectation="no publish is confirmed while a majority of replicas is down (a missing confirm is not a "
                "loss); once the majority is back, new publishes are confirmed, and every confirmed message "
                "is consumed",
))
def test_majority_down_no_confirm(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    queue, lead, via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)
    down = [via, survivor]

    def kill_majority(i: int) -> None:
        # after message 0, on the open connection: the rest is published with the majority down
        # (a connection opened afterwards may be refused: pause_minority stops the lone node)
        if i == 0:
            for t in [in_background(partial(cluster.kill, n)) for n in down]:
                t.join(timeout=30)

    url = cluster.nodes[lead].url
    early = publish_numbered(url, queue, range(20), timeout=MAJORITY_WINDOW, between=kill_majority)
    ctx.observe("while the majority was down (message 0 was sent before)", early.summary())
    ctx.check(sorted(early.acked - {0})[:10], [], "publishes confirmed while 2 of 3 replicas were down")
    starters = [in_background(partial(cluster.start, i)) for i in down]
    for t in starters:
        t.join(timeout=120)
    wait_running = getattr(cluster, "wait_running", None)
    if wait_running is not None:
        wait_running(timeout=60)
    def publish_again() -> Confirms | None:
        c = publish_numbered(url, queue, range(100, 120), timeout=ctx.timeout)
        return c if c.acked else None

    late = wait_for("a publish confirmed once the majority is back", publish_again, 3 * ctx.timeout,
                    interval=1.0)
    ctx.observe("after the majority came back", late.summary())
    drained = drain_ids(url, queue, timeout=3 * ctx.timeout)
    confirmed = Confirms(published=early.published + late.published, acked=early.acked | late.acked,
                         nacked=early.nacked | late.nacked)
    _check_nothing_lost(ctx, confirmed, drained.numbers)


@pytest.mark.parametrize("qtype", family(
    "unacked-redelivered-after-leader-loss", REPLICATED, FAILOVER_SOURCES,
    description="10 messages published with confirms; a consumer on L's node (manual ack, prefetch 10) "
                "receives all 10 and acks the first 4; L killed with kill -9; the queue drained through S",
    expectation="exactly the 6 unacked messages come back, each with redelivered=true (and x-delivery-count "
                "≥ 1 on quorum queues); none of the 4 acked ones comes back",
))
def test_unacked_redelivered_after_leader_loss(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    queue, lead, via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)
    confirms = publish_numbered(cluster.nodes[via].url, queue, range(10), timeout=2 * ctx.timeout)
    ctx.check(len(confirms.acked), 10, "publishes confirmed")
    conn = RawConnection.open(cluster.nodes[lead].url, timeout=ctx.timeout)
    try:
        ch = conn.channel()
        ch.qos(10)
        ch.consume(queue)
        got = ch.deliveries(10, timeout=2 * ctx.timeout)
        numbers = [int(ev.body or b"-1") for ev in got]
        acked = set(numbers[:4])
        for ev in got[:4]:
            ch.ack(ev.method.delivery_tag)
        ch.barrier(timeout=ctx.timeout)
        cluster.kill(lead)
    finally:
        conn.close(timeout=1.0)
    drained = drain_ids(cluster.nodes[survivor].url, queue, timeout=3 * ctx.timeout)
    ctx.check(sorted(drained.numbers & acked), [], "acked messages delivered again")
    ctx.check(sorted(drained.numbers), sorted(set(numbers) - acked), "messages back after the leader died")
    flags = sorted({redelivered for d in drained.got.values() for redelivered, _ in d})
    ctx.check(flags, [True], "redelivered flag of the returned messages")
    if qtype == "quorum":
        counts = sorted({int(h.get("x-delivery-count", 0)) for d in drained.got.values() for _, h in d})
        ctx.check(bool(counts) and min(counts) >= 1, True, f"x-delivery-count ≥ 1 (seen {counts})")


@pytest.mark.parametrize("qtype", [param(Case(
    id="cluster.cancel-on-ha-failover.mirrored", level=Level.EXTENSION,
    sources=(f"{MIRROR_DOC}#cancellation", f"{MIRROR_DOC}#ha-policy"),
    description="a consumer on S with x-cancel-on-ha-failover=true (the client advertises "
                "consumer_cancel_notify); the master's node L killed with kill -9",
    expectation="the consumer receives basic.cancel for its tag",
), MIRRORED)])
def test_cancel_on_ha_failover(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    queue, lead, _via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)
    ch = amqp.channel(cluster.nodes[survivor].url)
    tag = ch.consume(queue, arguments={"x-cancel-on-ha-failover": True})
    cluster.kill(lead)
    ev = ch.conn.wait_event(ch.id, lambda e: isinstance(e.method, spec.Basic.Cancel),
                            "basic.cancel after the master's node died", timeout=3 * ctx.timeout)
    ctx.check(ev.method.consumer_tag, tag, "basic.cancel consumer-tag")


@pytest.mark.parametrize("qtype", [param(Case(
    id="cluster.consumer-survives-leader-change.quorum", level=Level.EXTENSION,
    sources=(f"{QUORUM_DOC}#leader-election",),
    description="a consumer on S; the leader's node L killed with kill -9; 5 messages published with "
                "confirms through P once a new leader confirms them",
    expectation="the consumer is not cancelled and receives the 5 messages",
), "quorum")])
def test_consumer_survives_leader_change(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    queue, lead, via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)
    ch = amqp.channel(cluster.nodes[survivor].url)
    ch.consume(queue, no_ack=True)
    cluster.kill(lead)
    sent = wait_for("publishes confirmed by a new leader",
                    lambda: (c := publish_numbered(cluster.nodes[via].url, queue, range(5),
                                                   timeout=ctx.timeout)).acked == set(range(5)) and c,
                    3 * ctx.timeout, interval=1.0)
    ctx.observe("publisher", sent.summary())
    got = ch.deliveries(5, timeout=2 * ctx.timeout)
    cancels = [e for e in ch.history() if isinstance(e.method, spec.Basic.Cancel)]
    ctx.check(len(cancels), 0, "basic.cancel received by the consumer")
    ctx.check(sorted({int(e.body or b"-1") for e in got}), list(range(5)), "messages the consumer received")


@pytest.mark.parametrize("qtype", [param(Case(
    id="cluster.exclusive-not-mirrored", level=Level.EXTENSION,
    sources=(f"{MIRROR_DOC}#exclusive-queues", f"{CLUSTER_DOC}#node-failure"),
    description="an ha-mode: all policy matching the queue's name; an exclusive queue declared through "
                "node 2; where its replicas are asked from the cluster; node 2 killed with kill -9; the "
                "queue looked up (passive declare) through node 1",
    expectation="the exclusive queue has no mirror (its only member is node 2) and is gone (404 NOT_FOUND) "
                "once its node is down",
), "classic")])
def test_exclusive_not_mirrored(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    import json

    require(cluster, "kill", "start")
    home = cluster.nodes[1]
    queue = ctx.name("q")
    policy = f"{queue}-ha"
    cluster.set_policy(policy, f"^{queue}$", json.dumps(HA_ALL))
    request.addfinalizer(lambda: cluster.clear_policy(policy))
    ch = amqp.channel(home.url)
    ch.declare_queue(cleanup.queue(queue), exclusive=True)
    where = cluster.leader(queue)
    ctx.observe("replicas", f"{where.members} (by {where.how})")
    ctx.check(list(where.members), [home.name], "nodes holding the exclusive queue")
    cluster.kill(home.index)

    def gone() -> str | None:
        c = RawConnection.open(cluster.nodes[0].url, timeout=ctx.timeout)
        try:
            c.channel().declare_queue(queue, passive=True)
            return None
        except Exception as exc:  # noqa: BLE001 - the close is the answer looked for
            code = getattr(exc, "reply_code", None)
            return f"{code}" if code else None
        finally:
            c.close(timeout=1.0)

    ctx.check(wait_for("the exclusive queue gone once its node is down", gone, 3 * ctx.timeout), "404",
              "passive declare through node 1 after node 2 died (reply code)")
