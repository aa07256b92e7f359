"""Alternate exchanges: the ``alternate-exchange`` argument of exchange.declare.

Document: RabbitMQ's Alternate Exchanges guide (``rabbitmq-ae``): a message the exchange cannot
route is re-published to its AE; "If a message is routed via an AE it still counts as routed for
the purpose of the 'mandatory' flag, and the message is otherwise unchanged". Only when the AE
cannot route it either is a mandatory message returned. A broker that accepts the argument and
ignores it returns (or drops) the message and FAILs; one that refuses it is UNSUPPORTED.
"""

from __future__ import annotations

from pamqp import commands as spec

from conformance.model.cases import Level, case
from conformance.verify import extensions as ext
from conformance.verify import settle_all

HOW = "rabbitmq-ae#how-it-works"
DEFINE = "rabbitmq-ae#define-using-arguments"


def _topology(ch, ctx, iso, ae_type: str) -> tuple[str, str, str, str]:
    """A direct exchange ``x`` (AE ``ae``, of ``ae_type``) with queue ``routed`` bound by key k1;
    queue ``unrouted`` bound to the AE (by key k1 too: a direct AE then routes nothing else)."""
    x, ae = iso.exchange(ctx.name("x")), iso.exchange(ctx.name("ae"))
    routed, unrouted = iso.queue(ctx.name("routed")), iso.queue(ctx.name("unrouted"))
    ch.declare_exchange(ae, ae_type)
    ext.declare_exchange_ext(ch, x, "direct", {"alternate-exchange": ae}, "the alternate-exchange argument")
    for q, ex in ((routed, x), (unrouted, ae)):
        ch.declare_queue(q)
        ch.bind(q, ex, "k1")
    return x, ae, routed, unrouted


def _got(ch, q: str) -> list[tuple[str, str, str, dict]]:
    out = []
    while (ev := ch.get(q, no_ack=True)) is not None:
        out.append(((ev.body or b"").decode(), ev.method.exchange, ev.method.routing_key, ext.headers(ev)))
    return out


@case("alternate_exchange.unroutable-lands-in-ae", wedges=True, sources=[HOW, DEFINE], level=Level.EXTENSION,
      requires=["publisher_confirms"],
      description="A direct exchange with a fanout alternate exchange; on a confirm channel, mandatory "
      "publishes with key k1 (bound) and k2 (bound nowhere), a header h=1 on each",
      expectation="both acked, no basic.return; k1's message in the bound queue, k2's in the AE's queue, "
      "unchanged (exchange x, routing key k2, header h=1)")
def test_unroutable_to_ae(isolated, ctx):
    ch = isolated.channel()
    x, _ae, routed, unrouted = _topology(ch, ctx, isolated, "fanout")
    ch.confirm_select()
    for body, key in ((b"m1", "k1"), (b"m2", "k2")):
        ch.publish(x, key, body, mandatory=True, properties=ext.props(headers={"h": 1}))
    st = settle_all(ch, 2, ctx.timeout)
    ctx.check((sorted(st.acked), sorted(st.nacked)), ([1, 2], []), "confirms (acked, nacked)")
    ext.no_return(ch, "basic.return for the message the AE routed")
    ctx.check({"routed": _got(ch, routed), "unrouted": _got(ch, unrouted)},
              {"routed": [("m1", x, "k1", {"h": 1})], "unrouted": [("m2", x, "k2", {"h": 1})]},
              "messages per queue (body, exchange, routing key, headers)")


@case("alternate_exchange.returned-when-ae-cannot-route", wedges=True, sources=[HOW], level=Level.EXTENSION,
      description="A direct exchange whose alternate exchange is a direct exchange with one binding (k1); "
      "a mandatory publish with key k2, which neither routes",
      expectation="basic.return 312 NO_ROUTE naming the published-to exchange and k2, with the body; "
      "neither queue holds it")
def test_returned_when_ae_cannot_route(isolated, ctx):
    ch = isolated.channel()
    x, _ae, routed, unrouted = _topology(ch, ctx, isolated, "direct")
    ch.publish(x, "k2", b"m2", mandatory=True)
    ret = ch.wait(spec.Basic.Return, "basic.return of the message neither exchange routed")
    ctx.check((int(ret.method.reply_code), ret.method.reply_text, ret.method.exchange, ret.method.routing_key,
               ret.body), (312, "NO_ROUTE", x, "k2", b"m2"), "basic.return (code, text, exchange, key, body)")
    ctx.check({"routed": _got(ch, routed), "unrouted": _got(ch, unrouted)}, {"routed": [], "unrouted": []},
              "messages per queue")
