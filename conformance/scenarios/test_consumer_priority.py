"""Consumer priorities: RabbitMQ's ``x-priority`` argument of ``basic.consume``.

Documents: RabbitMQ's consumer priority guide (``rabbitmq-consumer-priority``): messages go to the
active consumers of the highest priority; a lower-priority consumer receives messages only while
every higher one is blocked (for instance by its prefetch limit); consumers of equal priority take
turns. Measured on RabbitMQ 3.10.8 with the raw client.
"""

from __future__ import annotations

from conformance.model.cases import Level, case
from conformance.verify import drain_confirms

DEFINITION = "rabbitmq-consumer-priority#definition"
HOW = "rabbitmq-consumer-priority#how-to-use"
RMQ = "DESIGN.md#facts-measured-on-rabbitmq-3-10-8"


@case("consumer_priority.higher-first-until-blocked", sources=[DEFINITION, HOW, RMQ], level=Level.EXTENSION,
      requires=["consumer_priorities"],
      description="basic.qos prefetch 2 (per consumer); a consumer with x-priority 1 attaches, then one with "
      "x-priority 5; five messages are published",
      expectation="the x-priority 5 consumer gets messages 1 and 2, the x-priority 1 consumer (the other is "
      "then blocked by its prefetch) gets 3 and 4; message 5 stays queued")
def test_higher_first_until_blocked(declared_queue, ctx):
    ch, q = declared_queue()
    ch.qos(2)
    low = ch.consume(q, consumer_tag=ctx.name("low"), arguments={"x-priority": 1})
    high = ch.consume(q, consumer_tag=ctx.name("high"), arguments={"x-priority": 5})
    pub = ch.conn.channel()
    pub.confirm_select()
    last = 0
    for i in range(1, 6):
        last = pub.publish("", q, f"m{i}".encode())
    drain_confirms(pub, last)
    names = {low: "low", high: "high"}
    got = [(names.get(str(e.method.consumer_tag), "?"), (e.body or b"").decode()) for e in ch.deliveries(4)]
    ctx.check(got, [("high", "m1"), ("high", "m2"), ("low", "m3"), ("low", "m4")],
              "(consumer, body) of the deliveries")
    ctx.check(pub.message_count(q), 1, "messages still queued")
