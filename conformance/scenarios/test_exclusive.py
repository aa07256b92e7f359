"""Exclusive queues and exclusive consumers.

Covers: the spec XML's ``queue.declare`` exclusive field and its rules
(``queue.declare/exclusive``, ``queue.declare.exclusive/types``), ``queue.declare/default-name``
(server-named queues) and ``basic.consume.exclusive/01``; RabbitMQ "Broker Semantics"
(``001_27f7ea2622bbc99f.txt#exclusive-durable``: an exclusive queue is deleted when its
connection closes; durable + exclusive is created transient).

Levels: ``queue.declare/exclusive`` and ``basic.consume.exclusive/01`` are worded "The client
MAY NOT ..." with an ``on-failure`` reply code, i.e. a prohibition the server enforces with that
code; together with ``queue.declare.exclusive/types`` ("The server MUST support both exclusive
(private) and non-exclusive (shared) queues") and the field text ("Exclusive queues may only be
accessed by the current connection"), the server side is a MUST.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import RawChannel
from conformance.verify import Mismatch, answer, expect_ok, passive_answer, restarted

EXCL = "001_27f7ea2622bbc99f.txt#exclusive-durable"
LOCKED = "channel.close 405 RESOURCE_LOCKED"


def _owned_queue(ch: RawChannel, ctx: Any, cleanup: Any, body: bytes) -> str:
    """An exclusive queue declared on ``ch``'s connection (its owner), holding ``body``."""
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q, exclusive=True)
    ch.publish("", q, body)
    ch.barrier()
    return q


def _passive_gone(amqp: Any, queue: str, timeout: float) -> str:
    """Passive-declare ``queue`` from fresh connections until the broker answers 404 or the
    deadline passes (an owner's close is processed asynchronously by some brokers); the last
    answer, short form."""
    deadline = time.monotonic() + timeout
    while True:
        conn = amqp()
        try:
            last = passive_answer(conn.channel(), queue)
        finally:
            conn.close(timeout=1.0)
        if last.startswith("channel.close 404") or time.monotonic() >= deadline:
            return last
        time.sleep(0.1)


# -- another connection may not use an exclusive queue -------------------------------------------

OpFn = Callable[[str, str], Any]  # (queue, exchange bound to it with key "k") -> method

OTHER_CONNECTION_OPS: list[tuple[str, str, OpFn]] = [
    ("declare", "queue.declare of the same name (non-exclusive, non-passive)",
     lambda q, ex: spec.Queue.Declare(queue=q)),
    ("passive-declare", "passive queue.declare",
     lambda q, ex: spec.Queue.Declare(queue=q, passive=True)),
    ("consume", "basic.consume", lambda q, ex: spec.Basic.Consume(queue=q)),
    ("get", "basic.get", lambda q, ex: spec.Basic.Get(queue=q)),
    ("purge", "queue.purge", lambda q, ex: spec.Queue.Purge(queue=q)),
    ("delete", "queue.delete", lambda q, ex: spec.Queue.Delete(queue=q)),
    ("bind", "queue.bind to amq.direct", lambda q, ex: spec.Queue.Bind(queue=q, exchange="amq.direct",
                                                                       routing_key=q)),
    ("unbind", "queue.unbind of the owner's binding",
     lambda q, ex: spec.Queue.Unbind(queue=q, exchange=ex, routing_key="k")),
]


@pytest.mark.parametrize("op", [
    param(Case(
        id=f"exclusive.other-connection-{slug}-405",
        rules=("queue.declare/exclusive", "queue.declare.exclusive/types"), sources=(EXCL,), level=Level.MUST,
        description=f"{label} of another connection's exclusive queue",
        expectation=f"the {label} closes the channel with 405 RESOURCE_LOCKED",
        # A broker that lets the other connection consume holds a consumer on the exclusive queue
        # when the owner's connection closes: garagemq can deadlock deleting it (its stacks, CI
        # 2026-11-29: Queue.Delete holds cmrLock, Consumer.Cancel -> Queue.RemoveConsumer takes
        # it again), and then answers nothing. On a private broker that costs this case only.
        wedges=slug == "consume",
    ), fn)
    for slug, label, fn in OTHER_CONNECTION_OPS
])
def test_other_connection_locked(op: OpFn, isolated, ctx) -> None:
    owner = isolated.channel()
    q = isolated.queue(ctx.name("q"))
    owner.declare_queue(q, exclusive=True)
    owner.publish("", q, b"owned")
    ex = isolated.exchange(ctx.name("x"))
    owner.declare_exchange(ex, "direct", auto_delete=False)
    owner.bind(q, ex, "k")
    other = isolated.channel()  # a connection of its own
    ctx.check(answer(ctx, other, op(q, ex)), LOCKED, "answer to another connection")


