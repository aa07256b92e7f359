"""Message ordering: one path keeps publication order; requeued messages go back to their place.

Documents: 001_27f7ea2622bbc99f.txt#ordering ("Message ordering guarantees": section 4.7 of the
AMQP 0-9-1 core specification guarantees order for one channel → one exchange → one queue → one
outgoing channel; since RabbitMQ 2.7.0 "messages are always held in the queue in publication
order, even in the presence of requeueing or channel closure"; individual consumers of a queue
with several subscribers may still observe messages out of order) and the spec XML rule
``basic/08`` (same-priority messages in order irrespective of persistence).

The position of a requeued message is not defined by the AMQP 0-9-1 XML, so the requeue cases
carry per-profile data: ``rabbitmq`` expects publication order (001#ordering), ``spec`` records
what happened (INFORMATIONAL).

Waiting: a basic.get on the channel that requeued is ordered after the requeue in RabbitMQ (a
passive queue.declare is not: the queue answers it ahead of queued requeues), so the queue is read
with basic.get on that channel; after a channel close the queue is read once its message count
shows every message back (a bounded poll).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import Event, RawChannel
from conformance.verify import (
    CaseTimeout,
    Mismatch,
    aio_pika_fill,
    aio_pika_session,
    body_list,
    drain,
    get_n,
    pika_fill,
    pika_session,
    publish_confirmed,
    run_async,
)

R001 = "001_27f7ea2622bbc99f.txt"
R003 = "003_50388870ec53b6aa.txt"
R004 = "004_ba6059c7056f3c65.txt"
SRC_ORDER = f"{R001}#ordering"
IN_ORDER = "publication order"
UNDEFINED = "undefined (recorded)"
# Where a requeued message goes, per profile (see the module docstring).
REQUEUE_EXPECTED = {"rabbitmq": IN_ORDER, "spec": UNDEFINED}
REQUEUE_SOURCES = {
    "rabbitmq": f"{SRC_ORDER}: 'From RabbitMQ release 2.7.0, messages are always held in the queue in "
                "publication order, even in the presence of requeueing or channel closure'",
    "spec": "the AMQP 0-9-1 XML does not say where a requeued message goes (basic.reject/basic.recover "
            "field requeue); recorded as INFORMATIONAL",
}


# -- helpers -------------------------------------------------------------------------------------


def order_verdict(observed: Sequence[str], expected: Sequence[str]) -> str:
    """``publication order`` or a short description of the first difference (lists can be long)."""
    if list(observed) == list(expected):
        return IN_ORDER
    if sorted(observed) == sorted(expected):
        i = next(i for i, (a, b) in enumerate(zip(observed, expected, strict=True)) if a != b)
        return (
            f"out of order from position {i}: got {list(observed[i : i + 5])}, expected "
            f"{list(expected[i : i + 5])}"
        )
    missing = sorted(set(expected) - set(observed))
    extra = sorted(set(observed) - set(expected))
    return f"different messages: {len(observed)} of {len(expected)}, missing {missing[:5]}, extra {extra[:5]}"


def wait_ready(ch: RawChannel, queue: str, count: int, timeout: float) -> None:
    """Poll the ready count until it reaches ``count`` (requeue on channel close is asynchronous);
    a count that stays short is the broker not requeueing: a Mismatch with the last count."""
    deadline = time.monotonic() + timeout
    last = ch.message_count(queue)
    while last < count and time.monotonic() < deadline:
        time.sleep(0.02)
        last = ch.message_count(queue)
    if last < count:
        raise Mismatch("requeue on channel close", expected=f"{count} ready messages",
                       observed=f"{last} ready after {timeout:.1f}s")


def judge_requeue_order(ctx: Any, observed: Sequence[str], expected: Sequence[str], what: str,
                        verdict: str | None = None) -> None:
    """Compare with the profile's expectation (``verdict``: one worked out already); where the
    profile leaves it undefined, record it."""
    verdict = order_verdict(observed, expected) if verdict is None else verdict
    ctx.observe("order", list(observed))
    if ctx.expected == UNDEFINED:
        ctx.informational(
            verdict, note=f"{what}: position of requeued messages is not defined by this profile"
        )
        return
    ctx.check_profile(verdict, what)


# -- one path --------------------------------------------------------------------------------------


@case("ordering.single-path-1000", rules=["basic/08"], sources=[SRC_ORDER], level=Level.MUST,
      description="1000 messages, alternately transient and persistent, from one channel through one direct "
                  "exchange into one queue, consumed by one consumer",
      expectation="the consumer receives all 1000 in publication order")
def test_single_path_1000(declared_exchange, declared_queue, amqp, ctx):
    ch, x = declared_exchange("direct")
    _, q = declared_queue(ch=ch)
    ch.bind(q, x, "k")
    bodies = [f"m{i:04d}".encode() for i in range(1000)]
    consumer = amqp.channel()
    consumer.consume(q)
    # No confirms needed: the consumer waits for all 1000 (and confirms are another area's subject).
    for i, body in enumerate(bodies):
        ch.publish(x, "k", body, persistent=i % 2 == 1)
    got = consumer.deliveries(1000)
    consumer.ack(got[-1].method.delivery_tag, multiple=True)
    ctx.check(
        order_verdict(body_list(got), [b.decode() for b in bodies]), IN_ORDER, "order of 1000 deliveries"
    )


# -- requeue family ------------------------------------------------------------------------------


def _reject_each(ch: RawChannel, held: list[Event]) -> None:
    for ev in reversed(held):
        ch.reject(ev.method.delivery_tag, requeue=True)


def _nack_each(ch: RawChannel, held: list[Event]) -> None:
    for ev in reversed(held):
        ch.nack(ev.method.delivery_tag, requeue=True)


def _nack_multiple(ch: RawChannel, held: list[Event]) -> None:
    ch.nack(max(int(e.method.delivery_tag) for e in held), multiple=True, requeue=True)


def _recover(ch: RawChannel, held: list[Event]) -> None:
    ch.recover(requeue=True)


def _close(ch: RawChannel, held: list[Event]) -> None:
    ch.close()


def _close_connection(ch: RawChannel, held: list[Event]) -> None:
    ch.conn.close()


Requeue = Callable[[RawChannel, list[Event]], None]


# A quorum queue puts messages the client returns (reject / nack / recover with requeue) at the
# back, not at their place (RabbitMQ 3.10.8, measured: conformance/profiles/queue_types.toml); that
# is queue_types.requeue-position[quorum]. These rows' premise holds for classic queues.
RETURN_PREMISE = ("a client-returned message goes back to its original position: classic queues only "
                  "(quorum: queue_types.requeue-position[quorum])")


def _requeue_case(slug: str, how: str, rules: Sequence[str] = (), requires: Sequence[str] = (),
                  extra_sources: Sequence[str] = (), returned: bool = False) -> Case:
    return Case(
        queue_types=("classic",) if returned else None, premise=RETURN_PREMISE if returned else "",
        id=f"ordering.requeue-{slug}",
        description=f"m0..m9 in a queue; a channel holds m0..m5 unacked, acks m1 and m4, then {how}",
        expectation="reading the queue afterwards gives m0 m2 m3 m5 m6 m7 m8 m9 (publication order)",
        level=Level.MUST, rules=tuple(rules), sources=(SRC_ORDER, *extra_sources), expected=REQUEUE_EXPECTED,
        expected_sources=REQUEUE_SOURCES, requires=tuple(requires),
    )


REQUEUE_ROWS = [
    param(_requeue_case("reject", "rejects m5, m3, m2, m0 (in that order) with basic.reject(requeue=true)",
                        extra_sources=["002_4ef6b84472723893.txt#requeue-true"], returned=True),
          _reject_each, False),
    param(_requeue_case("nack-single", "nacks m5, m3, m2, m0 one by one with basic.nack(requeue=true)",
                        requires=["basic.nack"], extra_sources=[f"{R003}#basic-nack"], returned=True),
          _nack_each, False),
    param(_requeue_case("nack-multiple", "sends one basic.nack(tag of m5, multiple=true, requeue=true)",
                        requires=["basic.nack"], extra_sources=[f"{R003}#basic-nack"], returned=True),
          _nack_multiple, False),
    param(_requeue_case("recover", "sends basic.recover(requeue=true)", rules=["basic.recover/01"],
                        extra_sources=[f"{R004}#resurfacing-messages-in-limbo"], returned=True),
          _recover, False),
    param(_requeue_case("channel-close", "closes the channel (the basic.get deliveries are requeued)",
                        extra_sources=[f"{R003}#what-happens-to-unacknowledged-messages"]),
          _close, False),
    param(_requeue_case("consumer-cancel", "(a consumer, prefetch 6) cancels with basic.cancel and then "
                        "closes the channel — basic.cancel alone leaves deliveries unacked (spec XML "
                        "basic.cancel: 'This does not affect already delivered messages')",
                        extra_sources=[f"{R003}#consumer-cancellation"]),
          _close, True),
    param(_requeue_case("connection-close", "closes the whole connection (the basic.get deliveries are "
                        "requeued; the queue is read from another connection)",
                        extra_sources=[f"{R003}#what-happens-to-unacknowledged-messages"]),
          _close_connection, False),
]


@pytest.mark.parametrize(("requeue", "via_consumer"), REQUEUE_ROWS)
def test_requeue_keeps_publication_order(declared_queue, amqp, ctx, requeue: Requeue, via_consumer: bool):
    ch, q = declared_queue()
    bodies = [f"m{i}".encode() for i in range(10)]
    publish_confirmed(ch, "", q, bodies)
    if via_consumer:
        ch.qos(6)
        tag = ch.consume(q)
        held = ch.deliveries(6)
        ch.cancel(tag)
    else:
        held = get_n(ch, q, 6)
    if body_list(held) != [f"m{i}" for i in range(6)]:
        raise Mismatch("setup: first six messages", expected="m0..m5", observed=body_list(held))
    ch.ack(held[1].method.delivery_tag)
    ch.ack(held[4].method.delivery_tag)
    requeued = [held[0], held[2], held[3], held[5]]
    requeue(ch, requeued)
    expected = ["m0", "m2", "m3", "m5", "m6", "m7", "m8", "m9"]
    if requeue is _close:
        reader = ch.conn.channel()
        wait_ready(reader, q, len(expected), ctx.timeout)
    elif requeue is _close_connection:
        reader = amqp.channel()
        wait_ready(reader, q, len(expected), ctx.timeout)
    else:
        reader = ch  # basic.get on the requeueing channel is ordered after the requeue
    got = body_list(drain(reader, q, limit=len(expected) + 2))
    judge_requeue_order(ctx, got, expected, "queue order after the requeue")


@case("ordering.survivor-gets-requeued-in-order",
      sources=[SRC_ORDER, f"{R003}#what-happens-to-unacknowledged-messages"], level=Level.MUST,
      description="Consumer A (prefetch 5) holds m0..m4, consumer B holds m5..m9 (both unacked); A's "
                  "channel closes",
      expectation="the surviving consumer B receives m0..m4 again, in publication order",
      expected=REQUEUE_EXPECTED, expected_sources=REQUEUE_SOURCES)
def test_survivor_in_order(declared_queue, amqp, ctx):
    a, q = declared_queue()
    b = amqp.channel()
    publish_confirmed(a, "", q, [f"m{i}".encode() for i in range(10)])
    a.qos(5)
    a.consume(q)
    got_a = a.deliveries(5)
    b.consume(q)
    got_b = b.deliveries(5)
    if body_list(got_a) + body_list(got_b) != [f"m{i}" for i in range(10)]:
        raise Mismatch("setup: split between consumers", expected="A m0..m4, B m5..m9",
                       observed=f"A {body_list(got_a)}, B {body_list(got_b)}")
    a.close()
    redelivered = b.deliveries(5)
    judge_requeue_order(ctx, body_list(redelivered), [f"m{i}" for i in range(5)],
                        "order in which the survivor receives the requeued messages")


@case("ordering.several-consumers-observed", sources=[SRC_ORDER], level=Level.INFO,
      description="Two consumers (prefetch 2) share a queue of 20 messages; A requeues (basic.reject) every "
                  "message the first time it sees it, B acks everything",
      expectation="recorded: the order each consumer observed (RabbitMQ: individual consumers may see "
                  "messages out of order; the queue keeps publication order)")
def test_several_consumers_observed(declared_queue, amqp, ctx):
    a, q = declared_queue()
    b = amqp.channel()
    a.qos(2)
    b.qos(2)
    a.consume(q)
    b.consume(q)
    publish_confirmed(a, "", q, [f"m{i:02d}".encode() for i in range(20)])
    seen: dict[str, list[str]] = {"A": [], "B": []}
    rejected: set[str] = set()
    done: set[str] = set()
    deadline = time.monotonic() + ctx.timeout
    while len(done) < 20:
        if time.monotonic() > deadline:
            raise CaseTimeout("every message acked by one of the consumers", ctx.timeout,
                              observed=f"{len(done)} acked; A saw {seen['A']}, B saw {seen['B']}")
        for label, ch in (("A", a), ("B", b)):
            try:
                ev = ch.next_delivery(timeout=0.02)
            except CaseTimeout:
                continue
            body = (ev.body or b"").decode()
            seen[label].append(body)
            if label == "A" and body not in rejected:
                rejected.add(body)
                ch.reject(ev.method.delivery_tag, requeue=True)
            else:
                ch.ack(ev.method.delivery_tag)
                done.add(body)
    ctx.informational({
        "A saw": seen["A"], "B saw": seen["B"],
        "A in order": seen["A"] == sorted(seen["A"]), "B in order": seen["B"] == sorted(seen["B"]),
    })


# -- client libraries ------------------------------------------------------------------------------


@case("ordering.pika-consume-200", rules=["basic/08"], sources=[SRC_ORDER], level=Level.MUST, client="pika",
      description="pika: 200 messages published on one channel with confirm_delivery, consumed by one "
                  "consumer loop",
      expectation="the pika consumer receives the 200 messages in publication order")
def test_pika_consume_order(broker_url, ctx, cleanup):

    q = cleanup.queue(ctx.name("q"))
    bodies = [f"p{i:03d}" for i in range(200)]
    seen: list[str] = []
    with pika_session(broker_url, ctx.timeout * 3, "pika publish and consume of 200 messages") as conn:
        ch = conn.channel()
        pika_fill(ch, q, [body.encode() for body in bodies], confirm=True)
        ch.basic_qos(prefetch_count=50)
        for method, _props, body in ch.consume(q, inactivity_timeout=ctx.timeout):
            if method is None:
                raise CaseTimeout("200 deliveries in the pika consumer loop", ctx.timeout,
                                  observed=f"{len(seen)} deliveries")
            seen.append(body.decode())
            ch.basic_ack(method.delivery_tag)
            if len(seen) == len(bodies):
                break
        ch.cancel()
    ctx.check(order_verdict(seen, bodies), IN_ORDER, "order of the 200 pika deliveries")


@case("ordering.aio-pika-reject-requeue", queue_types=("classic",), premise=RETURN_PREMISE,
      sources=[SRC_ORDER, "002_4ef6b84472723893.txt#requeue-true"], level=Level.MUST, client="aio-pika",
      description="aio-pika: a0..a5 in a queue; queue.get() a0..a2, then message.reject(requeue=True) for "
                  "a2, a1, a0 (in that order)",
      expectation="reading the queue afterwards gives a0..a5 (publication order)", expected=REQUEUE_EXPECTED,
      expected_sources=REQUEUE_SOURCES)
def test_aio_pika_reject_requeue_order(broker_url, ctx, cleanup, queue_type):
    q = cleanup.queue(ctx.name("q"))
    bodies = [f"a{i}" for i in range(6)]

    async def scenario() -> list[str]:
        import aio_pika

        async with aio_pika_session(
            broker_url, ctx.timeout, what="aio-pika reject", expected="no broker error"
        ) as conn:
            channel = await conn.channel()
            queue = await aio_pika_fill(channel, q, [b.encode() for b in bodies], **ctx.declare_fields())
            held: list[aio_pika.abc.AbstractIncomingMessage] = []
            for _ in range(3):
                msg = await queue.get(timeout=ctx.timeout, fail=False)
                if msg is None:
                    raise Mismatch("queue.get()", expected="3 messages", observed=f"empty after {len(held)}")
                held.append(msg)
            for msg in reversed(held):
                await msg.reject(requeue=True)
            got = []
            for _ in range(len(bodies) + 2):
                msg = await queue.get(timeout=ctx.timeout, fail=False, no_ack=True)
                if msg is None:
                    break
                got.append(msg.body.decode())
            return got

    got = run_async(scenario(), ctx.timeout * 3, "the aio-pika requeue-order scenario")
    judge_requeue_order(ctx, got, bodies, "queue order after aio-pika rejects")


# -- requeue order and grouping --------------------------------------------------------------------
#
# The family above returns its messages in descending order only, which a broker that puts every
# requeued message at the head of the queue also passes (garagemq, measured: nack m1 then m3 gives
# [m3, m1]; RabbitMQ 3.10.8 gives [m1, m3]). These rows vary the order (ascending, descending,
# interleaved) and the grouping (one at a time, nack multiple, recover, channel close) of the
# returns; each returned message must come back at its original position, redelivered.
#
# A plan is a string of steps on m0..m4 (held by basic.get, m5 and m6 stay ready):
# ``a2`` ack m2, ``r3`` reject m3, ``n3`` nack m3, ``N3`` nack multiple up to m3, ``R`` recover,
# ``C`` close the channel. The returned messages are those not acked.

ORDER_HELD = 5
ORDER_READY = 2  # never delivered: they stay behind the returned ones and are not redelivered


def _order_case(slug: str, plan: str, how: str, requires: Sequence[str] = (),
                rules: Sequence[str] = (), extra_sources: Sequence[str] = ()) -> Any:
    return param(Case(
        id=f"ordering.requeue-order-{slug}", queue_types=("classic",), premise=RETURN_PREMISE,
        description=f"m0..m6 in a queue; a channel holds m0..m4 by basic.get, then {how} (plan {plan})",
        expectation="reading the queue afterwards gives the returned messages in publication order, "
                    "redelivered, then m5 m6 not redelivered (each returned message at its original "
                    "position)",
        level=Level.MUST, rules=tuple(rules), sources=(SRC_ORDER, *extra_sources), expected=REQUEUE_EXPECTED,
        expected_sources=REQUEUE_SOURCES, requires=tuple(requires),
    ), plan)


_REJ = ["002_4ef6b84472723893.txt#requeue-true"]
_NACK = {"requires": ["basic.nack"], "extra_sources": [f"{R003}#basic-nack"]}
_REC = {"rules": ["basic.recover/01"], "extra_sources": [f"{R004}#resurfacing-messages-in-limbo"]}
_CLOSE = {"extra_sources": [f"{R003}#what-happens-to-unacknowledged-messages"]}

REQUEUE_ORDER_ROWS = [
    _order_case("reject-ascending", "a2 r0 r1 r3 r4", "acks m2, rejects m0, m1, m3, m4 one at a time",
                extra_sources=_REJ),
    _order_case("reject-descending", "a2 r4 r3 r1 r0", "acks m2, rejects m4, m3, m1, m0 one at a time",
                extra_sources=_REJ),
    _order_case("reject-interleaved", "a2 r1 r4 r0 r3", "acks m2, rejects m1, m4, m0, m3 one at a time",
                extra_sources=_REJ),
    _order_case("reject-tags-2-4", "a0 a2 a4 r1 r3", "acks m0, m2, m4, rejects m1 then m3 (delivery tags "
                "2 and 4)", extra_sources=_REJ),
    _order_case("nack-ascending", "a2 n0 n1 n3 n4", "acks m2, nacks m0, m1, m3, m4 one at a time", **_NACK),
    _order_case("nack-descending", "a2 n4 n3 n1 n0", "acks m2, nacks m4, m3, m1, m0 one at a time", **_NACK),
    _order_case("nack-interleaved", "a2 n1 n4 n0 n3", "acks m2, nacks m1, m4, m0, m3 one at a time",
                **_NACK),
    _order_case("nack-multiple-ascending", "a2 N1 N4", "acks m2, nacks multiple up to m1 (m0 m1), then "
                "multiple up to m4 (m3 m4)", **_NACK),
    _order_case("nack-multiple-descending", "a2 n4 N3", "acks m2, nacks m4 alone, then multiple up to m3 "
                "(m0 m1 m3)", **_NACK),
    _order_case("nack-multiple-interleaved", "a2 n1 n4 N3", "acks m2, nacks m1 then m4 alone, then "
                "multiple up to m3 (m0 m3)", **_NACK),
    _order_case("recover-all", "a2 R", "acks m2, then basic.recover(requeue=true) returns m0 m1 m3 m4",
                **_REC),
    _order_case("recover-after-descending", "a2 r4 r1 R", "acks m2, rejects m4 then m1, then "
                "basic.recover(requeue=true) returns m0 m3", **_REC),
    _order_case("recover-after-ascending", "a2 n0 n3 R", "acks m2, nacks m0 then m3, then "
                "basic.recover(requeue=true) returns m1 m4", requires=["basic.nack"], **_REC),
    _order_case("close-after-descending", "a2 n4 n1 C", "acks m2, nacks m4 then m1, then closes the "
                "channel (m0 m3 return with it)", requires=["basic.nack"], **_CLOSE),
    _order_case("close-after-ascending", "a2 r0 r3 C", "acks m2, rejects m0 then m3, then closes the "
                "channel (m1 m4 return with it)", **_CLOSE),
]


def _run_plan(ch: RawChannel, held: list[Event], plan: str) -> None:
    for step in plan.split():
        op, idx = step[0], int(step[1:]) if len(step) > 1 else -1
        tag = held[idx].method.delivery_tag if idx >= 0 else 0
        if op == "a":
            ch.ack(tag)
        elif op == "r":
            ch.reject(tag, requeue=True)
        elif op == "n":
            ch.nack(tag, requeue=True)
        elif op == "N":
            ch.nack(tag, multiple=True, requeue=True)
        elif op == "R":
            ch.recover(requeue=True)
        elif op == "C":
            ch.close()
        else:
            raise ValueError(f"unknown requeue plan step {step!r}")


def returned_by(plan: str, held: int = ORDER_HELD) -> list[int]:
    """The held messages a plan gives back (every one it does not ack), in publication order."""
    acked = {int(step[1:]) for step in plan.split() if step[0] == "a"}
    return [i for i in range(held) if i not in acked]


@pytest.mark.parametrize("plan", REQUEUE_ORDER_ROWS)
def test_requeue_order_and_grouping(declared_queue, ctx, plan: str):
    ch, q = declared_queue()
    publish_confirmed(ch, "", q, [f"m{i}".encode() for i in range(ORDER_HELD + ORDER_READY)])
    held = get_n(ch, q, ORDER_HELD)
    if body_list(held) != [f"m{i}" for i in range(ORDER_HELD)]:
        raise Mismatch("setup: first five messages", expected="m0..m4", observed=body_list(held))
    _run_plan(ch, held, plan)
    back = returned_by(plan)
    expected = [f"m{i}" for i in back] + [f"m{i}" for i in range(ORDER_HELD, ORDER_HELD + ORDER_READY)]
    if plan.endswith("C"):
        reader = ch.conn.channel()
        wait_ready(reader, q, len(expected), ctx.timeout)
    else:
        reader = ch  # basic.get on the requeueing channel is ordered after the requeue
    got = drain(reader, q, limit=len(expected) + 2)
    bodies = body_list(got)
    verdict = order_verdict(bodies, expected)
    flags = {b: bool(ev.method.redelivered) for b, ev in zip(bodies, got, strict=True)}
    ctx.observe("redelivered", flags)
    wrong = {b: f for b, f in flags.items() if f != (b in {f"m{i}" for i in back})}
    if verdict == IN_ORDER and wrong:
        verdict = f"publication order, but redelivered flags wrong: {wrong}"
    judge_requeue_order(ctx, bodies, expected, "queue order after the requeue", verdict)
