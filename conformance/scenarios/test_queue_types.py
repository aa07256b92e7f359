"""Queue types: what a quorum queue refuses and what it adds to deliveries.

Documents: RabbitMQ's quorum queue guide (Declaring, Feature Matrix, Global QoS, Poison Message
Handling) and RabbitMQ 3.10.8 as measured here; the facts and their sources are data in
``conformance/profiles/queue_types.toml``. These cases are quorum-only (``queue_types=("quorum",)``):
they run when ``--amqp-queue-type`` selects quorum, as ``queue_types.<slug>[quorum]``. The
delivery order after a requeue on a quorum queue is checked by the reject / nack / recover /
ordering cases themselves (their ``rabbitmq@quorum`` values come from the same table).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, case, param
from conformance.verify import (
    QUORUM,
    check_outcome,
    dead_letter_target,
    get_one,
    load_table,
    outcome,
    publish_confirmed,
    x_death_reason,
)

F = TypeVar("F", bound=Callable[..., Any])
QUORUM_ONLY = (QUORUM,)
TABLE: dict[str, Any] = load_table("queue_types")[QUORUM]
DELIVERY: dict[str, Any] = TABLE["delivery"]
DECLARE_RULE = "queue.declare/equivalent"


def quorum_case(slug: str, *, fact: str = "", **meta: Any) -> Callable[[F], F]:
    """A case of this area: ``queue_types.<slug>``, EXTENSION, run on quorum queues only. ``fact``
    names a ``[quorum.delivery]`` entry of the table: the case cites its ``<fact>_source`` and
    its rabbitmq value comes from ``<fact>_measured``."""
    if fact:
        meta["sources"] = [DELIVERY[f"{fact}_source"]]
        meta["expected_sources"] = {"rabbitmq": DELIVERY[f"{fact}_measured"]}
    return case(f"queue_types.{slug}", level=Level.EXTENSION, queue_types=QUORUM_ONLY, **meta)


def _refusal_case(row: dict[str, Any]) -> Any:
    return param(Case(
        id=f"queue_types.{row['slug']}", level=Level.EXTENSION, queue_types=QUORUM_ONLY,
        sources=(row["source"], TABLE["source"]), description=row["description"],
        expectation=f"{row['expected']} naming queue.declare ({row['text']})", default=row["expected"],
        expected_sources={"rabbitmq": row["measured"]},
    ), row)


@pytest.mark.parametrize("row", [_refusal_case(r) for r in TABLE["refusals"]])
def test_declare_refused(amqp, ctx, cleanup, queue_type, row: dict[str, Any]) -> None:
    ch = amqp.channel()
    fields = {k: v for k, v in row["declare"].items() if k not in ("server_named", "redeclare_plain")}
    name = "" if row["declare"].get("server_named") else cleanup.queue(ctx.name("q"))
    arguments = {**fields.pop("arguments", {}), "x-queue-type": QUORUM}
    if row["declare"].get("redeclare_plain"):
        ch.declare_queue(name, arguments=arguments, **fields)  # the quorum queue exists ...
        arguments = {}  # ... and is declared again without x-queue-type
    method = spec.Queue.Declare(queue=name, arguments=arguments, **fields)
    got = outcome(ch, method, spec.Queue.DeclareOk)
    check_outcome(ctx, got, "queue.declare")
    ctx.observe("reply", got[1])


@quorum_case(
    "declare-ok", sources=["rabbitmq-quorum-queues#declaring"],
    description="queue.declare of a durable, non-exclusive, non-auto-delete queue with x-queue-type=quorum",
    expectation="queue.declare-ok naming the queue, 0 messages, 0 consumers; a passive declare finds it",
)
def test_declare_ok(amqp, ctx, cleanup, queue_type) -> None:
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    ok = ch.declare_queue(q, durable=True, arguments={"x-queue-type": QUORUM})
    ctx.check(
        (ok.queue, ok.message_count, ok.consumer_count), (q, 0, 0), "declare-ok (queue, messages, consumers)"
    )
    again = ch.declare_queue(q, passive=True)
    ctx.check((again.queue, again.message_count), (q, 0), "passive declare-ok (queue, messages)")


def _headers(ev: Any) -> dict[str, Any]:
    return dict((ev.properties.headers if ev.properties else None) or {})


@quorum_case(
    "delivery-count-header", fact="delivery_count",
    description="A message in a quorum queue is consumed, rejected with requeue, consumed, rejected again, "
                "and consumed a third time",
    expectation="the redeliveries carry redelivered=true and x-delivery-count 1, then 2 (the count of "
                "earlier unsuccessful deliveries); the body is unchanged",
)
def test_delivery_count(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [b"dc"])
    ch.consume(q)
    seen: list[tuple[bytes, bool, Any]] = []
    for i in range(3):
        ev = ch.next_delivery(what=f"delivery {i + 1}")
        seen.append((ev.body or b"", bool(ev.method.redelivered), _headers(ev).get("x-delivery-count")))
        if i < 2:
            ch.reject(int(ev.method.delivery_tag), requeue=True)
    ctx.observe("deliveries", seen)
    ctx.check([s[0] for s in seen], [b"dc"] * 3, "bodies")
    ctx.check([s[1] for s in seen], [False, True, True], "redelivered flags")
    ctx.check([s[2] for s in seen[1:]], [1, 2], "x-delivery-count of the two redeliveries")


@quorum_case(
    "delivery-limit-dead-letters", fact="delivery_limit",
    description="A quorum queue with x-delivery-limit=1 and a dead-letter exchange; its message is got and "
                "rejected with requeue twice",
    expectation="it is delivered twice (x-delivery-count 0 then 1 — from RabbitMQ 3.12 absent then 1, "
                "profile data keyed by release); the second reject(requeue) dead-letters it (x-death reason "
                "'delivery_limit') and the source queue is empty (basic.reject: a failed delivery on every "
                "release; a basic.nack no longer counts from 4.3, queue_types.nack-requeue-not-counted)",
    default=[0, 1],
)
def test_delivery_limit(declared_queue, amqp, ctx, cleanup) -> None:
    ch = amqp.channel()
    dlx, dlq = dead_letter_target(ch, ctx, cleanup)
    _, src = declared_queue("src", ch=ch, arguments={"x-delivery-limit": 1, "x-dead-letter-exchange": dlx})
    publish_confirmed(ch, "", src, [b"poison"])
    counts = []
    for i in range(2):
        ev = get_one(ch, src, f"delivery {i + 1} of the message")
        counts.append(_headers(ev).get("x-delivery-count", "absent"))
        ch.reject(int(ev.method.delivery_tag), requeue=True)
    ctx.observe("x-delivery-count of the deliveries", counts)
    ch.consume(dlq, no_ack=True)
    dead = ch.next_delivery(timeout=min(ctx.timeout, 5.0), what="the message in the dead-letter queue")
    ctx.check(dead.body, b"poison", "dead-lettered body")
    ctx.check(x_death_reason(dead), "delivery_limit", "x-death[0].reason")
    ctx.check(ch.message_count(src), 0, "messages left in the source queue")
    ctx.check_profile(counts, "x-delivery-count of the two deliveries")


@quorum_case(
    "nack-requeue-not-counted", sources=["rabbitmq-quorum-queues#poison-message-handling"],
    description="A message in a quorum queue is got and nacked with requeue twice, then got a third time",
    expectation="the third delivery carries x-delivery-count 2 and no x-acquired-count (every return counts "
                "as a failed delivery); from RabbitMQ 4.3 a basic.nack is an explicit return that does not "
                "count: no x-delivery-count, x-acquired-count 2 (release row quorum-nack-not-counted)",
    default={"x-delivery-count": 2, "x-acquired-count": "absent"},
)
def test_nack_not_counted(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [b"nacked"])
    for i in range(2):
        ev = get_one(ch, q, f"delivery {i + 1} of the message")
        ch.nack(int(ev.method.delivery_tag), requeue=True)
    ev = get_one(ch, q, "delivery 3 of the message")
    ctx.check((ev.body, bool(ev.method.redelivered)), (b"nacked", True),
              "the third delivery (body, redelivered)")
    headers = _headers(ev)
    ctx.check_profile({k: headers.get(k, "absent") for k in ("x-delivery-count", "x-acquired-count")},
                      "the third delivery's counting headers")
    ch.ack(int(ev.method.delivery_tag))


#: how many deliveries the default-limit case allows before it says "no default limit"
DEFAULT_LIMIT_PROBE = 25


@quorum_case(
    "default-delivery-limit", sources=["rabbitmq-quorum-queues#poison-message-handling"],
    description=f"A quorum queue with a dead-letter exchange and no x-delivery-limit; its one message is got "
                f"and rejected with requeue, up to {DEFAULT_LIMIT_PROBE} times",
    expectation="rabbitmq before 4.0: never dead-lettered (no default limit); from 4.0: dead-lettered after "
                "21 deliveries with x-death reason delivery_limit (the default limit 20; profile data keyed "
                "by release)",
    default=f"not dead-lettered within {DEFAULT_LIMIT_PROBE} deliveries",
    expected_sources={"rabbitmq": "RabbitMQ 3.10.8: 40 deliveries, never dropped (measured); 4.0: "
                                  "rabbitmq_releases.toml quorum-default-delivery-limit"},
)
def test_default_delivery_limit(declared_queue, amqp, ctx, cleanup) -> None:
    ch = amqp.channel()
    dlx, dlq = dead_letter_target(ch, ctx, cleanup)
    _, src = declared_queue("src", ch=ch, arguments={"x-dead-letter-exchange": dlx})
    publish_confirmed(ch, "", src, [b"poison"])
    deliveries = 0
    while deliveries < DEFAULT_LIMIT_PROBE:
        ev = ch.get(src)
        if ev is None:
            break
        deliveries += 1
        ch.reject(int(ev.method.delivery_tag), requeue=True)
        ch.barrier()
    if deliveries < DEFAULT_LIMIT_PROBE:
        dead = ch.get(dlq, no_ack=True)
        if dead is None:  # the return and the dead-lettering are asynchronous: wait for it once
            ch.consume(dlq, no_ack=True)
            dead = ch.next_delivery(timeout=min(ctx.timeout, 5.0),
                                    what="the message in the dead-letter queue")
        got = f"dead-lettered after {deliveries} deliveries, x-death reason {x_death_reason(dead)}"
    else:
        got = f"not dead-lettered within {DEFAULT_LIMIT_PROBE} deliveries"
    ctx.check_profile(got, "what became of the message")


@quorum_case(
    "global-qos-consume-540", fact="global_qos",
    description="basic.qos(prefetch-count=2, global=true), then basic.consume from a quorum queue",
    expectation=(
        "the connection is closed with 540 NOT_IMPLEMENTED (a quorum queue does not support global QoS); "
        "from RabbitMQ 4.3 global QoS is a deprecated feature denied by default, the qos applies per "
        "consumer and the consume succeeds (release row global-qos-denied; "
        "deprecated_features.permit.global_qos = true restores it)"
    ),
    default="connection.close 540",
)
def test_global_qos(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    ch.qos(prefetch_count=2, global_=True)
    check_outcome(ctx, outcome(ch, spec.Basic.Consume(queue=q), spec.Basic.ConsumeOk),
                  "basic.consume on a global-QoS channel")


REQUEUE_BY = {
    "reject": lambda ch, tag: ch.reject(tag, requeue=True),
    "nack": lambda ch, tag: ch.nack(tag, requeue=True),
    "recover": lambda ch, tag: ch.recover(requeue=True),
}


@pytest.mark.parametrize("how", [
    param(Case(
        id=f"queue_types.requeue-position-{how}", level=Level.EXTENSION, queue_types=QUORUM_ONLY,
        sources=(DELIVERY["delivery_count_source"],),
        description=f"m1..m4 in a quorum queue; m1 is got, then returned with {how}(requeue=true); the queue "
                    "is read with basic.get",
        expectation="m2 m3 m4 m1: a returned message goes to the back of a quorum queue (classic: its place)",
        expected={"rabbitmq": ["m2", "m3", "m4", "m1"]},
        expected_sources={"rabbitmq": DELIVERY["requeue_position_measured"]},
        default=["m2", "m3", "m4", "m1"],
    ), how) for how in REQUEUE_BY
])
def test_requeue_position(declared_queue, amqp, ctx, how: str) -> None:
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [b"m1", b"m2", b"m3", b"m4"])
    holder = amqp.channel()
    ev = get_one(holder, q, "m1")
    REQUEUE_BY[how](holder, int(ev.method.delivery_tag))
    holder.barrier()
    got: list[str] = []
    deadline_reads = 8
    while len(got) < 4 and deadline_reads:
        deadline_reads -= 1
        nxt = ch.get(q, no_ack=True)
        if nxt is None:
            break
        got.append((nxt.body or b"").decode())
    ctx.check_profile(got, "basic.get order after the return")


@quorum_case(
    "reject-publish-overflow-nack",
    sources=["rabbitmq-quorum-queues#feature-matrix", "000_cd470977c809f5f5.txt#negative-acknowledgment"],
    requires=["publisher_confirms"],
    description="Three publishes, each confirmed before the next, to a quorum queue declared with "
                "x-max-length 1 and x-overflow reject-publish",
    expectation="ack, ack, nack: a quorum queue refuses a publish once it is over its limit (a classic queue "
                "nacks the second: confirms.reject-publish-overflow-nack)",
    default={1: "ack", 2: "ack", 3: "nack"},
    expected_sources={"rabbitmq": DELIVERY["overflow_measured"]},
)
def test_reject_publish_overflow(declared_queue, ctx) -> None:
    ch, q = declared_queue(arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_select()
    verdicts: dict[int, str] = {}
    for seq, body in enumerate((b"m1", b"m2", b"m3"), 1):
        # One at a time, each confirmed before the next: a quorum queue applies its limit to what it
        # has enqueued, so publishes in flight together may all pass (RabbitMQ 3.10.8).
        ch.publish("", q, body)
        ev = ch.wait((spec.Basic.Ack, spec.Basic.Nack), f"the confirm of publish {seq}")
        ctx.check(int(ev.method.delivery_tag), seq, f"delivery-tag of confirm {seq}")
        verdicts[seq] = "ack" if isinstance(ev.method, spec.Basic.Ack) else "nack"
    ctx.check_profile(verdicts, "confirm per seq")
