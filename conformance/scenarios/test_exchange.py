"""Exchange class: standard types, pre-declared instances, the default exchange, declare/delete
rules and their error codes.

Documents: the spec XML's ``exchange`` class rules (``exchange/*``, ``exchange.declare*``,
``exchange.delete/*``); RabbitMQ 3.10.8 behaviour measured with the raw client where it differs
from the XML (kept as per-profile data); exchange-to-exchange bindings from the RabbitMQ-extended
XML (``/usr/share/amqp/specs/0-9-1-rabbit/amqp0-9-1.stripped.extended.xml``, class exchange,
method bind).
"""

from __future__ import annotations

import pytest
from pamqp import commands as spec
from pamqp.common import FieldTable

from conformance.model.cases import Case, Level, case, param
from conformance.verify import (
    Mismatch,
    Unsupported,
    aio_pika_session,
    check,
    check_outcome,
    declare_rules,
    expect_channel_close,
    expect_passive_missing,
    outcome,
    pika_session,
    pipelined,
    routed_body,
    run_async,
)

RMQ = "measured on RabbitMQ 3.10.8 with the raw client"
RABBIT_EXT_XML = "amqp0-9-1.stripped.extended.xml#exchange.bind"


def _delete(name: str, if_unused: bool = False) -> spec.Exchange.Delete:
    return spec.Exchange.Delete(exchange=name, if_unused=if_unused)


def _declare(
    name: str, type_: str = "direct", *, passive: bool = False, durable: bool = False
) -> spec.Exchange.Declare:
    return spec.Exchange.Declare(exchange=name, exchange_type=type_, passive=passive, durable=durable)


# -- standard types ------------------------------------------------------------------------------

def _standard_type(type_: str, required: bool, description: str, expectation: str, bind_key: str,
                   bind_args: dict[str, str] | None, key: str, headers: dict[str, str] | None) -> object:
    """A type the spec requires (MUST) or recommends (SHOULD): declared, bound and published through."""
    kind = "required" if required else "recommended"
    return param(Case(f"exchange.{kind}-type-{type_}", rules=(f"exchange/{kind}-types",),
                      level=Level.MUST if required else Level.SHOULD, description=description,
                      expectation=expectation), type_, bind_key, bind_args, key, headers)


# (exchange type, binding key, binding arguments, publish key, headers)
TYPES = [
    _standard_type("direct", True, "A direct exchange can be declared and routes by exact key",
                   "declare-ok; a message published with the bound key reaches the queue",
                   "k1", None, "k1", None),
    _standard_type("fanout", True, "A fanout exchange can be declared and routes regardless of the key",
                   "declare-ok; a message published with another key reaches the bound queue",
                   "bound-key", None, "other-key", None),
    _standard_type("topic", False, "A topic exchange can be declared and routes by pattern",
                   "declare-ok; a message with key a.b reaches a queue bound with a.*",
                   "a.*", None, "a.b", None),
    _standard_type("headers", False, "A headers exchange can be declared and routes by headers",
                   "declare-ok; a message with header h=v reaches a queue bound with x-match=all, h=v",
                   "", {"x-match": "all", "h": "v"}, "", {"h": "v"}),
]


@pytest.mark.parametrize("type_,bind_key,bind_args,key,headers", TYPES)
def test_exchange_type(amqp, ctx, cleanup, type_, bind_key, bind_args, key, headers):
    ch = amqp.channel()
    x, q = cleanup.exchange(ctx.name("x")), cleanup.queue(ctx.name("q"))
    got = outcome(ch, _declare(x, type_), spec.Exchange.DeclareOk)
    ctx.check(got[0], "exchange.declare-ok", f"exchange.declare type={type_}")
    ch.declare_queue(q)
    ch.bind(q, x, bind_key, arguments=bind_args)
    body = routed_body(ch, x, key, b"typed", q, properties=spec.Basic.Properties(headers=headers))
    ctx.check(body, b"typed", f"message routed by the {type_} exchange")


# -- pre-declared instances ----------------------------------------------------------------------

