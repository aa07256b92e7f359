"""Durability across broker restarts: durable topology, persistent messages, confirms after a crash.

Covers: the spec XML's ``queue.declare/persistence``, ``queue.bind/durable-exchange``, ``basic/01``
(persistent messages held on reliable storage), ``basic/04`` (non-persistent messages MAY go to
persistent storage), the queue.declare durable field ("Non-durable queues (transient queues) are
purged if/when a server restarts") and ``redelivered/implementation``; RabbitMQ's confirms guide
(``000_cd470977c809f5f5.txt``: "basic.ack for a persistent message routed to a durable queue will
be sent after persisting the message to disk"; "Confirms and Guaranteed Delivery").

Every case restarts a broker private to the worker (the ``restartable`` fixture: UNSUPPORTED
where the suite cannot restart the target), so the cases are few and each checks one thing; the
restart and the clean-up of what the case made durable are ``verify.restarts.restarted``.
"""

from __future__ import annotations

from typing import Any

from conformance.model.cases import MISSING, Level, case
from conformance.protocol import RawChannel, UnexpectedClose
from conformance.protocol.wire import URL
from conformance.verify import Mismatch, drain_confirms, publish_confirmed, restarted

CONFIRMS = "000_cd470977c809f5f5.txt"
ACK_LATENCY = f"{CONFIRMS}#ack-latency-for-persistent-messages"
GUARANTEED = f"{CONFIRMS}#confirms-and-guaranteed-delivery"


def _confirmed_on_durable_queue(amqp: Any, ctx: Any, url: URL, body: bytes, *,
                                persistent: bool) -> tuple[RawChannel, str]:
    """A durable queue of the case's type on ``url``, holding ``body`` (its publish confirmed)."""
    q = ctx.name("q")
    ch = amqp.channel(url)
    ch.declare_queue(q, **ctx.declare_fields(durable=True))
    ch.confirm_select()
    drain_confirms(ch, ch.publish("", q, body, persistent=persistent))
    return ch, q


def _queue_state(amqp: Any, url: URL, queue: str) -> tuple[bool, int]:
    """(exists, ready messages) of ``queue`` by passive declare on a fresh connection."""
    ch = amqp.channel(url)
    try:
        return True, ch.message_count(queue)
    except UnexpectedClose as exc:
        if exc.reply_code == 404:
            return False, 0
        raise


@case("durability.topology-survives-restart",
      rules=["queue.declare/persistence", "queue.bind/durable-exchange"], level=Level.MUST,
      description="Spec scenario: a durable queue bound to a durable direct exchange, clean broker restart",
      expectation=(
          "after the restart a message published to the exchange with the binding key reaches the queue"
      ),
      needs_restart=True)
def test_topology_survives_restart(amqp, ctx, restartable, queue_type) -> None:
    url = restartable.url
    q, ex = ctx.name("q"), ctx.name("x")
    ch = amqp.channel(url)
    ch.declare_exchange(ex, "direct", durable=True)
    ch.declare_queue(q, **ctx.declare_fields(durable=True))
    ch.bind(q, ex, "k")
    with restarted(amqp, restartable, queues=(q,), exchanges=(ex,)):
        ch = amqp.channel(url)
        # A vanished exchange closes the channel: FAIL. Confirmed, so the message is routed and
        # enqueued before the get (a quorum queue may answer a get before an unconfirmed publish).
        publish_confirmed(ch, ex, "k", [b"after restart"])
        ev = ch.get(q, no_ack=True)            # a vanished queue closes the channel: FAIL
        ctx.check(ev.body if ev else "basic.get-empty (binding lost)", b"after restart",
                  "message routed through the restored binding")


@case("durability.unacked-persistent-redelivered-after-restart",
      rules=["redelivered/implementation", "basic/01"], sources=[GUARANTEED], level=Level.SHOULD,
      requires=["publisher_confirms"],
      description="A confirmed persistent message on a durable queue is delivered, left unacked, and the "
                  "broker restarts cleanly",
      expectation="after the restart the message is delivered again with redelivered=true",
      needs_restart=True)
def test_unacked_redelivered_after_restart(amqp, ctx, restartable, queue_type) -> None:
    url = restartable.url
    ch, q = _confirmed_on_durable_queue(amqp, ctx, url, b"in flight", persistent=True)
    ch.consume(q)
    ctx.observe("before restart", ch.next_delivery().describe())
    with restarted(amqp, restartable, queues=(q,)):
        ev = amqp.channel(url).get(q, no_ack=True)
        if ev is None:
            raise Mismatch("the unacked persistent message after restart", expected="redelivered=true",
                           observed="basic.get-empty: the message was lost")
        ctx.check((ev.body, bool(ev.method.redelivered)), (b"in flight", True), "(body, redelivered)")


@case("durability.transient-queue-not-kept", rules=["queue.declare.durable/types"], level=Level.MUST,
      description="A non-durable queue holding a message, clean broker restart",
      expectation="none of its messages survive (the durable field: transient queues 'are purged if/when a "
                  "server restarts'; RabbitMQ deletes the queue)",
      needs_restart=True)
