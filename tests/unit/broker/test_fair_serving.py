"""Fair serving: bounded dispatch bursts and delivery pause while a client's socket is full.

The asyncio shell installs a dispatch scheduler; here a list stands in for the event loop.
"""

from __future__ import annotations

from typing import Any

from pamqp import commands as spec

from conformance.broker.model import Broker

from .link import Content, FakeClock, Link


def _deliveries(link: Link) -> list[Any]:
    return [
        o for o in link.take_objs() if isinstance(o, Content) and isinstance(o.method, spec.Basic.Deliver)
    ]


def _with_scheduler(broker: Broker, burst: int) -> list[int]:
    turns: list[int] = []
    broker.dispatch_burst = burst
    broker.dispatch_scheduler = lambda: turns.append(1)
    return turns


def test_without_a_scheduler_a_queue_hands_out_everything_at_once(broker: Broker) -> None:
    link = Link(broker)
    link.declare("q")
    for i in range(10):
        link.publish(f"m{i}".encode(), routing_key="q")
    link.rpc(spec.Basic.Consume(queue="q", consumer_tag="c", no_ack=True), spec.Basic.ConsumeOk)
    assert len(_deliveries(link)) == 10


def test_a_long_queue_is_served_in_bursts_and_in_order(broker: Broker) -> None:
    turns = _with_scheduler(broker, burst=4)
    link = Link(broker)
    link.declare("q")
    for i in range(10):
        link.publish(f"m{i}".encode(), routing_key="q")
    link.rpc(spec.Basic.Consume(queue="q", consumer_tag="c", no_ack=True), spec.Basic.ConsumeOk)
    got = _deliveries(link)
    assert len(got) == 4 and turns == [1]
    while turns:
        turns.clear()
        broker.run_deferred_dispatch()
        got += _deliveries(link)
    assert [c.body for c in got] == [f"m{i}".encode() for i in range(10)]
    assert [c.method.delivery_tag for c in got] == list(range(1, 11))


def test_two_long_queues_take_turns(broker: Broker) -> None:
    turns = _with_scheduler(broker, burst=3)
    a, b = Link(broker), Link(broker)
    for link, q in ((a, "qa"), (b, "qb")):
        link.declare(q)
        for _ in range(9):
            link.publish(b"x", routing_key=q)
    a.rpc(spec.Basic.Consume(queue="qa", consumer_tag="a", no_ack=True), spec.Basic.ConsumeOk)
    b.rpc(spec.Basic.Consume(queue="qb", consumer_tag="b", no_ack=True), spec.Basic.ConsumeOk)
    counts = [(len(_deliveries(a)), len(_deliveries(b)))]
    while turns:
        turns.clear()
        broker.run_deferred_dispatch()
        counts.append((len(_deliveries(a)), len(_deliveries(b))))
    assert counts == [(3, 3), (3, 3), (3, 3)]


def test_a_deleted_queue_is_not_dispatched_again(broker: Broker) -> None:
    turns = _with_scheduler(broker, burst=2)
    link = Link(broker)
    link.declare("q")
    for _ in range(5):
        link.publish(b"x", routing_key="q")
    link.rpc(spec.Basic.Consume(queue="q", consumer_tag="c", no_ack=True), spec.Basic.ConsumeOk)
    assert len(_deliveries(link)) == 2 and turns
    link.rpc(spec.Queue.Delete(queue="q"), spec.Queue.DeleteOk)
    link.take()
    broker.run_deferred_dispatch()
    assert _deliveries(link) == []


def test_a_congested_connection_gets_no_deliveries_until_relieved(broker: Broker) -> None:
    link = Link(broker)
    link.declare("q")
    link.rpc(spec.Basic.Consume(queue="q", consumer_tag="c", no_ack=True), spec.Basic.ConsumeOk)
    link.core.set_congested(True)
    for _ in range(3):
        link.publish(b"x", routing_key="q")
    assert _deliveries(link) == []
    # replies still flow while deliveries wait in the queue
    assert link.declare("q", passive=True).message_count == 3
    link.core.set_congested(False)
    assert len(_deliveries(link)) == 3
    assert link.declare("q", passive=True).message_count == 0


def test_a_congested_consumer_does_not_hold_up_another_connection(broker: Broker) -> None:
    slow, fast = Link(broker), Link(broker)
    slow.declare("q")
    slow.rpc(spec.Basic.Consume(queue="q", consumer_tag="slow", no_ack=True), spec.Basic.ConsumeOk)
    fast.rpc(spec.Basic.Consume(queue="q", consumer_tag="fast", no_ack=True), spec.Basic.ConsumeOk)
    slow.core.set_congested(True)
    for _ in range(4):
        slow.publish(b"x", routing_key="q")
    assert _deliveries(slow) == [] and len(_deliveries(fast)) == 4


def test_a_lone_no_ack_consumer_gets_its_run_in_order_around_an_expired_message(
    broker: Broker, clock: FakeClock
) -> None:
    # A lone no-ack consumer is handed a run of messages at once; a run stops before an expired
    # message, which is expired (dead-lettered) as the per-message loop would, and goes on after.
    link = Link(broker)
    link.declare("dlq")
    link.declare("q", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    for i in range(6):
        link.publish(f"m{i}".encode(), routing_key="q", **({"expiration": "10"} if i in (2, 3) else {}))
    clock.advance(1)
    link.rpc(spec.Basic.Consume(queue="q", consumer_tag="c", no_ack=True), spec.Basic.ConsumeOk)
    got = _deliveries(link)
    assert [c.body for c in got] == [b"m0", b"m1", b"m4", b"m5"]
    assert [c.method.delivery_tag for c in got] == [1, 2, 3, 4]
    assert link.declare("dlq", passive=True).message_count == 2


def test_a_run_to_a_quorum_queue_consumer_carries_the_delivery_count(broker: Broker) -> None:
    link = Link(broker)
    link.declare("q", durable=True, arguments={"x-queue-type": "quorum"})
    for body in (b"m1", b"m2"):
        link.publish(body, routing_key="q")
    link.get("q")  # m1 goes out with an ack pending ...
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=True))  # ... and returns (to the back)
    link.take()
    link.rpc(spec.Basic.Consume(queue="q", consumer_tag="c", no_ack=True), spec.Basic.ConsumeOk)
    got = _deliveries(link)
    assert [(c.body, c.method.redelivered, c.properties.headers) for c in got] == [
        (b"m2", False, None), (b"m1", True, {"x-delivery-count": 1})]
