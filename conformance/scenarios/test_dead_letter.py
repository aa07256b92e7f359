"""Dead-lettering: ``x-dead-letter-exchange``, ``x-dead-letter-routing-key``, the ``x-death``
entry of each reason (rejected, expired, maxlen, delivery_limit), ``x-first-death-*`` and the
cycle rule.

Document: RabbitMQ's Dead Letter Exchanges guide (``rabbitmq-dlx``): the four events that
dead-letter a message; routing by the queue's dead-letter routing key or else the message's own
keys (CC included); the effects on the message (CC removed when the key is replaced, BCC never
kept, the x-death entry's fields count, reason, queue, time, exchange, routing-keys and, for an
expired message, original-expiration — its expiration removed); the x-first-death-* headers; cycles
"dropped if there was no rejection in the entire cycle". Each case checks the whole entry.
"""

from __future__ import annotations

import time
from typing import Any

from conformance.model.cases import Level, case
from conformance.verify import expect_no_delivery, quiet_window
from conformance.verify import extensions as ext

OVERVIEW = "rabbitmq-dlx#overview"
ROUTING = "rabbitmq-dlx#routing"
EFFECTS = "rabbitmq-dlx#effects"
ARGS = "rabbitmq-dlx#overview"
TTL_DL = "rabbitmq-ttl#message-ttl-dead-lettering"
MAXLEN = "rabbitmq-maxlength#overflow"
POISON = "rabbitmq-quorum-queues#poison-message-handling"
CLASSIC = ("classic",)
PREMISE = "declares its own source and dead-letter queues (classic)"
DLX_ARG = "the x-dead-letter-exchange argument"


def _source(ch, ctx, iso, args: dict[str, Any], *, dlx_type: str = "fanout",
            dlq_key: str = "") -> tuple[str, str, str, str]:
    """Exchange ``x`` (direct) → queue ``src`` (key k, ``args`` + x-dead-letter-exchange ``dlx``
    of ``dlx_type``) and ``dlq`` bound to ``dlx`` by ``dlq_key``; returns (x, src, dlx, dlq)."""
    x, dlx = iso.exchange(ctx.name("x")), iso.exchange(ctx.name("dlx"))
    src, dlq = iso.queue(ctx.name("src")), iso.queue(ctx.name("dlq"))
    ch.declare_exchange(x, "direct")
    ch.declare_exchange(dlx, dlx_type)
    ch.declare_queue(dlq)
    ch.bind(dlq, dlx, dlq_key)
    ext.declare_queue_ext(ch, src, {"x-dead-letter-exchange": dlx, **args}, DLX_ARG)
    ch.bind(src, x, "k")
    return x, src, dlx, dlq


#: the death headers besides x-death a case expects (its default; the release profile data may
#: name the other, keyed by the RabbitMQ release that added x-last-death-*)
FIRST_ONLY = "x-first-death-* headers"
LAST_TOO = "x-first-death-* and x-last-death-* headers"


def _entry(reason: str, queue: str, exchange: str, keys: list[str], **more: Any) -> dict[str, Any]:
    return {"count": 1, "reason": reason, "queue": queue, "time": "timestamp during the case",
            "exchange": exchange, "routing-keys": keys, **more}


def _check_dead(ctx, dead, since: float, *, exchange: str, routing_key: str, deaths: list[dict[str, Any]],
                headers: dict[str, Any], expiration: str | None = None) -> None:
    """The dead-lettered delivery: its exchange and key, every x-death entry, the other headers.
    Which death headers beside x-death depends on the release (profile data, x-last-death-headers):
    from RabbitMQ 3.13 the latest death's x-last-death-* as well (here the one death there was)."""
    if ctx.expected == LAST_TOO:
        headers = {**headers, **{k.replace("first", "last"): v for k, v in headers.items()
                                 if k.startswith("x-first-death-")}}
    hdrs = ext.headers(dead)
    ctx.keep_release_value(LAST_TOO if any(k.startswith("x-last-death-") for k in hdrs) else FIRST_ONLY)
    entries = [ext.death_fields(e, since=since) for e in ext.x_death(dead)]
    others = {k: v for k, v in hdrs.items() if k != "x-death"}
    ctx.check({"exchange": dead.method.exchange, "routing key": dead.method.routing_key, "body": dead.body,
               "expiration": dead.properties.expiration if dead.properties else None,
               "x-death": entries, "other headers": others},
              {"exchange": exchange, "routing key": routing_key, "body": b"m",
               "expiration": expiration, "x-death": deaths, "other headers": headers},
              "the dead-lettered message")


