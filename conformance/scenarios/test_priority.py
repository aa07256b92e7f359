"""Message priority: the spec's basic class rules on priority levels.

Covers ``basic/06`` (at least two priority levels, 0-4 and 5-9). RabbitMQ implements priorities
only for queues declared with the ``x-max-priority`` argument; a plain queue delivers in
publication order whatever the priority property says (measured on RabbitMQ 3.10.8), so the
expected order is profile data.
"""

from __future__ import annotations

from pamqp import commands as spec

from conformance.model.cases import Level, case
from conformance.protocol import RawChannel
from conformance.verify import drain_confirms

LOW_HIGH = ((b"low-0", 0), (b"low-1", 1), (b"high-9", 9), (b"high-5", 5))


def _publish_and_drain(ch: RawChannel, q: str, messages=LOW_HIGH) -> list[bytes]:
    ch.confirm_select()
    for body, prio in messages:
        last = ch.publish("", q, body, properties=spec.Basic.Properties(priority=prio))
    drain_confirms(ch, last)
    got: list[bytes] = []
    while (ev := ch.get(q, no_ack=True)) is not None:
        got.append(ev.body or b"")
    return got


@case("priority.two-levels-plain-queue", rules=["basic/06"], level=Level.MUST,
      description="Four messages with priorities 0, 1, 9, 5 published to a queue declared without arguments, "
      "then fetched with basic.get",
      expectation="spec: the 5-9 level before the 0-4 level; rabbitmq: publication order (priorities need "
      "x-max-priority)",
      expected={
          "spec": ["high-9", "high-5", "low-0", "low-1"],
          "rabbitmq": ["low-0", "low-1", "high-9", "high-5"],
      },
      expected_sources={
          "spec": "basic/06: priorities 0-4 and 5-9 are treated as two distinct levels; basic/08: same "
          "priority in publication order",
          "rabbitmq": (
              "measured on RabbitMQ 3.10.8: a queue without x-max-priority delivers in publication order"
          ),
      })
def test_two_priority_levels(declared_queue, ctx):
    ch, q = declared_queue()
    got = [b.decode() for b in _publish_and_drain(ch, q)]
    ctx.check_profile(got, "order of basic.get")


#: three normal-priority messages, then four high-priority ones
NORMAL_THEN_HIGH = ((b"n0", 0), (b"n1", 0), (b"n2", 0), (b"h0", 9), (b"h1", 9), (b"h2", 9), (b"h3", 9))


@case("priority.two-levels-share", rules=["basic/06", "basic/08"], level=Level.MUST,
      description="Three messages of priority 0 (n0-n2), then four of priority 9 (h0-h3), published to a "
      "queue declared without arguments, then fetched with basic.get",
      expectation="spec: the 5-9 level first, each level in publication order (h0-h3, n0-n2); rabbitmq: "
      "publication order, except quorum queues from RabbitMQ 4.0: high before normal at a ratio of 2:1, an "
      "older normal message taking every third turn (h0 h1 n0 h2 h3 n1 n2; profile data keyed by release)",
      expected={
          "spec": ["h0", "h1", "h2", "h3", "n0", "n1", "n2"],
          "rabbitmq": ["n0", "n1", "n2", "h0", "h1", "h2", "h3"],
      },
      expected_sources={
          "spec": "basic/06: priorities 0-4 and 5-9 are two distinct levels; basic/08: same priority in "
          "publication order",
          "rabbitmq": "measured on RabbitMQ 3.10.8: a queue without x-max-priority delivers in publication "
          "order; 4.0 quorum queues: rabbitmq_releases.toml quorum-priorities",
      })
def test_two_levels_share(declared_queue, ctx):
    ch, q = declared_queue()
    got = [b.decode() for b in _publish_and_drain(ch, q, NORMAL_THEN_HIGH)]
    ctx.check_profile(got, "order of basic.get")