@case(
    "exclusive.same-connection-other-channel", wedges=True, rules=["queue.declare.exclusive/types"],
    sources=[EXCL], level=Level.MUST,
    description="Another channel of the owning connection uses the exclusive queue",
    expectation="basic.consume on a second channel of the same connection succeeds and delivers the message",
)
def test_same_connection_other_channel(amqp, ctx, cleanup) -> None:
    conn = amqp()
    q = _owned_queue(conn.channel(), ctx, cleanup, b"mine")
    second = conn.channel()
    tag = expect_ok(
        lambda: second.consume(q, no_ack=True), "basic.consume from a second channel of the owner"
    )
    ev = second.next_delivery()
    # Not part of the expectation: no consumer is left on the exclusive queue when the owner
    # closes (garagemq deadlocks deleting an exclusive queue that still has a consumer).
    second.cancel(tag)
    ctx.check(ev.body, b"mine", "body delivered on the second channel")


@case("exclusive.deleted-when-owner-closes", rules=["queue.declare.exclusive/types"], sources=[EXCL],
      level=Level.MUST,
      description="The owner's connection closes; another connection passive-declares the exclusive queue",
      expectation="the queue is gone: passive queue.declare closes the channel with 404 NOT_FOUND")
def test_deleted_when_owner_closes(amqp, ctx, cleanup) -> None:
    owner = amqp()
    q = _owned_queue(owner.channel(), ctx, cleanup, b"lost with the owner")
    owner.close(timeout=ctx.timeout)
    ctx.check(_passive_gone(amqp, q, ctx.timeout), "channel.close 404 NOT_FOUND",
              "passive declare after the owner closed")


@case(
    "exclusive.durable-exclusive-is-transient", rules=["queue.declare.exclusive/types"], sources=[EXCL],
    level=Level.MUST, description="A durable + exclusive queue across a clean broker restart",
    expectation="after the restart the queue does not exist (passive declare → 404 NOT_FOUND): "
                "RabbitMQ ignores durable for exclusive queues, and the spec deletes it with its connection",
    needs_restart=True,
)
def test_durable_exclusive_is_transient(amqp, ctx, restartable) -> None:
    q = ctx.name("q")
    ch = amqp.channel(restartable.url)
    ok = ch.declare_queue(q, durable=True, exclusive=True)
    ctx.check(str(ok.queue), q, "declare-ok queue name")
    ch.publish("", q, b"durable?", persistent=True)
    ch.barrier()
    with restarted(amqp, restartable, queues=(q,)) as url:  # then deleted, should it have survived
        observed = passive_answer(amqp.channel(url), q)
    ctx.check(observed, "channel.close 404 NOT_FOUND", "passive declare after restart")


@case("exclusive.server-named-unique", rules=["queue.declare/default-name"], level=Level.MUST,
      description="Three exclusive queue.declare with an empty name on one connection",
      expectation="the server returns three non-empty, distinct generated names")
def test_server_named_unique(amqp, ctx, cleanup) -> None:
    ch = amqp.channel()
    names = [str(ch.declare_queue("", exclusive=True).queue) for _ in range(3)]
    for n in names:
        cleanup.queue(n)
    ctx.observe("names", names)
    if any(not n for n in names) or len(set(names)) != 3:
        raise Mismatch("server-generated queue names", expected="3 non-empty distinct names", observed=names)


# Twins: a consumer holds the queue, a second connection asks for it; one of the two asks for
# exclusive access. Only who asks for it differs.
def _consumer_conflict_case(id: str, description: str, expectation: str) -> Case:
    return Case(
        id=id, rules=("basic.consume.exclusive/01",), sources=("rabbitmq-consumers#exclusivity",),
        level=Level.MUST, description=description,
        expectation=expectation, default="channel.close 403 ACCESS_REFUSED",
        expected={"rabbitmq@quorum": "basic.consume-ok"},
        expected_sources={
            "rabbitmq@quorum": (
                "measured on RabbitMQ 3.10.8: a quorum queue does not enforce exclusive consumers "
                "(basic.consume-ok both ways; conformance/profiles/queue_types.toml)"
            )
        },
    )


