"""Sender-selected distribution: the ``CC`` and ``BCC`` headers of a published message.

Document: RabbitMQ's Sender-selected Distribution guide (``rabbitmq-sender-selected``): the values
of CC and BCC (arrays of longstr) are added to the routing key; "The BCC key and value will be
removed from the message prior to delivery". CC stays. A broker that ignores the headers routes by
the publish's key alone and FAILs; one that delivers BCC FAILs the second case.
"""

from __future__ import annotations

from conformance.model.cases import Level, case
from conformance.verify import extensions as ext

CC_BCC = "rabbitmq-sender-selected#cc-bcc"
BCC_REMOVED = "rabbitmq-sender-selected#bcc-removed"


def _setup(ch, ctx, iso, keys: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    x = iso.exchange(ctx.name("x"))
    ch.declare_exchange(x, "direct")
    queues = {}
    for k in keys:
        q = iso.queue(ctx.name(f"q{k}"))
        ch.declare_queue(q)
        ch.bind(q, x, k)
        queues[k] = q
    return x, queues


def _seen(ch, queues: dict[str, str]) -> dict[str, list]:
    out: dict[str, list] = {}
    for k, q in queues.items():
        out[k] = []
        while (ev := ch.get(q, no_ack=True)) is not None:
            out[k].append(((ev.body or b"").decode(), ev.method.routing_key, ext.headers(ev)))
    return out


@case("sender_selected.cc-routes-and-is-kept", wedges=True, sources=[CC_BCC], level=Level.EXTENSION,
      description="A direct exchange with queues bound by keys a, c and z; a message published with key a "
      "and headers CC=[c], h=1",
      expectation="queues a and c each get one copy (routing key a, headers CC=[c] and h=1 as published); "
      "queue z none")
def test_cc(isolated, ctx):
    ch = isolated.channel()
    x, queues = _setup(ch, ctx, isolated, ("a", "c", "z"))
    hdrs = {"CC": ["c"], "h": 1}
    ext.send_confirmed(ch, x, [("a", b"m", ext.props(headers=hdrs))])
    ctx.check(_seen(ch, queues), {"a": [("m", "a", hdrs)], "c": [("m", "a", hdrs)], "z": []},
              "copies per queue (body, routing key, headers)")


@case("sender_selected.bcc-routes-and-is-removed", sources=[CC_BCC, BCC_REMOVED], level=Level.EXTENSION,
      wedges=True,
      description="A direct exchange with queues bound by keys a, b and z; a message published with key a "
      "and headers BCC=[b], h=1",
      expectation="queues a and b each get one copy (routing key a) whose headers are h=1 only: BCC removed; "
      "queue z none")
def test_bcc(isolated, ctx):
    ch = isolated.channel()
    x, queues = _setup(ch, ctx, isolated, ("a", "b", "z"))
    ext.send_confirmed(ch, x, [("a", b"m", ext.props(headers={"BCC": ["b"], "h": 1}))])
    ctx.check(_seen(ch, queues), {"a": [("m", "a", {"h": 1})], "b": [("m", "a", {"h": 1})], "z": []},
              "copies per queue (body, routing key, headers)")
