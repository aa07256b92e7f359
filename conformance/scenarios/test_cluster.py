"""Clusters: what a publisher confirm, a replicated queue and a consumer are promised when a node dies.

Documents: RabbitMQ's quorum queues guide (a confirm after a quorum of replicas; a queue without
a majority is unavailable; a new leader is elected), its classic mirroring guide (a confirm after
every mirror; exclusive queues are not mirrored; unacked deliveries are requeued on failover;
``x-cancel-on-ha-failover``) and its clustering guide (clients of a node that goes down are
disconnected). Each case runs once per replicated queue type its promise applies to — ``quorum``;
``mirrored``: a classic queue with an ``ha-mode: all`` policy the case sets on exactly its queue and
removes; ``stream`` (RabbitMQ's streams guide: confirms after a quorum of replicas, a new leader
elected among them) — and kills nodes with ``kill -9`` through the target's controller
(``--broker local:rabbitmq-cluster`` or ``--cluster-url`` with ``--cluster-cmd-*``). Every message
body is its number, so a confirmed message never consumed is a set difference; an unconfirmed
message is counted, never called lost.
On a single-node target every case is UNSUPPORTED with one reason (the ``cluster`` fixture); on a
cluster that refuses ``x-queue-type: stream`` the stream cases are UNSUPPORTED with its answer.

Streams are logs, not queues: a consumer reads from an offset (``x-stream-offset: first``, a
prefetch and manual acks, which only move its offset), basic.get and reject/nack do not exist for
them (540 NOT_IMPLEMENTED), and nothing is ever requeued or redelivered. So "drained" means read
from the first offset up to an end marker published last, and the cases about requeues,
redeliveries and repeated deliveries (``unacked-redelivered-after-leader-loss``,
``requeue-redelivered``, ``duplicates-flagged-redelivered``) have no stream record: their promise
does not exist for a stream, where every consumer reads every message by design.

Roles: ``L`` is the node the queue leads on (asked from the cluster, never assumed), ``P`` another
node the client publishes through, ``S`` the third, which survives.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, param
from conformance.protocol import RawConnection
from conformance.verify import load_table
from conformance.verify.cluster import (
    DESTRUCTIVE,
    HA_ALL,
    MIRRORED,
    REPLICATED,
    STREAM,
    ClusterController,
    Confirms,
    Drained,
    all_running,
    answer,
    declare_replicated,
    drain,
    drain_ids,
    drain_until,
    in_background,
    index_of,
    mandatory_publish,
    out_of_order,
    publish_numbered,
    require,
    start_again,
    unflagged_repeats,
    wait_for,
)
from conformance.verify.cluster_runs import FailoverRun, two_consumer_run

QUORUM_DOC = "rabbitmq-quorum-queues"
MIRROR_DOC = "rabbitmq-classic-mirroring"
CLUSTER_DOC = "rabbitmq-clustering"
STREAM_DOC = "rabbitmq-streams"
CONFIRMS_DOC = "000_cd470977c809f5f5.txt#when-will-messages-be-confirmed"
#: per queue type: the documents behind "a confirm means the message is replicated"
CONFIRM_SOURCES = {
    "quorum": (f"{QUORUM_DOC}#data-safety", CONFIRMS_DOC),
    MIRRORED: (f"{MIRROR_DOC}#publisher-confirms", f"{MIRROR_DOC}#ha-policy", CONFIRMS_DOC),
    STREAM: (f"{STREAM_DOC}#data-safety", f"{STREAM_DOC}#leader-election", CONFIRMS_DOC),
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
    drained = drain(cluster.nodes[survivor].url, queue, qtype, timeout=3 * ctx.timeout)
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
    drained = drain(cluster.nodes[survivor].url, queue, qtype, timeout=3 * ctx.timeout)
    _check_nothing_lost(ctx, confirms, drained.numbers)


STREAM_N = 300  # messages in the steady publish stream a kill lands in
KILL_AT = 100


@pytest.mark.parametrize("qtype", family(
    "confirms-across-leader-kill", REPLICATED, CONFIRM_SOURCES,
    description=f"{STREAM_N} persistent messages published with confirms through P at a steady pace; after "
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
    publish_numbered(cluster.nodes[via].url, queue, range(STREAM_N), timeout=2 * ctx.timeout,
                     between=kill_mid_stream, pace=0.005, got=confirms)
    for t in faults:
        t.join(timeout=30)
    ctx.observe("kill", f"sent after publish {KILL_AT}; the node was gone after publish "
                        f"{sent_at_kill[0] if sent_at_kill else '?'} of {STREAM_N}")
    drained = drain(cluster.nodes[survivor].url, queue, qtype, timeout=3 * ctx.timeout)
    ctx.observe("nacked", len(confirms.nacked))
    ctx.observe("duplicated (consumed more than once)", sum(1 for d in drained.got.values() if len(d) > 1))
    _check_nothing_lost(ctx, confirms, drained.numbers)


MAJORITY_WINDOW = 5.0  # seconds a publisher waits for a confirm a minority must not give


@pytest.mark.parametrize("qtype", family(
    "majority-down-no-confirm", ("quorum", STREAM),
    {"quorum": (f"{QUORUM_DOC}#data-safety", f"{QUORUM_DOC}#leader-election"),
     STREAM: (f"{STREAM_DOC}#data-safety", f"{STREAM_DOC}#leader-election")},
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
    all_running(cluster)
    def publish_again() -> Confirms | None:
        # routable again too: a stream whose every node stopped is unroutable for a moment after the
        # nodes are back (its queue record not yet restored); its publishes come back 312 NO_ROUTE
        c = publish_numbered(url, queue, range(100, 120), timeout=ctx.timeout)
        return c if c.acked and not c.returned else None

    late = wait_for("a publish confirmed once the majority is back", publish_again, 3 * ctx.timeout,
                    interval=1.0)
    ctx.observe("after the majority came back", late.summary())
    drained = drain(url, queue, qtype, timeout=3 * ctx.timeout)
    confirmed = Confirms(published=early.published + late.published, acked=early.acked | late.acked,
                         nacked=early.nacked | late.nacked)
    _check_nothing_lost(ctx, confirmed, drained.numbers)


#: after the kill: what comes back while L is down, then once L runs again (RabbitMQ 4.3 holds a lost
#: node's consumer's deliveries until then, or consumer_disconnected_timeout: rabbitmq_releases.toml)
UNACKED_AFTER = ("L killed with kill -9; the queue drained through S; L started again; drained through S "
                 "until the unacked came (bounded)")
UNACKED_DESCRIPTION = ("10 messages published with confirms; a consumer on L's node (manual ack, "
                       f"prefetch 10) receives all 10 and acks the first 4; {UNACKED_AFTER}")
#: the profile's value: RabbitMQ <= 4.2 returns them at once (3.10.8, 4.0.5 measured)
UNACKED_BACK = {"while L was down": "the 6 unacked", "once L was started again": "none"}
#: An ack has no reply in AMQP 0-9-1: a quorum queue's channel pipelines each settle to the leader's
#: log and goes on, so an ack still on its way when the leader dies is lost and its message comes
#: back (at-least-once). Before the kill the case makes the settles reach a majority: a basic.get on
#: the same channel is one synchronous command to the same leader (rabbit_fifo_client:dequeue,
#: ra:process_command, answered once applied), ordered after the settles the channel sent before it,
#: so its get-empty comes after the 4 settles were committed. Without it the case failed once in
#: three area runs at load 12-18 ("acked messages delivered again"): it measured the load.
UNACKED_QUORUM_DESCRIPTION = (
    "10 messages published with confirms; a consumer on L's node (manual ack, prefetch 10) receives all "
    "10 and acks the first 4; a basic.get on the same channel (get-empty: all 10 are delivered), whose "
    f"answer comes after the leader applied the settles sent before it; {UNACKED_AFTER}")


@pytest.mark.parametrize("qtype", [
    *family("unacked-redelivered-after-leader-loss", ("quorum",), FAILOVER_SOURCES,
            description=UNACKED_QUORUM_DESCRIPTION,
            expectation="basic.get-empty before the kill; exactly the 6 unacked messages come back (while L "
                        "is down; from RabbitMQ 4.3 once L is back), each with redelivered=true and "
                        "x-delivery-count ≥ 1; none of the 4 acked ones comes back",
            expected={"rabbitmq": UNACKED_BACK}, default=UNACKED_BACK,
            expected_sources={"rabbitmq": f"{QUORUM_DOC}#leader-election"}),
    # The mirroring guide says a promoted mirror requeues what it saw no ack for, acked or not (an ack
    # still on its way from the master to the mirrors when the master died): an acked message may come
    # back. RabbitMQ 3.10.8 did so (acked [2, 3] back, flagged redelivered) in one run in three under
    # load; expecting none of them was more than the guide promises.
    *family("unacked-redelivered-after-leader-loss", (MIRRORED,),
            {MIRRORED: (*FAILOVER_SOURCES[MIRRORED], f"{MIRROR_DOC}#failover-acks")},
            description=UNACKED_DESCRIPTION,
            expectation="all 6 unacked messages come back while L is down, each with redelivered=true; an "
                        "acked one may come back too (an ack the mirrors had not seen when the master died), "
                        "and then also with redelivered=true",
            expected={"rabbitmq": UNACKED_BACK}, default=UNACKED_BACK,
            expected_sources={"rabbitmq": f"{MIRROR_DOC}#failover-acks"}),
])
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
        if qtype == "quorum":
            extra = ch.get(queue, timeout=2 * ctx.timeout)
            ctx.check(None if extra is None else int(extra.body or b"-1"), None,
                      "basic.get after the acks (None = get-empty: all 10 are with the consumer)")
        ch.barrier(timeout=ctx.timeout)
        cluster.kill(lead)
    finally:
        conn.close(timeout=1.0)
    unacked = set(numbers) - acked
    down = drain_ids(cluster.nodes[survivor].url, queue, timeout=3 * ctx.timeout)
    start_again(cluster, lead)
    back = drain_until(cluster.nodes[survivor].url, queue, unacked - down.numbers, timeout=3 * ctx.timeout)
    drained = Drained({n: [*down.got.get(n, []), *back.got.get(n, [])] for n in down.numbers | back.numbers})
    acked_back = sorted(drained.numbers & acked)
    if qtype == MIRRORED:
        ctx.observe("acked messages requeued by the promoted mirror (the guide allows it)", acked_back)
    else:
        ctx.check(acked_back, [], "acked messages delivered again")

    def which(got: set[int]) -> object:
        return "none" if not got else f"the {len(got)} unacked" if got == unacked else sorted(got)
    ctx.check_profile({"while L was down": which(down.numbers & unacked),
                       "once L was started again": which((back.numbers - down.numbers) & unacked)},
                      "unacked messages back after the leader's node was killed")
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


# -- a classic queue whose home node is down ---------------------------------------------------

#: RabbitMQ's reply when a durable classic queue's node is down (the mirroring guide's
#: "Non-mirrored Queue Behavior in a Cluster" quotes it from the server log; on the wire it is the
#: channel.close reply-text), with the node and queue names in place of <node> and <queue>.
HOME_DOWN = ("404 NOT_FOUND - home node '<node>' of durable queue '<queue>' in vhost '/' "
             "is down or inaccessible")
HOME_MESSAGES = 10
FACTS: dict[str, Any] = load_table("cluster")
HOME = FACTS["home_node_down"]
REQUEUE = FACTS["requeue"]


def _home_down_text(node: str, queue: str) -> str:
    return HOME_DOWN.replace("<node>", node).replace("<queue>", queue)


@pytest.mark.parametrize("qtype", [param(Case(
    id="cluster.classic-home-node-down", level=Level.EXTENSION,
    sources=(f"{MIRROR_DOC}#non-mirrored", f"{CLUSTER_DOC}#node-failure"),
    description=f"a durable classic queue (no mirroring policy) declared through node 2, its home; "
                f"{HOME_MESSAGES} persistent messages published with confirms through node 1; node 2 "
                "killed with kill -9; through node 1: queue.declare (passive, then active), basic.consume, "
                "basic.get and a mandatory publish with confirms; node 2 started again; the queue drained "
                "through node 1",
    expectation="while its home node is down every operation on the queue is refused with channel.close "
                "404 NOT_FOUND \"home node ... of durable queue ... is down or inaccessible\" and a publish "
                "routed to it is not enqueued (returned 312 NO_ROUTE when mandatory); once the node is back "
                f"the queue answers again with its {HOME_MESSAGES} persistent messages and nothing else",
    expected={"rabbitmq": HOME["publish"]}, default=HOME["publish"],
    expected_sources={"rabbitmq": HOME["publish_measured"]},
), "classic")])
def test_classic_home_node_down(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    require(cluster, "kill", "start")
    home, client = cluster.nodes[1], cluster.nodes[0]
    queue = ctx.name("q")
    amqp.channel(home.url).declare_queue(cleanup.queue(queue), durable=True)
    where = cluster.leader(queue)
    ctx.observe("home", f"{where.leader} (members {', '.join(where.members)}; by {where.how})")
    ctx.check((where.leader, list(where.members)), (home.name, [home.name]), "the queue's node and replicas")
    confirms = publish_numbered(client.url, queue, range(HOME_MESSAGES), timeout=2 * ctx.timeout)
    ctx.check(len(confirms.acked), HOME_MESSAGES, "publishes confirmed before the kill")
    cluster.kill(home.index)

    refused = _home_down_text(home.name, queue)
    # the survivor learns of the node's death from the closed distribution connection: poll
    # (bounded) until it answers the passive declare as documented, then ask the rest once
    first = wait_for("the queue reported unavailable through node 1",
                     lambda: (a := answer(client.url, lambda ch: ch.declare_queue(queue, passive=True),
                                          ctx.timeout)) != "ok" and a, 3 * ctx.timeout)
    answers = {
        "queue.declare passive": first,
        "queue.declare": answer(client.url, lambda ch: ch.declare_queue(queue, durable=True), ctx.timeout),
        "basic.consume": answer(client.url, lambda ch: ch.consume(queue), ctx.timeout),
        "basic.get": answer(client.url, lambda ch: ch.get(queue, timeout=ctx.timeout), ctx.timeout),
    }
    ctx.observe("answers while the home node is down", answers)
    publish = mandatory_publish(client.url, queue, HOME_MESSAGES, ctx.timeout)
    ctx.observe("mandatory publish with confirms while the home node is down", publish)

    start_again(cluster, home.index)
    back = wait_for("the queue answering again through node 1",
                    lambda: answer(client.url, lambda ch: ch.declare_queue(queue, passive=True),
                                   ctx.timeout) == "ok", 3 * ctx.timeout, interval=1.0)
    ctx.observe("after node 2 came back", "passive declare ok" if back else "?")
    drained = drain_ids(client.url, queue, timeout=3 * ctx.timeout)
    ctx.check(answers, dict.fromkeys(answers, refused), "operations on the queue while its home node is down")
    ctx.check_profile(publish, "a mandatory publish routed to the queue while its home node is down")
    ctx.check(sorted(drained.numbers), list(range(HOME_MESSAGES)),
              "messages in the queue once its node is back")


# -- requeue on a replicated queue ------------------------------------------------------------

REQUEUE_SOURCES = {
    "quorum": (f"{QUORUM_DOC}#poison-message-handling", "002_4ef6b84472723893.txt#requeue-true",
               "004_ba6059c7056f3c65.txt#resurfacing-messages-in-limbo"),
    MIRRORED: (f"{MIRROR_DOC}#ha-policy", "002_4ef6b84472723893.txt#requeue-true",
               "004_ba6059c7056f3c65.txt#resurfacing-messages-in-limbo"),
}


@pytest.mark.parametrize("qtype", [param(Case(
    id=f"cluster.requeue-redelivered.{t}", level=Level.EXTENSION,
    sources=(*REQUEUE_SOURCES[t], f"{CLUSTER_DOC}#node-failure"),
    expected={"rabbitmq": REQUEUE[t]}, default=REQUEUE[t], expected_sources={"rabbitmq": REQUEUE["measured"]},
    description="one persistent message published with confirms through P; a consumer on S (not the "
                "leader's node; manual ack) receives it, basic.reject(requeue=true), receives it again, "
                "basic.nack(requeue=true), receives it again, basic.recover(requeue=true), receives it again "
                "and acks it",
    expectation="as on a single node: the first delivery has redelivered=false, each later one "
                "redelivered=true; on a quorum queue x-delivery-count is absent at first and 1, 2, 3 after "
                "each requeue; after the ack the queue is empty",
), t) for t in DESTRUCTIVE])
def test_requeue_redelivered(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    queue, _lead, via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)
    confirms = publish_numbered(cluster.nodes[via].url, queue, [7], timeout=2 * ctx.timeout)
    ctx.check(confirms.acked, {7}, "publish confirmed")
    ch = amqp.channel(cluster.nodes[survivor].url)
    ch.qos(1)
    ch.consume(queue)
    seen: list[str] = []
    for settle in ("reject", "nack", "recover", "ack"):
        ev = ch.next_delivery(timeout=2 * ctx.timeout, what=f"the delivery before basic.{settle}")
        headers = dict(ev.properties.headers or {}) if ev.properties is not None else {}
        count = headers.get("x-delivery-count")
        seen.append(f"redelivered={str(bool(ev.method.redelivered)).lower()}, x-delivery-count"
                    + (" absent" if count is None else f"={int(count)}"))
        tag = ev.method.delivery_tag
        if settle == "reject":
            ch.reject(tag, requeue=True)
        elif settle == "nack":
            ch.nack(tag, requeue=True)
        elif settle == "recover":
            ch.recover(requeue=True)
        else:
            ch.ack(tag)
    ch.barrier(timeout=ctx.timeout)
    left = amqp.channel(cluster.nodes[via].url).message_count(queue)
    ctx.check_profile(seen, "the 4 deliveries (before reject, nack, recover, ack)")
    ctx.check(left, 0, "messages ready after the ack")


# -- tx on a replicated queue ------------------------------------------------------------------

TX_SOURCES = {
    "quorum": ("001_27f7ea2622bbc99f.txt#tx", f"{QUORUM_DOC}#data-safety"),
    MIRRORED: ("001_27f7ea2622bbc99f.txt#tx", f"{MIRROR_DOC}#publisher-confirms"),
    STREAM: ("001_27f7ea2622bbc99f.txt#tx", f"{STREAM_DOC}#data-safety"),
}
TX_COMMITTED = 20


@pytest.mark.parametrize("qtype", family(
    "tx-commit-survives-leader-loss", REPLICATED, TX_SOURCES,
    description=f"a transactional channel through P publishes {TX_COMMITTED} persistent messages and "
                "commits (tx.commit-ok awaited), then publishes 5 more and rolls them back; the leader's "
                "node L killed with kill -9; the queue drained through S",
    expectation=f"the {TX_COMMITTED} committed messages are all consumed (tx.commit-ok means the broker took "
                "responsibility; on a replicated queue, the replicas did) and none of the rolled-back ones",
))
def test_tx_commit_survives_leader_loss(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    queue, lead, via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)
    ch = amqp.channel(cluster.nodes[via].url)
    ch.tx_select()
    for n in range(TX_COMMITTED):
        ch.publish("", queue, str(n).encode(), persistent=True)
    ch.tx_commit()
    for n in range(100, 105):
        ch.publish("", queue, str(n).encode(), persistent=True)
    ch.tx_rollback()
    cluster.kill(lead)
    drained = drain(cluster.nodes[survivor].url, queue, qtype, timeout=3 * ctx.timeout)
    ctx.check(sorted(drained.numbers), list(range(TX_COMMITTED)),
              "messages consumed after the leader's node died (committed: 0-19; rolled back: 100-104)")


# -- one publisher and two consumers across a leader kill: order and the redelivered flag -------

ORDER_SOURCES = {
    "quorum": (f"{QUORUM_DOC}#leader-placement", f"{QUORUM_DOC}#leader-election",
               "001_27f7ea2622bbc99f.txt#ordering"),
    MIRRORED: (f"{MIRROR_DOC}#failover", "001_27f7ea2622bbc99f.txt#ordering"),
    STREAM: (f"{STREAM_DOC}#overview", f"{STREAM_DOC}#leader-election", "001_27f7ea2622bbc99f.txt#ordering"),
}
DUPLICATE_SOURCES = {
    "quorum": (f"{QUORUM_DOC}#leader-election", f"{QUORUM_DOC}#poison-message-handling",
               "003_50388870ec53b6aa.txt#acknowledgements"),
    MIRRORED: (f"{MIRROR_DOC}#failover", f"{MIRROR_DOC}#cancellation",
               "003_50388870ec53b6aa.txt#acknowledgements"),
}
RUN_MESSAGES = 300
RUN_KILL_AT = 100
RUN_HOLD = 5  # C2 never acks its first 5 deliveries: they are unacked when its node dies
#: first deliveries (any consumer or the drain) that must come after the kill, of the ~200 published
#: after it: the order check is not allowed to pass on a run that delivered nothing after the fault
RUN_MIN_AFTER = 100
RUN_STEPS = (f"one publisher with confirms through P ({RUN_MESSAGES} persistent messages at a steady "
             "pace); consumer C1 on S and C2 on the leader's node L, manual ack, prefetch 10 (C1 acks each "
             f"delivery, C2 each but its first {RUN_HOLD}); after the {RUN_KILL_AT}th publish L is killed "
             "with kill -9; once the last is confirmed L is started again; C1 consumes on until every "
             "confirmed message came, then the rest is drained through S. One run serves both the order and "
             "the duplicates case of a queue type (one kill)")
_RUNS: dict[tuple[int, str], FailoverRun] = {}


def _shared_run(cluster: ClusterController, amqp: Any, ctx: Any, cleanup: Any, request: Any,
                qtype: str) -> FailoverRun:
    """Run (or reuse, for the other case of the pair) the two-consumer run with L killed mid-stream."""
    key = (id(cluster), qtype)
    if key not in _RUNS:
        queue, lead, via, survivor = _setup(cluster, amqp, ctx, cleanup, request, qtype)

        def kill() -> str:
            cluster.kill(lead)
            return "L killed with kill -9"

        run = two_consumer_run(
            cluster, queue, qtype, (lead, via, survivor), timeout=ctx.timeout, messages=RUN_MESSAGES,
            fault_at=RUN_KILL_AT, hold=RUN_HOLD, by=ctx.case.id if ctx.case else "?", fault=kill,
            heal=partial(start_again, cluster, lead))
        run.notes["leader"] = ctx.observed.get("leader", "?")
        _RUNS[key] = run
    run = _RUNS[key]
    if ctx.case is not None and run.by != ctx.case.id:
        ctx.observe("run", f"the run of {run.by} (one fault serves both cases)")
    for k, v in run.notes.items():
        ctx.observed.setdefault(k, v)
    return run


@pytest.mark.parametrize("qtype", family(
    "publisher-order-across-failover", REPLICATED, ORDER_SOURCES,
    description=RUN_STEPS,
    expectation="each consumer's first deliveries (redelivered=false) come in publish order: one "
                "publisher's messages keep their order across the leader's loss (only redeliveries may come "
                "out of order)",
))
def test_publisher_order_across_failover(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    run = _shared_run(cluster, amqp, ctx, cleanup, request, qtype)
    ctx.check(len(run.after_fault) >= RUN_MIN_AFTER, True,
              f"at least {RUN_MIN_AFTER} first deliveries after the kill (got {len(run.after_fault)})")
    ctx.check(out_of_order(run.seen), [], "first deliveries out of publish order (per consumer)")


@pytest.mark.parametrize("qtype", family(
    "duplicates-flagged-redelivered", DESTRUCTIVE, DUPLICATE_SOURCES,
    description=RUN_STEPS,
    expectation="a message delivered again (to any consumer or the drain) carries redelivered=true on every "
                "later delivery: AMQP's flag is the only way a consumer can tell a repeat",
))
def test_duplicates_flagged_redelivered(cluster, amqp, ctx, cleanup, request, qtype: str) -> None:
    run = _shared_run(cluster, amqp, ctx, cleanup, request, qtype)
    # the repeats this case judges are forced: C2's unacked deliveries must come back when its node
    # dies (quorum: its channel is gone; mirroring guide: pending acks are requeued on failover)
    ctx.check(len(run.held) == RUN_HOLD and set(run.held) <= run.repeated, True,
              f"C2's {RUN_HOLD} unacked deliveries {list(run.held)} delivered again")
    bad = unflagged_repeats(run.seen)
    ctx.check([f"{s.number} to {s.who}" for s in bad][:20], [],
              "repeated deliveries without redelivered=true (message, to whom)")