INSTANCES = [
    param(Case(
        f"exchange.pre-declared-{name.replace('.', '-')}", rules=("exchange/required-instances",),
        level=Level.MUST, description=f"{name} is pre-declared (type {type_})",
        expectation=f"passive declare of {name} succeeds and a queue can bind to it"
                    + ("" if required else f" (required when the {type_} type is implemented)"),
    ), name, type_, required)
    for name, type_, required in [("amq.direct", "direct", True), ("amq.fanout", "fanout", True),
                                  ("amq.topic", "topic", False), ("amq.headers", "headers", False)]
]


@pytest.mark.parametrize("name,type_,required", INSTANCES)
def test_pre_declared(amqp, ctx, cleanup, name, type_, required):
    conn = amqp()
    if not required:
        # "amq." + type name is required only for the types the server implements.
        probe_ch = conn.channel()
        x = cleanup.exchange(ctx.name("typeprobe"))
        got = outcome(probe_ch, _declare(x, type_), spec.Exchange.DeclareOk)
        if got[0] != "exchange.declare-ok":
            raise Unsupported(f"the broker does not implement the {type_} exchange type",
                              expected=f"{type_} type", observed=got[1])
    ch = conn.channel()
    got = outcome(ch, _declare(name, type_, passive=True), spec.Exchange.DeclareOk)
    ctx.check(got[0], "exchange.declare-ok", f"passive exchange.declare {name}")
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    args: FieldTable | None = {"x-match": "all", "h": "v"} if type_ == "headers" else None
    got = outcome(
        ch, spec.Queue.Bind(queue=q, exchange=name, routing_key="k", arguments=args), spec.Queue.BindOk
    )
    ctx.check(got[0], "queue.bind-ok", f"queue.bind to {name}")


@case("exchange.pre-declared-amq-match", level=Level.INFO,
      sources=["amqp0-9-1.stripped.extended.xml#exchange (amq.match: the 0-8 name of the headers instance)"],
      description="Whether amq.match (the AMQP 0-8 headers instance, kept by RabbitMQ) exists",
      expectation="recorded only: 0-9-1 requires amq.headers, not amq.match")
def test_amq_match(amqp, ctx):
    ch = amqp.channel()
    got = outcome(ch, _declare("amq.match", "headers", passive=True), spec.Exchange.DeclareOk)
    ctx.informational(got[1])


# -- the default exchange ------------------------------------------------------------------------


@case("exchange.default-exchange-routes-by-queue-name", rules=["exchange/default-exchange"], level=Level.MUST,
      description="The nameless default exchange routes a publish to the queue named by the routing key",
      expectation="a message published to exchange '' with routing key = queue name is in that queue")
def test_default_exchange(declared_queue, ctx):
    ch, q = declared_queue()
    ctx.check(routed_body(ch, "", q, b"via-default", q), b"via-default", "message via the default exchange")


def _default_access_case(id_: str, description: str) -> Case:
    """exchange/default-access: any error; RabbitMQ closes the channel with 403."""
    return Case(
        id_, rules=("exchange/default-access",), level=Level.MUST, description=description,
        expectation="an error closes the channel or connection (RabbitMQ: channel.close 403)",
        default=("channel.close *", "connection.close *"), expected={"rabbitmq": "channel.close 403"},
        expected_sources={"rabbitmq": f"{RMQ}: 403 'operation not permitted on the default exchange'",
                          "spec": "exchange/default-access (no reply code named)"},
    )


DEFAULT_ACCESS = [
    param(_default_access_case("exchange.default-access-declare",
                               "exchange.declare naming the default exchange ('') is refused"),
          _declare("", "direct"), spec.Exchange.DeclareOk),
    param(_default_access_case("exchange.default-access-delete",
                               "exchange.delete of the default exchange ('') is refused"),
          _delete(""), spec.Exchange.DeleteOk),
]


@pytest.mark.parametrize("method,ok", DEFAULT_ACCESS)
def test_default_access(amqp, ctx, method, ok):
    ch = amqp.channel()
    check_outcome(ctx, outcome(ch, method, ok), f"{method.name} of the default exchange")