def test_transient_queue_not_kept(amqp, ctx, restartable) -> None:
    url = restartable.url
    q = ctx.name("q")
    ch = amqp.channel(url)
    ch.declare_queue(q, durable=False)
    ch.publish("", q, b"transient", persistent=True)
    ch.barrier()
    with restarted(amqp, restartable, queues=(q,)):
        exists, ready = _queue_state(amqp, url, q)
        ctx.observe(
            "after restart", f"queue exists with {ready} messages" if exists else "queue deleted (404)"
        )
        ctx.check(ready, 0, "messages of the transient queue after restart")


@case("durability.non-persistent-on-durable-queue", rules=["basic/04"], level=Level.MAY,
      requires=["publisher_confirms"],
      description=(
          "A confirmed non-persistent message (delivery-mode 1) on a durable queue, clean broker restart"
      ),
      expectation="per profile: rabbitmq → the message is dropped (0 messages after restart); spec → no "
      "expectation (basic/04: the server MAY keep it), the count is recorded",
      expected={"rabbitmq": 0, "rabbitmq@quorum": 1},
      expected_sources={
          "rabbitmq@quorum": (
              "rabbitmq-quorum-queues#feature-matrix: a quorum queue keeps every message (persistence "
              "is always on); measured on RabbitMQ 3.10.8: 1 message after restart"
          ),
          "rabbitmq": "RabbitMQ: transient messages are not recovered from durable classic queues; "
          "measured on RabbitMQ 3.10.8 (0 after a clean restart)",
      },
      needs_restart=True)
def test_non_persistent_on_durable_queue(amqp, ctx, restartable, queue_type) -> None:
    url = restartable.url
    _, q = _confirmed_on_durable_queue(amqp, ctx, url, b"transient message", persistent=False)
    with restarted(amqp, restartable, queues=(q,)):
        exists, ready = _queue_state(amqp, url, q)
        if not exists:
            raise Mismatch("durable queue after restart", expected="the durable queue exists",
                           observed="queue deleted (404)")
        if ctx.expected is MISSING:
            ctx.informational(f"{ready} non-persistent message(s) kept after restart")
        else:
            ctx.check_profile(ready, "non-persistent messages kept after restart")


# -- client libraries -----------------------------------------------------------------------------


@case("durability.aio-pika-persistent-survives-restart", rules=["basic/01", "queue.declare/persistence"],
      sources=[ACK_LATENCY], level=Level.SHOULD, client="aio-pika", requires=["publisher_confirms"],
      description="aio-pika: durable queue, publish(DeliveryMode.PERSISTENT) on a confirming channel, clean "
                  "broker restart, then queue.get()",
      expectation="the message is there after the restart, body and delivery-mode 2 intact",
      needs_restart=True)
def test_aio_pika_persistent_survives(amqp, ctx, restartable, queue_type) -> None:
    import aio_pika

    from conformance.verify import aio_pika_session, run_async

    url = restartable.url
    q = ctx.name("q")

    async def publish() -> None:
        async with aio_pika_session(url, ctx.timeout) as conn:
            channel = await conn.channel(publisher_confirms=True)
            await channel.declare_queue(q, **ctx.declare_fields(durable=True))
            await channel.default_exchange.publish(
                aio_pika.Message(b"kept by aio-pika", delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=q)  # returns once the broker confirmed it

    async def fetch() -> Any:
        async with aio_pika_session(url, ctx.timeout) as conn:
            channel = await conn.channel()
            queue = await channel.declare_queue(q, **ctx.declare_fields(durable=True))
            message = await queue.get(no_ack=True, fail=False)
            return None if message is None else (message.body, int(message.delivery_mode))

    run_async(publish(), ctx.timeout, "aio-pika confirmed persistent publish")
    with restarted(amqp, restartable, queues=(q,)):
        got = run_async(fetch(), ctx.timeout, "aio-pika get after restart")
        ctx.check(got, (b"kept by aio-pika", 2), "(body, delivery-mode) after restart")


@case(
    "durability.pika-confirmed-survives-kill", rules=["basic/01"], sources=[ACK_LATENCY, GUARANTEED],
    level=Level.MUST, client="pika", requires=["publisher_confirms"],
    description="pika: confirm_delivery(), three persistent basic_publish to a durable queue (each "
    "confirmed), "
    "then the broker is killed with SIGKILL and started again",
    expectation="all three confirmed messages are there after the crash ('basic.ack for a persistent message "
    "routed to a durable queue will be sent after persisting the message to disk')",
    needs_restart=True,
)
def test_pika_confirmed_survives_kill(amqp, ctx, restartable) -> None:
    import pika

    from conformance.verify import pika_session

    url = restartable.url
    q = ctx.name("q")
    sent = [b"c1", b"c2", b"c3"]
    with pika_session(url, ctx.timeout, "pika durable queue") as conn:
        conn.channel().queue_declare(q, durable=True)
    restartable.settle_topology()  # the crash below tests the confirms, not the declaration
    with pika_session(url, ctx.timeout, "pika confirmed publishes") as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for body in sent:  # each basic_publish returns only once the broker confirmed it
            ch.basic_publish("", q, body, pika.BasicProperties(delivery_mode=2))
    with restarted(amqp, restartable, queues=(q,), kill=True):
        got: list[bytes] = []
        with pika_session(url, ctx.timeout, "pika basic_get after the crash") as conn:
            ch = conn.channel()
            for _ in range(len(sent) + 1):
                method, _props, body = ch.basic_get(q, auto_ack=True)
                if method is None:
                    break
                got.append(body)
        ctx.check(got, sent, "confirmed messages after kill -9 and restart")