EXCLUSIVE_CONSUMERS = [
    param(_consumer_conflict_case(
        id="exclusive.exclusive-consumer-blocks-second",
        description="A queue has an exclusive consumer; another connection starts a plain consumer on it",
        expectation="the second basic.consume closes its channel with 403 ACCESS_REFUSED",
    ), True, False, "second consumer on an exclusively consumed queue"),
    param(_consumer_conflict_case(
        id="exclusive.exclusive-consume-refused-when-consumed",
        description="A shared queue has a consumer; another connection asks for exclusive consumer access",
        expectation="the exclusive basic.consume closes its channel with 403 ACCESS_REFUSED",
    ), False, True, "exclusive consume on a consumed queue"),
]


@pytest.mark.parametrize(("first_exclusive", "second_exclusive", "what"), EXCLUSIVE_CONSUMERS)
def test_exclusive_consumer_conflict(declared_queue, amqp, ctx, first_exclusive: bool, second_exclusive: bool,
                                     what: str) -> None:
    first, q = declared_queue()
    first.consume(q, exclusive=first_exclusive)
    second = amqp.channel()
    ctx.check_profile(answer(ctx, second, spec.Basic.Consume(queue=q, exclusive=second_exclusive)), what)


# -- client libraries -----------------------------------------------------------------------------


@case(
    "exclusive.pika-other-connection-locked", rules=["queue.declare/exclusive"], sources=[EXCL],
    level=Level.MUST, client="pika",
    description="pika: one BlockingConnection declares an exclusive queue, a second one passive-declares it",
    expectation="the second connection's channel is closed by the broker with 405 (ChannelClosedByBroker)",
)
def test_pika_other_connection_locked(broker_url, ctx, cleanup) -> None:
    from pika import exceptions as pex

    from conformance.verify import pika_session

    q = cleanup.queue(ctx.name("q"))
    with pika_session(broker_url, ctx.timeout, "pika owner") as owner, \
            pika_session(broker_url, ctx.timeout, "pika other connection") as other:
        owner.channel().queue_declare(q, exclusive=True)
        try:
            other.channel().queue_declare(q, passive=True)
            observed: Any = "queue.declare-ok"
        except pex.ChannelClosedByBroker as exc:
            observed = exc.reply_code
            ctx.observe("close", f"{exc.reply_code} {exc.reply_text}")
        ctx.check(observed, 405, "reply code pika saw")


@case("exclusive.aio-pika-server-named-locked",
      rules=["queue.declare/default-name", "queue.declare/exclusive"], sources=[EXCL], level=Level.MUST,
      client="aio-pika",
      description="aio-pika: declare_queue(exclusive=True) without a name, then another connection uses it",
      expectation="the queue gets a server-generated name, and another connection's passive declare of it "
                  "raises ChannelLockedResource (405)")
def test_aio_pika_server_named_locked(broker_url, ctx) -> None:
    from aiormq import exceptions as aex

    from conformance.verify import aio_pika_connect, run_async

    async def scenario() -> tuple[str, str]:
        owner = await aio_pika_connect(broker_url, ctx.timeout)
        other = await aio_pika_connect(broker_url, ctx.timeout)
        try:
            try:
                queue = await (await owner.channel()).declare_queue(exclusive=True)
            except aex.ChannelClosed as exc:
                return "", f"declare_queue(exclusive=True) failed: {type(exc).__name__} {exc}"
            ch = await other.channel()
            try:
                await ch.declare_queue(queue.name, passive=True)
                outcome = "queue.declare-ok"
            except aex.ChannelLockedResource:
                outcome = "ChannelLockedResource"
            except aex.ChannelClosed as exc:
                outcome = f"{type(exc).__name__} {exc}"
            return queue.name, outcome
        finally:
            await other.close()
            await owner.close()

    name, outcome = run_async(scenario(), ctx.timeout * 2, "aio-pika exclusive queue scenario")
    ctx.observe("generated name", name)
    if not name:
        raise Mismatch("server-generated name", expected="a non-empty generated name", observed=outcome)
    ctx.check(outcome, "ChannelLockedResource", "other connection's passive declare")