# -- declare rules -------------------------------------------------------------------------------


# The declare rules exchanges and queues share (verify/declare_rules.py).
DECLARE_RULES = declare_rules.cases(
    declare_rules.EXCHANGE, passive_rule="exchange.declare/not-found", measured=RMQ
)


@pytest.mark.parametrize("scenario", DECLARE_RULES)
def test_declare_rule(amqp, ctx, cleanup, scenario: declare_rules.Scenario):
    scenario(amqp, ctx, cleanup, declare_rules.EXCHANGE)


@case("exchange.redeclare-other-type", rules=["exchange.declare/typed"], level=Level.MUST,
      description="Redeclaring an existing exchange with a different type",
      expectation="spec: connection.close 530 NOT_ALLOWED; RabbitMQ: channel.close 406 PRECONDITION_FAILED",
      expected={"spec": "connection.close 530", "rabbitmq": "channel.close 406"},
      expected_sources={"spec": "exchange.declare/typed (on-failure not-allowed, a hard error)",
                        "rabbitmq": f"{RMQ}: 406 \"inequivalent arg 'type'\""})
def test_typed(declared_exchange, ctx):
    ch, x = declared_exchange("direct")
    check_outcome(
        ctx, outcome(ch, _declare(x, "fanout"), spec.Exchange.DeclareOk), "redeclare direct as fanout"
    )


@case("exchange.unknown-type-503", rules=["exchange.declare.type/support"], level=Level.MUST,
      description="Declaring an exchange of a type the server does not implement",
      expectation="connection.close 503 COMMAND_INVALID (RabbitMQ 3.10.8 does the same)",
      default="connection.close 503",
      expected_sources={"rabbitmq": f"{RMQ}: connection.close 503 \"unknown exchange type\""})
def test_unknown_type(amqp, ctx, cleanup):
    ch = amqp.channel()
    x = cleanup.exchange(ctx.name("x"))
    check_outcome(ctx, outcome(ch, _declare(x, "x-no-such-type-amqpc"), spec.Exchange.DeclareOk),
                  "declare with an unknown type")


EQUIVALENCE = [
    param(
        declare_rules.inequivalent_case(
            "exchange",
            "exchange.equivalent-durable",
            "Redeclaring a transient exchange as durable",
            "durable",
            RMQ,
        ),
        {},
        {"durable": True},
    ),
    param(
        declare_rules.equivalent_ok_case(
            "exchange",
            "exchange.equivalent-same-fields-ok",
            "Redeclaring an exchange with the same type, durable and arguments",
        ),
        {"durable": False},
        {"durable": False},
    ),
]


@pytest.mark.parametrize("first,second", EQUIVALENCE)
def test_equivalent(declared_exchange, ctx, first, second):
    ch, x = declared_exchange("direct", **first)
    declare_rules.redeclare(ctx, ch, declare_rules.EXCHANGE, x, first, second)


@case("exchange.durable-and-transient", rules=["exchange.declare.durable/support"], level=Level.MUST,
      description="Declaring one durable and one transient exchange",
      expectation="both declares are answered with declare-ok and both exchanges exist (passive declare)")
def test_durable_and_transient(amqp, ctx, cleanup):
    declare_rules.durable_and_transient(amqp, ctx, cleanup, declare_rules.EXCHANGE)


@case("exchange.minimum-16", rules=["exchange.declare/minimum"], level=Level.SHOULD,
      description="Declaring 16 exchanges in one virtual host",
      expectation="all 16 declares are answered with declare-ok")
def test_minimum_exchanges(amqp, ctx, cleanup):
    ch = amqp.channel()
    names = [cleanup.exchange(ctx.name(f"x{i}")) for i in range(16)]
    declares = [_declare(n, "fanout") for n in names]
    oks = pipelined(ch, declares, spec.Exchange.DeclareOk, "declare-ok for 16 exchanges")
    ctx.check(oks, 16, "exchanges declared")


# -- delete rules --------------------------------------------------------------------------------


