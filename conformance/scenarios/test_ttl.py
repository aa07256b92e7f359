"""Time-to-live: per-message TTL (the ``expiration`` property), per-queue message TTL
(``x-message-ttl``, 0 included) and queue expiry (``x-expires``).

Document: RabbitMQ's Time-To-Live and Expiration guide (``rabbitmq-ttl``): expired messages are
never delivered nor got; the lower of a queue's and a message's TTL wins; TTL 0 expires a message
unless it can be delivered at once; an unused queue is deleted once its expiry has passed. Each
case sets a short TTL and waits at most that TTL plus the settle window; what it then observes is
the behaviour (a message gone, a queue gone), so a broker that accepts the arguments and ignores
them FAILs, and one that refuses them is UNSUPPORTED with its answer.
"""

from __future__ import annotations

import time

from pamqp import commands as spec

from conformance.model.cases import Level, case
from conformance.verify import expect_passive_missing
from conformance.verify import extensions as ext

PER_MESSAGE = "rabbitmq-ttl#per-message-ttl-in-publishers"
PER_QUEUE = "rabbitmq-ttl#per-queue-message-ttl"
TTL_ZERO = "rabbitmq-ttl#ttl-zero"
QUEUE_TTL = "rabbitmq-ttl#queue-ttl"
TTL = 300  # ms: short, so a case waits little; long enough to publish and confirm first
CLASSIC = ("classic",)
PREMISE = "declares its own classic queues with TTL arguments (the TTL rules are the queue type's)"


def _bodies_left(ch, q: str) -> list[tuple[str, str | None]]:
    got = []
    while (ev := ch.get(q, no_ack=True)) is not None:
        got.append(((ev.body or b"").decode(), ev.properties.expiration if ev.properties else None))
    return got


@case("ttl.message-expiration-expires", wedges=True, sources=[PER_MESSAGE, PER_QUEUE], level=Level.EXTENSION,
      queue_types=CLASSIC, premise=PREMISE,
      description=f"Two messages published to a plain queue: m1 with expiration '{TTL}', then m2 without one",
      expectation=f"after {TTL} ms (plus the settle window) basic.get finds m2 only (no expiration "
      "property); m1 is never got")
def test_message_expiration(isolated, ctx):
    ch = isolated.channel()
    q = isolated.queue(ctx.name("q"))
    ext.declare_queue_ext(ch, q, {}, "a plain queue")
    ext.send_confirmed(ch, "", [(q, b"m1", ext.props(expiration=str(TTL))), (q, b"m2", None)])
    ctx.observe("count when expired", ext.count_drops_to(ch, q, 1, ext.settle_for(TTL, ctx.timeout)))
    ctx.check(_bodies_left(ch, q), [("m2", None)], "messages got after the TTL (body, expiration)")


@case("ttl.lower-of-queue-and-message-wins", wedges=True, sources=[PER_MESSAGE], level=Level.EXTENSION,
      queue_types=CLASSIC, premise=PREMISE,
      description=f"Queue A: x-message-ttl 60000, a message with expiration '{TTL}'; queue B: x-message-ttl "
      f"{TTL}, a message with expiration '60000'; a third message without expiration in each",
      expectation=f"after {TTL} ms (plus the settle window) both TTL'd messages are gone (the lower TTL "
      "applied in each queue) and only the plain message is got from each")
def test_lower_ttl_wins(isolated, ctx):
    ch = isolated.channel()
    qa, qb = isolated.queue(ctx.name("qa")), isolated.queue(ctx.name("qb"))
    ext.declare_queue_ext(ch, qa, {"x-message-ttl": 60000}, "x-message-ttl")
    ext.declare_queue_ext(ch, qb, {"x-message-ttl": TTL}, "x-message-ttl")
    ext.send_confirmed(ch, "", [(qa, b"a-short", ext.props(expiration=str(TTL))),
                                (qb, b"b-long", ext.props(expiration="60000"))])
    # the plain messages, published after: B's queue TTL is also theirs, so they are got at once
    wait = ext.settle_for(TTL, ctx.timeout)
    ctx.observe("counts when expired",
                [ext.count_drops_to(ch, qa, 0, wait), ext.count_drops_to(ch, qb, 0, 0)])
    ctx.check({"A (message TTL lower)": _bodies_left(ch, qa), "B (queue TTL lower)": _bodies_left(ch, qb)},
              {"A (message TTL lower)": [], "B (queue TTL lower)": []},
              "messages left after the lower TTL")