def _dead(ch, dlq: str, ctx, within: float | None = None) -> Any:
    ch.consume(dlq, no_ack=True)
    return ext.must_arrive(ch, within or ctx.timeout, "the dead-lettered message",
                           "the message in the dead-letter queue")


@case("dead_letter.rejected-x-death", wedges=True, sources=[OVERVIEW, EFFECTS], level=Level.EXTENSION,
      default=FIRST_ONLY, queue_types=CLASSIC, premise=PREMISE,
      description="A message published to exchange x with key k and header CC=[k-cc] lands in a queue with a "
      "fanout dead-letter exchange; it is got and rejected with requeue=false",
      expectation="it arrives in the dead-letter queue (exchange dlx, key k, CC kept) with one x-death "
      "entry {count 1, reason rejected, queue src, time, exchange x, routing-keys [k, k-cc]} and "
      "x-first-death-reason/-queue/-exchange rejected/src/x")
def test_rejected(isolated, ctx):
    since = time.time()
    ch = isolated.channel()
    x, src, dlx, dlq = _source(ch, ctx, isolated, {})
    ext.send_confirmed(ch, x, [("k", b"m", ext.props(headers={"CC": ["k-cc"]}))])
    ev = ch.get(src)
    ctx.check(ev is not None, True, "the message got from the source queue")
    ch.reject(int(ev.method.delivery_tag), requeue=False)
    dead = _dead(ch, dlq, ctx)
    _check_dead(ctx, dead, since, exchange=dlx, routing_key="k",
                deaths=[_entry("rejected", src, x, ["k", "k-cc"])],
                headers={"CC": ["k-cc"], "x-first-death-reason": "rejected", "x-first-death-queue": src,
                         "x-first-death-exchange": x})
    ctx.check(ch.message_count(src), 0, "messages left in the source queue")


@case("dead_letter.expired-x-death", wedges=True, sources=[OVERVIEW, EFFECTS, TTL_DL], level=Level.EXTENSION,
      default=FIRST_ONLY, queue_types=CLASSIC, premise=PREMISE,
      description="A message with expiration '200' published to exchange x (key k) lands in a queue with a "
      "fanout dead-letter exchange and no consumer",
      expectation="after 200 ms it arrives in the dead-letter queue without an expiration property, with one "
      "x-death entry {count 1, reason expired, queue src, time, exchange x, routing-keys [k], "
      "original-expiration '200'} and x-first-death-* expired/src/x")
def test_expired(isolated, ctx):
    since = time.time()
    ch = isolated.channel()
    x, src, dlx, dlq = _source(ch, ctx, isolated, {})
    ext.send_confirmed(ch, x, [("k", b"m", ext.props(expiration="200"))])
    dead = _dead(ch, dlq, ctx, ext.settle_for(200, ctx.timeout))
    _check_dead(ctx, dead, since, exchange=dlx, routing_key="k",
                deaths=[_entry("expired", src, x, ["k"], **{"original-expiration": "200"})],
                headers={"x-first-death-reason": "expired", "x-first-death-queue": src,
                         "x-first-death-exchange": x})


@case("dead_letter.maxlen-x-death", wedges=True, sources=[OVERVIEW, EFFECTS, MAXLEN], level=Level.EXTENSION,
      default=FIRST_ONLY, queue_types=CLASSIC, premise=PREMISE,
      description="Two messages (m, then m2) published to exchange x (key k) into a queue with "
                  "x-max-length 1 "
      "and a fanout dead-letter exchange",
      expectation="m (the head) is dead-lettered with one x-death entry {count 1, reason maxlen, queue src, "
      "time, exchange x, routing-keys [k]} and x-first-death-* maxlen/src/x; the queue holds m2")