@case(
    "exchange.delete-missing-404", rules=["exchange.delete/exists"], level=Level.MUST,
    description="Deleting an exchange that does not exist",
    expectation="spec: channel.close 404 NOT_FOUND; RabbitMQ 3.x: exchange.delete-ok (delete is idempotent)",
    expected={"spec": "channel.close 404", "rabbitmq": "exchange.delete-ok"},
    expected_sources={"spec": "exchange.delete/exists (on-failure not-found)",
                      "rabbitmq": f"{RMQ}: exchange.delete of a missing exchange → exchange.delete-ok"},
)
def test_delete_missing(amqp, ctx):
    ch = amqp.channel()
    check_outcome(ctx, outcome(ch, _delete(ctx.name("missing")), spec.Exchange.DeleteOk),
                  "exchange.delete of a missing exchange")


@case("exchange.delete-if-unused-in-use-406", rules=["exchange.delete/in-use"], level=Level.MUST,
      description="exchange.delete with if-unused on an exchange that has a binding",
      expectation="channel.close 406 PRECONDITION_FAILED", default="channel.close 406")
def test_delete_in_use(declared_exchange, ctx, cleanup):
    ch, x = declared_exchange("direct")
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    ch.bind(q, x, "k")
    check_outcome(ctx, outcome(ch, _delete(x, if_unused=True), spec.Exchange.DeleteOk),
                  "exchange.delete if-unused of a bound exchange")


@case("exchange.delete-unused-ok", rules=["exchange.delete/in-use"], level=Level.MUST,
      description="exchange.delete with if-unused on an exchange without bindings",
      expectation="exchange.delete-ok; a passive declare then fails with 404")
def test_delete_unused(declared_exchange, ctx):
    ch, x = declared_exchange("direct")
    got = outcome(ch, _delete(x, if_unused=True), spec.Exchange.DeleteOk)
    ctx.check(got[0], "exchange.delete-ok", "exchange.delete if-unused of an unbound exchange")
    expect_passive_missing(ch, _declare(x, passive=True), "passive declare of the deleted exchange")


# -- RabbitMQ extension --------------------------------------------------------------------------


@case("exchange.exchange-to-exchange-binding", level=Level.EXTENSION, sources=[RABBIT_EXT_XML],
      requires=["exchange_exchange_bindings"],
      description=(
          "exchange.bind: a message published to the source exchange reaches a queue bound to the destination"
      ),
      expectation="exchange.bind-ok, and the message is in the queue bound to the destination exchange")
def test_e2e_binding(declared_exchange, ctx, cleanup):
    ch, src = declared_exchange("direct", "src")
    _, dst = declared_exchange("fanout", "dst", ch=ch)
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    ch.bind(q, dst, "")
    got = outcome(ch, spec.Exchange.Bind(destination=dst, source=src, routing_key="k"), spec.Exchange.BindOk)
    ctx.check(got[0], "exchange.bind-ok", "exchange.bind")
    ctx.check(routed_body(ch, src, "k", b"e2e", q), b"e2e", "message routed source → destination → queue")


# -- RabbitMQ's exchange.declare flags: internal and auto-delete -----------------------------------

RABBIT_DECLARE = "amqp0-9-1.stripped.extended.xml#exchange.declare"


@case("exchange.internal-refuses-publish", level=Level.EXTENSION, sources=[RABBIT_DECLARE],
      description="A direct exchange declared internal, a queue bound to it with key k; a message is "
      "published to it directly; where the broker offers exchange-to-exchange bindings, a message also "
      "reaches it through one",
      expectation="the direct publish closes the channel with 403 ACCESS_REFUSED naming basic.publish (an "
      "internal exchange \"may not be used directly by publishers, but only when bound to other "
      "exchanges\") and the queue stays empty; published to a plain exchange bound to it, the message is in "
      "the queue")
