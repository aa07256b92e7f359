"""Whole replies: every field of a reply that the scenario determines, checked at once.

Other modules check the field their case is named after; these cases check the rest of the same
replies — the fields a broker can get wrong while the headline behaviour looks right: the
exchange, routing key, redelivered flag, consumer tag, delivery tag, properties, headers and
body of basic.deliver / basic.get-ok / basic.return, and the counts of queue.declare-ok,
queue.purge-ok, queue.delete-ok and basic.get-ok. They are their own area ("replies") because
they cut across areas: a new field check should not hide inside a case about something else.

Covers: the spec XML's field definitions (amqp0-9-1.xml: basic.deliver / basic.get-ok /
basic.return fields "exchange: the name of the exchange that the message was originally
published to", "routing-key: the routing key name specified when the message was published",
the ``redelivered`` domain "this indicates that the message has been previously delivered",
basic.get-ok / queue.declare-ok / queue.purge-ok / queue.delete-ok ``message-count``,
queue.declare-ok ``consumer-count``, basic.consume / consume-ok / cancel-ok ``consumer-tag``),
the constant no-route (312), and the consumer acknowledgements chapter
(003_50388870ec53b6aa.txt: delivery tags start at 1 and increase by one per channel).
"""

from __future__ import annotations

from typing import Any

from pamqp import commands as spec

from conformance.model.cases import Level, case
from conformance.protocol import Event, RawChannel
from conformance.verify import Mismatch, fill, publish_confirmed

FIELDS = "amqp0-9-1.xml#basic.deliver/get-ok/return field definitions (exchange, routing-key, redelivered)"
COUNTS = "amqp0-9-1.xml#*-ok message-count / consumer-count field definitions"
TAGS = "003_50388870ec53b6aa.txt#the-delivery-tag"
CTAG = "amqp0-9-1.xml#basic.consume consumer-tag field: the identifier of the consumer"


def _props(n: int) -> spec.Basic.Properties:
    return spec.Basic.Properties(
        content_type="application/octet-stream",
        content_encoding="binary",
        headers={"x-amqpc-n": n, "x-amqpc-s": "kept", "x-amqpc-b": True},
        delivery_mode=2,
        priority=3,
        correlation_id=f"corr-{n}",
        reply_to="reply-here",
        message_id=f"msg-{n}",
        message_type="amqpc.test",
        app_id="amqp-conformance",
    )


def prop_view(p: spec.Basic.Properties | None) -> dict[str, Any]:
    """The properties a publisher set, as a comparable dict (unset ones omitted)."""
    if p is None:
        return {}
    names = ("content_type", "content_encoding", "headers", "delivery_mode", "priority", "correlation_id",
             "reply_to", "message_id", "message_type", "app_id")
    view = {n: getattr(p, n, None) for n in names}
    if view["headers"] is not None:
        view["headers"] = dict(view["headers"])
    return {k: v for k, v in view.items() if v not in (None, {})}


def _body(n: int) -> bytes:
    # binary with the bytes a text-minded broker could mangle, and long enough for two frames
    return bytes([0, 255, 13, 10]) + f"message {n} ".encode() * 600


def message_view(ev: Event) -> dict[str, Any]:
    """Every field of a basic.deliver / basic.get-ok / basic.return event, with its content."""
    m = ev.method
    view: dict[str, Any] = {"method": ev.name, "exchange": m.exchange, "routing_key": m.routing_key,
                            "properties": prop_view(ev.properties), "body": ev.body}
    if isinstance(m, spec.Basic.Deliver):
        view.update(consumer_tag=m.consumer_tag, delivery_tag=m.delivery_tag, redelivered=m.redelivered)
    elif isinstance(m, spec.Basic.GetOk):
        view.update(delivery_tag=m.delivery_tag, redelivered=m.redelivered, message_count=m.message_count)
    elif isinstance(m, spec.Basic.Return):
        view.update(reply_code=m.reply_code)
    return view


def _short(v: Any) -> Any:
    return v[:12] + b"..." + v[-12:] if isinstance(v, bytes) and len(v) > 40 else v


def check_messages(observed: list[Event], expected: list[dict[str, Any]], what: str) -> None:
    """The one whole-reply comparison: names only the fields that differ, message by message."""
    got = [message_view(ev) for ev in observed]
    if got == expected:
        return
    diffs = []
    for i, (g, e) in enumerate(zip(got, expected, strict=False)):
        for key in e:
            if g.get(key) != e[key]:
                diffs.append(f"#{i + 1} {key}: expected {_short(e[key])!r}, observed {_short(g.get(key))!r}")
    if len(got) != len(expected):
        diffs.append(f"{len(got)} messages, expected {len(expected)}")
    raise Mismatch(what, expected="every field as published", observed="; ".join(diffs[:8]))