def test_maxlen(isolated, ctx):
    since = time.time()
    ch = isolated.channel()
    x, src, dlx, dlq = _source(ch, ctx, isolated, {"x-max-length": 1})
    ext.send_confirmed(ch, x, [("k", b"m", None), ("k", b"m2", None)])
    dead = _dead(ch, dlq, ctx)
    _check_dead(ctx, dead, since, exchange=dlx, routing_key="k",
                deaths=[_entry("maxlen", src, x, ["k"])],
                headers={"x-first-death-reason": "maxlen", "x-first-death-queue": src,
                         "x-first-death-exchange": x})
    kept = ch.get(src, no_ack=True)
    ctx.check(None if kept is None else kept.body, b"m2", "the message the queue kept")


@case("dead_letter.routing-key-replaces-keys", wedges=True, sources=[ROUTING, EFFECTS], level=Level.EXTENSION,
      default=FIRST_ONLY, queue_types=CLASSIC, premise=PREMISE,
      description="A queue with a direct dead-letter exchange and x-dead-letter-routing-key dl; behind the "
      "exchange queue dlq (key dl) and queue orig (keys k, k-cc); a message published with key k and "
      "CC=[k-cc] is rejected with requeue=false",
      expectation="dlq gets it with routing key dl and no CC header (x-death routing-keys still [k, k-cc]); "
      "orig gets nothing")
def test_routing_key(isolated, ctx):
    since = time.time()
    ch = isolated.channel()
    x, src, dlx, dlq = _source(ch, ctx, isolated, {"x-dead-letter-routing-key": "dl"}, dlx_type="direct",
                               dlq_key="dl")
    orig = isolated.queue(ctx.name("orig"))
    ch.declare_queue(orig)
    for key in ("k", "k-cc"):
        ch.bind(orig, dlx, key)
    ext.send_confirmed(ch, x, [("k", b"m", ext.props(headers={"CC": ["k-cc"]}))])
    ev = ch.get(src)
    ctx.check(ev is not None, True, "the message got from the source queue")
    ch.reject(int(ev.method.delivery_tag), requeue=False)
    dead = _dead(ch, dlq, ctx)
    _check_dead(ctx, dead, since, exchange=dlx, routing_key="dl",
                deaths=[_entry("rejected", src, x, ["k", "k-cc"])],
                headers={"x-first-death-reason": "rejected", "x-first-death-queue": src,
                         "x-first-death-exchange": x})
    ctx.check(ch.message_count(orig), 0, "messages in the queue bound by the original keys")


@case("dead_letter.rejection-cycle-counts", wedges=True, sources=[ROUTING, EFFECTS], level=Level.EXTENSION,
      default=FIRST_ONLY, queue_types=CLASSIC, premise=PREMISE,
      description="A queue whose dead-letter exchange is the default exchange with dead-letter routing key "
      "its own name; its message is got and rejected (requeue=false) twice",
      expectation="after each rejection the message is back in the queue (a cycle with a rejection is kept); "
      "the second time its x-death has one entry {count 2, reason rejected, queue q, exchange '', "
      "routing-keys [q]} and x-first-death-* rejected/q/''")