@case("ttl.queue-message-ttl-expires", sources=[PER_QUEUE], level=Level.EXTENSION, queue_types=CLASSIC,
      wedges=True, premise=PREMISE,
      description=f"A queue declared with x-message-ttl {TTL}; m1 published (confirmed), then after the TTL "
      "m2 published",
      expectation="m1 is gone after the TTL (plus the settle window): basic.get finds m2 only, with no "
      "expiration property added")
def test_queue_message_ttl(isolated, ctx):
    ch = isolated.channel()
    q = isolated.queue(ctx.name("q"))
    ext.declare_queue_ext(ch, q, {"x-message-ttl": TTL}, "x-message-ttl")
    ext.send_confirmed(ch, "", [(q, b"m1", None)])
    ctx.observe("count when expired", ext.count_drops_to(ch, q, 0, ext.settle_for(TTL, ctx.timeout)))
    ext.send_confirmed(ch, "", [(q, b"m2", None)])
    ctx.check(_bodies_left(ch, q), [("m2", None)], "messages got (body, expiration)")


@case("ttl.queue-message-ttl-zero", sources=[TTL_ZERO], level=Level.EXTENSION, queue_types=CLASSIC,
      wedges=True, premise=PREMISE,
      description="A queue declared with x-message-ttl 0: m1 published with no consumer; then a consumer "
      "starts and m2 is published",
      expectation="m1 is expired on arrival (basic.get-empty; the count is 0); m2 is delivered to the "
      "consumer at once")
def test_queue_message_ttl_zero(isolated, ctx):
    ch = isolated.channel()
    q = isolated.queue(ctx.name("q"))
    ext.declare_queue_ext(ch, q, {"x-message-ttl": 0}, "x-message-ttl 0")
    ext.send_confirmed(ch, "", [(q, b"m1", None)])
    first = ch.get(q, no_ack=True)
    ctx.check(None if first is None else (first.body or b"").decode(), None, "basic.get right after m1")
    ctx.check(ch.message_count(q), 0, "messages in the queue")
    ch.consume(q, no_ack=True)
    ext.send_confirmed(ch, "", [(q, b"m2", None)])
    ev = ext.must_arrive(ch, ctx.timeout, "m2 delivered to the consumer", "basic.deliver of m2")
    ctx.check((ev.body, bool(ev.method.redelivered)), (b"m2", False), "delivery (body, redelivered)")


@case("ttl.queue-expires-deletes-unused", sources=[QUEUE_TTL], level=Level.EXTENSION, queue_types=CLASSIC,
      wedges=True, premise="x-expires on a transient classic queue (the guide: expiry makes sense there)",
      description=f"A queue declared with x-expires {TTL}, never used after its declaration; a second queue "
      "without x-expires beside it",
      expectation=f"after {TTL} ms (plus the settle window) a passive queue.declare of the first is "
      "channel.close 404 NOT_FOUND; the second still exists")
def test_queue_expires(isolated, ctx):
    ch = isolated.channel()
    q, keep = isolated.queue(ctx.name("q")), isolated.queue(ctx.name("keep"))
    ext.declare_queue_ext(ch, q, {"x-expires": TTL}, "x-expires")
    ext.declare_queue_ext(ch, keep, {}, "a plain queue")
    # No poll: a passive declare may count as use (RabbitMQ re-arms the expiry timer on it).
    time.sleep(ext.settle_for(TTL, ctx.timeout))
    ctx.check(ch.message_count(keep), 0, "the queue without x-expires (passive declare answers)")
    expect_passive_missing(ch, spec.Queue.Declare(queue=q, passive=True), "the expired queue, passively")