def _two_routed(ch: RawChannel, ctx: Any, cleanup: Any) -> tuple[str, str, str]:
    """A direct exchange and a queue bound to it with a key, then messages 1 and 2 (``_body(n)``
    with ``_props(n)``) published through it and known to be routed: (exchange, key, queue)."""
    ex = cleanup.exchange(ctx.name("x"))
    q = cleanup.queue(ctx.name("q"))
    key = "rk." + ctx.name("k")
    ch.declare_exchange(ex, "direct")
    ch.declare_queue(q)
    ch.bind(q, ex, key)
    for n in (1, 2):
        ch.publish(ex, key, _body(n), properties=_props(n))
    ch.barrier()
    return ex, key, q


def _as_published(n: int, exchange: str, routing_key: str, method: str, **fields: Any) -> dict[str, Any]:
    """The expected :func:`message_view` of message ``n`` published to ``exchange`` with
    ``routing_key``, arriving as ``method`` with the method's other ``fields``."""
    return {"method": method, "exchange": exchange, "routing_key": routing_key,
            "properties": prop_view(_props(n)), "body": _body(n), **fields}


@case(
    "replies.first-delivery-not-redelivered", rules=["redelivered/implementation"], sources=[FIELDS, TAGS],
    level=Level.MUST,
    description="Two fresh messages published through a direct exchange, consumed with a client-chosen tag",
    expectation="each basic.deliver: redelivered=false (never delivered before), delivery tags 1 and 2, the "
                "client's consumer tag, the publish's exchange and routing key, properties, headers and body "
                "exactly as published",
)
def test_first_delivery(amqp, ctx, cleanup) -> None:
    ch = amqp.channel()
    ex, key, q = _two_routed(ch, ctx, cleanup)
    tag = "amqpc-chosen." + ctx.name("c")
    ch.consume(q, consumer_tag=tag)
    got = ch.deliveries(2)
    check_messages(got, [_as_published(n, ex, key, "basic.deliver", consumer_tag=tag, delivery_tag=n,
                                       redelivered=False) for n in (1, 2)], "the two deliveries")


@case("replies.get-ok-whole-reply", rules=["redelivered/implementation"], sources=[FIELDS, COUNTS, TAGS],
      level=Level.MUST,
      description="Two fresh messages published through a direct exchange, fetched with basic.get",
      expectation="each basic.get-ok: redelivered=false, delivery tags 1 and 2, message-count 1 then 0 "
      "(messages "
      "left), the publish's exchange and routing key, properties, headers and body as published")
def test_get_ok_whole(amqp, ctx, cleanup) -> None:
    ch = amqp.channel()
    ex, key, q = _two_routed(ch, ctx, cleanup)
    got = [ch.get(q) for _ in (1, 2)]
    if None in got:
        raise Mismatch("basic.get on a queue holding two messages", expected="two basic.get-ok",
                       observed=["basic.get-empty" if g is None else g.name for g in got])
    check_messages([g for g in got if g is not None],
                   [_as_published(n, ex, key, "basic.get-ok", delivery_tag=n, redelivered=False,
                                  message_count=2 - n) for n in (1, 2)], "the two get-oks")


@case("replies.client-consumer-tag-used", rules=["basic.consume/02"], sources=[CTAG], level=Level.MUST,
      description="basic.consume with a consumer tag chosen by the client, one delivery, then basic.cancel",
      expectation="consume-ok, the delivery and cancel-ok all carry exactly the client's tag")
def test_client_consumer_tag(amqp, ctx, cleanup) -> None:
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    tag = "amqpc-own-tag." + ctx.name("c")
    ok = ch.rpc(spec.Basic.Consume(queue=q, consumer_tag=tag, no_ack=True))
    ch.publish("", q, b"tagged")
    dlv = ch.next_delivery()
    cancel_ok = ch.rpc(spec.Basic.Cancel(consumer_tag=tag))
    ctx.check((ok.consumer_tag, dlv.method.consumer_tag, cancel_ok.consumer_tag), (tag, tag, tag),
              "(consume-ok, basic.deliver, cancel-ok) consumer tags")


def _filled_queue(amqp: Any, ctx: Any, cleanup: Any, count: int) -> tuple[RawChannel, str]:
    """A channel and a fresh queue of the case's own holding ``count`` messages, confirmed: only a
    publisher confirm says a message is in the queue (RabbitMQ's confirms guide, "When Will
    Published Messages Be Confirmed by the Broker?"). A barrier after the publishes proves the
    channel handled them, not that the queue has enqueued them: a RabbitMQ 4.0.5 classic queue
    answers a passive declare's count before deliveries still in its mailbox (27 of 200 trials
    counted 2 of 3), a quorum queue counts only what its log has applied."""
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    publish_confirmed(ch, "", q, [f"m{i}".encode() for i in range(1, count + 1)])
    return ch, q