def test_rejection_cycle(isolated, ctx):
    since = time.time()
    ch = isolated.channel()
    q = isolated.queue(ctx.name("q"))
    ext.declare_queue_ext(ch, q, {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": q}, DLX_ARG)
    ext.send_confirmed(ch, "", [(q, b"m", None)])
    counts = []
    for i in range(3):
        deadline = time.monotonic() + ctx.timeout
        ev = ch.get(q)
        while ev is None and time.monotonic() < deadline:
            time.sleep(0.02)  # the rejected message is re-published asynchronously
            ev = ch.get(q)
        if ev is None:
            ctx.check(f"queue empty after rejection {i}", "the message back in the queue",
                      f"basic.get after rejection {i}")
            return
        deaths = ext.x_death(ev) if "x-death" in ext.headers(ev) else []
        counts.append([d.get("count") for d in deaths])
        if i < 2:
            ch.reject(int(ev.method.delivery_tag), requeue=False)
    ctx.observe("x-death counts per get", counts)
    _check_dead(ctx, ev, since, exchange="", routing_key=q,
                deaths=[{**_entry("rejected", q, "", [q]), "count": 2}],
                headers={"x-first-death-reason": "rejected", "x-first-death-queue": q,
                         "x-first-death-exchange": ""})


#: the republished case's default (RabbitMQ 3.10.8, measured; rabbitmq_releases.toml republished-x-death
#: names the 4.0 value): the x-death of the second dead-lettering as (reason, queue, count) entries
REPUBLISH_COUNTED = "x-death [(rejected, src, 2)]"


def _deaths(ev, src: str) -> str:
    """A delivery's x-death as (reason, queue, count) entries, the source queue named ``src``."""
    entries = [(d.get("reason"), "src" if d.get("queue") == src else d.get("queue"), d.get("count"))
               for d in ext.x_death(ev)]
    return "x-death [" + ", ".join(f"({r}, {q}, {c})" for r, q, c in entries) + "]"


@case("dead_letter.republished-x-death", wedges=True, sources=[EFFECTS], level=Level.EXTENSION,
      default=REPUBLISH_COUNTED, queue_types=CLASSIC, premise=PREMISE,
      description="A message is rejected (requeue=false) into the dead-letter queue; a client gets it "
      "there and publishes it again, x-death and all its headers as got, to the same exchange and key; "
      "got from the source queue and rejected again",
      expectation="the first dead-lettering gives x-death [(rejected, src, 1)]; the second: rabbitmq before "
      "4.0 interprets the republished x-death and counts its entry on ([(rejected, src, 2)]); from 4.0 a "
      "(re-)published x-death is not interpreted (profile data keyed by release); x-first-death-* stay "
      "rejected / src / x",
      expected_sources={"rabbitmq": "RabbitMQ 3.10.8 (measured: rabbit_dead_letter updates the x-death "
                                    "the message carries); 4.0: rabbitmq_releases.toml republished-x-death"})
def test_republished_x_death(isolated, ctx):
    ch = isolated.channel()
    x, src, dlx, dlq = _source(ch, ctx, isolated, {})
    ext.send_confirmed(ch, x, [("k", b"m", None)])
    ch.consume(dlq, no_ack=True)
    seen = []
    for turn in ("first", "second"):
        ev = ch.get(src)
        ctx.check(None if ev is None else ev.body, b"m", f"the message got from src ({turn} time)")
        ch.reject(int(ev.method.delivery_tag), requeue=False)
        dead = ext.must_arrive(ch, ctx.timeout, f"the {turn} dead-lettered copy", "the message in dlq")
        ctx.check((dead.method.exchange, dead.method.routing_key, dead.body), (dlx, "k", b"m"),
                  f"(exchange, routing key, body) of the {turn} dead-lettered copy")
        seen.append(_deaths(dead, src))
        if turn == "first":
            ctx.check(seen[0], "x-death [(rejected, src, 1)]", "x-death of the first dead-lettering")
            ext.send_confirmed(ch, x, [("k", b"m", dead.properties)])  # republished as got
    firsts = {k: v for k, v in ext.headers(dead).items() if k.startswith("x-first-death-")}
    ctx.check(firsts, {"x-first-death-reason": "rejected", "x-first-death-queue": src,
                       "x-first-death-exchange": x}, "x-first-death-* of the second copy")
    ctx.check(ch.message_count(src), 0, "messages left in the source queue")
    ctx.check_profile(seen[1], "x-death of the second dead-lettering")


@case("dead_letter.expiry-cycle-dropped", sources=[ROUTING], level=Level.EXTENSION, queue_types=CLASSIC,
      wedges=True, premise=PREMISE,
      description="Queue src (x-message-ttl 200) dead-letters to a fanout exchange bound to src "
                  "itself and to "
      "an observer queue; one message published to src",
      expectation="the observer gets exactly one copy (x-death expired, count 1); the copy routed "
                  "back to src "
      "is dropped (a cycle without a rejection), so no second copy follows and src stays empty")
def test_expiry_cycle(isolated, ctx):
    ch = isolated.channel()
    fx = isolated.exchange(ctx.name("fx"))
    src, obs = isolated.queue(ctx.name("src")), isolated.queue(ctx.name("obs"))
    ch.declare_exchange(fx, "fanout")
    ch.declare_queue(obs)
    ext.declare_queue_ext(ch, src, {"x-message-ttl": 200, "x-dead-letter-exchange": fx}, DLX_ARG)
    ch.bind(obs, fx)
    ch.bind(src, fx)
    ext.send_confirmed(ch, "", [(src, b"m", None)])
    ch.consume(obs, no_ack=True)
    first = ext.must_arrive(ch, ext.settle_for(200, ctx.timeout), "the first dead-lettered copy",
                            "one copy in the observer queue")
    ctx.check([(d.get("reason"), d.get("queue"), d.get("count")) for d in ext.x_death(first)],
              [("expired", src, 1)], "x-death (reason, queue, count) of the copy")
    expect_no_delivery(ch, ext.settle_for(200, ctx.timeout) + quiet_window(ctx.timeout),
                       what="a second copy (the message cycling)")
    ctx.check(ch.message_count(src), 0, "messages in src")


@case("dead_letter.delivery-limit-x-death", sources=[OVERVIEW, EFFECTS, POISON], level=Level.EXTENSION,
      wedges=True,
      premise="declares its own quorum queue (x-queue-type quorum, durable): delivery limits are a quorum "
      "queue's", queue_types=CLASSIC,
      description="A quorum queue with x-delivery-limit 1 and a fanout dead-letter exchange; its message "
      "(published to x with key k) is got and rejected with requeue twice",
      expectation="the second get carries x-delivery-count 1; the second reject dead-letters it with "
                  "one x-death "
      "entry {count 1, reason delivery_limit, queue src, time, exchange x, routing-keys [k]}")
def test_delivery_limit(isolated, ctx):
    since = time.time()
    ch = isolated.channel()
    x, dlx = isolated.exchange(ctx.name("x")), isolated.exchange(ctx.name("dlx"))
    src, dlq = isolated.queue(ctx.name("src")), isolated.queue(ctx.name("dlq"))
    ch.declare_exchange(x, "direct")
    ch.declare_exchange(dlx, "fanout")
    ch.declare_queue(dlq)
    ch.bind(dlq, dlx)
    ext.declare_queue_ext(ch, src, {"x-queue-type": "quorum", "x-delivery-limit": 1,
                                    "x-dead-letter-exchange": dlx}, "a quorum queue with x-delivery-limit",
                          durable=True)
    ch.bind(src, x, "k")
    ext.send_confirmed(ch, x, [("k", b"m", None)])
    counts = []
    for i in range(2):
        ev = ch.get(src)
        if ev is None:
            ctx.check("basic.get-empty", "the message", f"get {i + 1} of the message")
            return
        counts.append(ext.headers(ev).get("x-delivery-count", "no x-delivery-count header"))
        # basic.reject: a failed delivery on every release (from 4.3 a basic.nack is not counted:
        # queue_types.nack-requeue-not-counted)
        ch.reject(int(ev.method.delivery_tag), requeue=True)
    ctx.check(counts[1], 1, "x-delivery-count of the second get")
    dead = _dead(ch, dlq, ctx)
    deaths = [ext.death_fields(e, since=since) for e in ext.x_death(dead)]
    ctx.check(deaths, [_entry("delivery_limit", src, x, ["k"])], "x-death of the dead-lettered message")
    ctx.check(ch.message_count(src), 0, "messages left in the quorum queue")
