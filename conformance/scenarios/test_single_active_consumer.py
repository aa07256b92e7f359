"""Single active consumer: queues declared with ``x-single-active-consumer: true``.

Document: RabbitMQ's Consumers guide, Single Active Consumer (``rabbitmq-consumers``): "The very
first registered consumer become the single active consumer: messages are dispatched to it and the
other consumers are ignored"; "If the active consumer is cancelled or disconnects, another
registered consumer takes its place". A broker that accepts the argument and ignores it dispatches
round robin and FAILs; one that refuses it is UNSUPPORTED with its answer.
"""

from __future__ import annotations

import time

from conformance.model.cases import Level, case
from conformance.verify import expect_no_delivery, quiet_window
from conformance.verify import extensions as ext

SAC = "rabbitmq-consumers#single-active-consumer"


def _split(a, b, n: int, within: float) -> dict[str, list]:
    """The deliveries to A and to B until ``n`` arrived in all or ``within`` seconds passed: a
    broker that shares them out (round robin) is seen doing so, not waited out."""
    got: dict[str, list] = {"A": [], "B": []}
    deadline = time.monotonic() + within
    while len(got["A"]) + len(got["B"]) < n and time.monotonic() < deadline:
        for name, ch in (("A", a), ("B", b)):
            ev = ext.delivery_within(ch, 0.05, f"a delivery to {name}")
            if ev is not None:
                got[name].append(ev)
    return got


@case("single_active_consumer.second-idle-until-first-cancels", sources=[SAC], level=Level.EXTENSION,
      wedges=True, queue_types=("classic",), premise="declares its own queue with x-single-active-consumer",
      description="A queue with x-single-active-consumer true; consumer A (first) and consumer B on two "
      "connections; m1, m2, m3 published; A acks and cancels; m4 published",
      expectation="A gets m1..m3 and B nothing while A is registered (queue.declare-ok counts 2 consumers); "
      "after A's cancel B gets m4, with its own consumer tag")
def test_second_idle_until_first_cancels(isolated, ctx):
    a = isolated.channel()
    b = isolated.channel()
    q = isolated.queue(ctx.name("q"))
    ext.declare_queue_ext(a, q, {"x-single-active-consumer": True}, "x-single-active-consumer")
    tag_a = a.consume(q, consumer_tag="sac-a")
    tag_b = b.consume(q, consumer_tag="sac-b")
    ok = a.declare_queue(q, passive=True)
    ctx.check((int(ok.message_count), int(ok.consumer_count)), (0, 2),
              "queue.declare-ok (messages, consumers) with both registered")
    ext.send_confirmed(a, "", [(q, f"m{i}".encode(), None) for i in (1, 2, 3)])
    got = _split(a, b, 3, ctx.timeout)
    if not got["B"]:
        expect_no_delivery(b, quiet_window(ctx.timeout), what="deliveries to the second consumer while "
                                                              "A is active")
    ctx.check({k: [((e.body or b"").decode(), e.method.consumer_tag) for e in evs] for k, evs in got.items()},
              {"A": [("m1", tag_a), ("m2", tag_a), ("m3", tag_a)], "B": []},
              "deliveries per consumer while A is registered (body, consumer tag)")
    got_a = got["A"]
    a.ack(int(got_a[-1].method.delivery_tag), multiple=True)
    a.cancel(tag_a)
    ext.send_confirmed(a, "", [(q, b"m4", None)])
    ev = ext.must_arrive(b, ctx.timeout, "m4 to the second consumer after A's cancel",
                         "basic.deliver of m4 to B")
    ctx.check(((ev.body or b"").decode(), ev.method.consumer_tag, bool(ev.method.redelivered)),
              ("m4", tag_b, False), "delivery to B (body, consumer tag, redelivered)")