@case("replies.declare-ok-counts", sources=[COUNTS], level=Level.MUST,
      description="Three messages published, then one consumer with prefetch 1 holds one of them unacked",
      expectation="passive queue.declare-ok: (queue, 3, 0) before the consumer; (queue, 2, 1) with it — "
                  "message-count counts the messages ready, consumer-count the active consumers")
def test_declare_ok_counts(amqp, ctx, cleanup) -> None:
    ch, q = _filled_queue(amqp, ctx, cleanup, 3)
    before = ch.declare_queue(q, passive=True)
    ch.qos(1)
    ch.consume(q)
    ch.next_delivery()
    during = ch.declare_queue(q, passive=True)
    ctx.check([(before.queue, before.message_count, before.consumer_count),
               (during.queue, during.message_count, during.consumer_count)],
              [(q, 3, 0), (q, 2, 1)], "(queue, message-count, consumer-count) before and with the consumer")


@case("replies.purge-ok-count", rules=["queue.purge/02"], sources=[COUNTS], level=Level.MUST,
      description="Three messages published to a queue without consumers, then queue.purge",
      expectation="queue.purge-ok message-count = 3, and the queue is empty afterwards")
def test_purge_ok_count(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    fill(ch, q, 3)
    ok = ch.purge(q)
    ctx.check((ok.message_count, ch.message_count(q)), (3, 0), "(purge-ok message-count, messages left)")


@case("replies.delete-ok-count", sources=[COUNTS], level=Level.MUST,
      description="Four messages published to a queue without consumers, then queue.delete",
      expectation="queue.delete-ok message-count = 4 (the messages deleted with the queue)")
def test_delete_ok_count(declared_queue, ctx) -> None:
    ch, q = declared_queue()
    # confirmed, so all four are known to be in the queue (a quorum queue enqueues after the round trip)
    publish_confirmed(ch, "", q, [b"m1", b"m2", b"m3", b"m4"])
    ctx.check(ch.delete_queue(q).message_count, 4, "queue.delete-ok message-count")


@case(
    "replies.mandatory-return-whole-reply", rules=["basic.publish.mandatory/01"],
    sources=["amqp0-9-1.xml#constant no-route (312) and basic.return fields", FIELDS], level=Level.MUST,
    description="On a confirm channel, a mandatory message with properties published with a key no queue is "
                "bound to",
    expectation="basic.return reply-code 312 NO_ROUTE with the publish's exchange, routing key, properties, "
                "headers and body, arriving before the publish's basic.ack (tag 1); reply-text is recorded",
)
def test_mandatory_return_whole(declared_exchange, ctx) -> None:
    ch, ex = declared_exchange("direct")
    ch.confirm_select()
    ch.publish(ex, "nobody-bound", _body(7), properties=_props(7), mandatory=True)
    ack = ch.wait((spec.Basic.Ack, spec.Basic.Nack), "the publish's confirm")
    # the order is the arrival order (seq): a return read just after the ack is still too late
    returned = [e for e in ch.history() if isinstance(e.method, spec.Basic.Return) and e.seq < ack.seq]
    if not returned:
        raise Mismatch("basic.return before the confirm", expected="basic.return 312 then basic.ack",
                       observed=f"{ack.describe()} with no basic.return before it")
    ctx.observe("reply_text", returned[0].method.reply_text)
    check_messages(returned, [_as_published(7, ex, "nobody-bound", "basic.return", reply_code=312)],
                   "the basic.return")
    ctx.check((ack.name, ack.method.delivery_tag, ack.method.multiple), ("basic.ack", 1, False),
              "the confirm after the return")


@case("replies.ack-multiple-counts", rules=["basic/10"],
      sources=[
          "amqp0-9-1.xml#basic.ack multiple field: 'the delivery tag is treated as \"up to and including\"'",
          COUNTS,
      ],
      level=Level.MUST,
      description="Four messages consumed with explicit acks, basic.ack(tag 3, multiple=true), then the "
      "channel "
      "is closed so what is still unacked is requeued",
      expectation="passive queue.declare-ok message-count 1, and the one message left is m4 (tags 1-3 were "
      "acknowledged by the one multiple ack)")
def test_ack_multiple_counts(amqp, ctx, cleanup) -> None:
    ch, q = _filled_queue(amqp, ctx, cleanup, 4)
    ch.consume(q)
    got = ch.deliveries(4)
    ch.ack(int(got[2].method.delivery_tag), multiple=True)
    ch.barrier()
    ch.close()
    probe = amqp.channel()
    left = probe.message_count(q)
    ev = probe.get(q, no_ack=True)
    ctx.check(
        (left, None if ev is None else ev.body), (1, b"m4"), "(messages left, the one left) after the ack"
    )