def test_internal_exchange(amqp, ctx, cleanup, server):
    ch = amqp.channel()
    internal, front = cleanup.exchange(ctx.name("internal")), cleanup.exchange(ctx.name("front"))
    q = cleanup.queue(ctx.name("q"))
    ch.declare_exchange(internal, "direct", internal=True)
    ch.declare_queue(q)
    ch.bind(q, internal, "k")
    ch.publish(internal, "k", b"direct")
    expect_channel_close(ch, 403, what="basic.publish to an internal exchange", method=spec.Basic.Publish)
    ch = amqp.channel()
    ctx.check(ch.message_count(q), 0, "messages in the queue after the refused publish")
    if not server.capabilities.get("exchange_exchange_bindings"):
        ctx.observe("through a binding", "not tried: the broker does not offer exchange-to-exchange bindings")
        return
    ch.declare_exchange(front, "direct")
    ch.rpc(spec.Exchange.Bind(destination=internal, source=front, routing_key="k"))
    ctx.check(routed_body(ch, front, "k", b"via-e2e", q), b"via-e2e",
              "a message reaching the internal exchange through a binding")


@case("exchange.auto-delete-on-last-unbind", level=Level.EXTENSION, sources=[RABBIT_DECLARE],
      description="A fanout exchange declared auto-delete, a queue bound to it; the binding is removed",
      expectation="the exchange is gone once its last binding is (\"deleted when all queues have finished "
      "using it\"): a passive exchange.declare closes the channel with 404 NOT_FOUND; with the binding in "
      "place it was there")
def test_auto_delete_exchange(amqp, ctx, cleanup):
    ch = amqp.channel()
    x, q = cleanup.exchange(ctx.name("x")), cleanup.queue(ctx.name("q"))
    ch.declare_exchange(x, "fanout", auto_delete=True)
    ch.declare_queue(q)
    ch.bind(q, x, "")
    ch.declare_exchange(x, "fanout", passive=True)  # bound: still there
    ch.rpc(spec.Queue.Unbind(queue=q, exchange=x, routing_key=""))
    expect_passive_missing(ch, spec.Exchange.Declare(exchange=x, exchange_type="fanout", passive=True),
                           "the auto-delete exchange after its last unbind")


# -- client libraries ----------------------------------------------------------------------------


@case("exchange.pika-fanout-routes", rules=["exchange/required-types"], level=Level.MUST, client="pika",
      description="pika: exchange_declare(fanout), bind two queues, publish once",
      expectation="each bound queue holds the message (basic_get returns it)")
def test_pika_fanout(broker_url, ctx, cleanup):
    with pika_session(broker_url, ctx.timeout, "pika fanout scenario") as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        x = cleanup.exchange(ctx.name("x"))
        qs = [cleanup.queue(ctx.name(f"q{i}")) for i in range(2)]
        ch.exchange_declare(x, exchange_type="fanout")
        for q in qs:
            ch.queue_declare(q)
            ch.queue_bind(q, x)
        ch.basic_publish(x, "any", b"fan")  # confirmed: routed before we look
        bodies = []
        for q in qs:
            _m, _p, body = ch.basic_get(q, auto_ack=True)
            bodies.append(body)
        check(bodies, [b"fan", b"fan"], "message in each queue bound to the fanout exchange")


@case("exchange.aio-pika-passive-missing", rules=["exchange.declare/not-found"], level=Level.MUST,
      client="aio-pika", description="aio-pika: declare_exchange(passive=True) of a missing exchange",
      expectation="raises ChannelNotFoundEntity (channel.close 404)")
def test_aio_pika_passive_missing(broker_url, ctx):
    from aiormq import exceptions as aex

    async def scenario() -> str:
        async with aio_pika_session(broker_url, ctx.timeout) as conn:
            ch = await conn.channel()
            try:
                await ch.declare_exchange(ctx.name("missing"), passive=True)
            except aex.ChannelNotFoundEntity as exc:
                return f"ChannelNotFoundEntity {exc}"
            return "declare-ok"

    got = run_async(scenario(), ctx.timeout * 2, "aio-pika passive exchange declare")
    ctx.observe("aio-pika", got)
    if not got.startswith("ChannelNotFoundEntity"):
        raise Mismatch(
            "passive declare of a missing exchange", expected="ChannelNotFoundEntity", observed=got
        )
