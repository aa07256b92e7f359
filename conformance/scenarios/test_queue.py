"""Queue class (except exclusive queues, see test_exclusive.py): declare, bind, unbind, purge,
delete — their rules, error codes and minimum counts.

Documents: the spec XML's ``queue`` class rules (``queue.declare/*``, ``queue.bind/*``,
``queue.unbind*``, ``queue.purge/*``, ``queue.delete/*``), ``basic.consume/01`` (16 consumers);
``004_ba6059c7056f3c65.txt#resurfacing-messages-in-limbo`` (passive queue.declare for counts).
RabbitMQ 3.10.8 behaviour measured with the raw client where it differs from the XML is kept as
per-profile data with its source.
"""

from __future__ import annotations

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import method_name
from conformance.verify import (
    Mismatch,
    aio_pika_session,
    check,
    check_outcome,
    declare_rules,
    expect_passive_missing,
    outcome,
    pika_session,
    pipelined,
    publish_confirmed,
    routed_body,
    run_async,
)

RMQ = "measured on RabbitMQ 3.10.8 with the raw client"
PASSIVE_DOC = "004_ba6059c7056f3c65.txt#resurfacing-messages-in-limbo"


def _declare(name: str, **kw) -> spec.Queue.Declare:
    return spec.Queue.Declare(queue=name, **kw)


# -- declare -------------------------------------------------------------------------------------


@case("queue.default-binding", rules=["queue.declare/default-binding"], level=Level.MUST,
      description="A new queue is bound to the default exchange with its name as key, without any queue.bind",
      expectation="a message published to exchange '' with routing key = queue name is in the queue")
def test_default_binding(declared_queue, ctx):
    ch, q = declared_queue()
    body = routed_body(ch, "", q, b"default-binding", q)
    ctx.check(body, b"default-binding", "message via the default binding")


@case("queue.server-named", rules=["queue.declare/default-name"], level=Level.MUST,
      description="Declaring two queues with an empty name",
      expectation="each declare-ok carries a non-empty, distinct server-generated name")
def test_server_named(amqp, ctx, cleanup):
    ch = amqp.channel()
    names = []
    for _ in range(2):
        got = outcome(ch, _declare("", exclusive=False, auto_delete=False), spec.Queue.DeclareOk)
        if got[0] != "queue.declare-ok":
            raise Mismatch("queue.declare with an empty name", expected="queue.declare-ok", observed=got[1])
        ev = [e for e in ch.history() if isinstance(e.method, spec.Queue.DeclareOk)][-1]
        names.append(cleanup.queue(ev.method.queue))
    ctx.observe("names", names)
    ctx.check(bool(names[0]) and bool(names[1]) and names[0] != names[1], True,
          f"two non-empty distinct generated names (got {names})")


# The declare rules exchanges and queues share (verify/declare_rules.py).
DECLARE_RULES = declare_rules.cases(declare_rules.QUEUE, passive_rule="queue.declare/passive", measured=RMQ)


@pytest.mark.parametrize("scenario", DECLARE_RULES)
def test_declare_rule(amqp, ctx, cleanup, scenario: declare_rules.Scenario):
    scenario(amqp, ctx, cleanup, declare_rules.QUEUE)


@case("queue.passive-existing-counts", rules=["queue.declare/passive"], sources=[PASSIVE_DOC],
      level=Level.MUST, description="Passive declare of an existing queue holding 2 messages",
      expectation="queue.declare-ok with message-count 2 (the queue is not created or changed)")
def test_passive_existing(declared_queue, ctx):
    ch, q = declared_queue()
    # confirmed, so both are known to be in the queue (a quorum queue enqueues after the round trip)
    publish_confirmed(ch, "", q, [b"1", b"2"])
    ok = ch.declare_queue(q, passive=True)
    ctx.check((ok.queue, ok.message_count), (q, 2), "passive declare-ok (queue, message-count)")


# These redeclare a queue with durable/auto-delete flipped or arguments without x-queue-type:
# a quorum queue is durable only and refuses auto-delete, so the premise holds for classic queues.
CLASSIC_ONLY = ("classic",)
EQUIV_PREMISE = "redeclares with durable=false / auto-delete / no x-queue-type, which a quorum queue refuses"
EQUIVALENCE = [
    param(
        declare_rules.inequivalent_case(
            "queue",
            "queue.equivalent-durable",
            "Redeclaring a transient queue as durable",
            "durable",
            RMQ,
            queue_types=CLASSIC_ONLY,
            premise=EQUIV_PREMISE,
        ),
        {},
        {"durable": True},
    ),
    param(
        declare_rules.inequivalent_case(
            "queue",
            "queue.equivalent-arguments",
            "Redeclaring a queue with a different x-max-length argument",
            "x-max-length",
            RMQ,
            queue_types=CLASSIC_ONLY,
            premise=EQUIV_PREMISE,
        ),
        {"arguments": {"x-max-length": 10}},
        {"arguments": {"x-max-length": 20}},
    ),
    param(
        declare_rules.equivalent_ok_case(
            "queue",
            "queue.equivalent-same-fields-ok",
            "Redeclaring a queue with the same durable, exclusive, auto-delete and arguments",
            queue_types=CLASSIC_ONLY,
            premise=EQUIV_PREMISE,
        ),
        {"durable": False},
        {"durable": False},
    ),
    # queue.declare/pre-existence: "The server MUST ignore the auto-delete field if the queue
    # already exists" — RabbitMQ instead checks it like the other fields (equivalent).
    param(Case(
        queue_types=CLASSIC_ONLY, premise=EQUIV_PREMISE, id="queue.pre-existence-ignores-auto-delete",
        rules=("queue.declare/pre-existence",), level=Level.MUST,
        description="Redeclaring an existing queue with auto-delete reversed",
        expectation="spec: declare-ok (auto-delete ignored); RabbitMQ: channel.close 406",
        expected={"spec": "queue.declare-ok", "rabbitmq": "channel.close 406"},
        expected_sources={
            "spec": "queue.declare/pre-existence",
            "rabbitmq": f"{RMQ}: 406 \"inequivalent arg 'auto_delete'\" (RabbitMQ applies "
            "queue.declare/equivalent to auto-delete)",
        },
    ), {"auto_delete": False}, {"auto_delete": True}),
]


@pytest.mark.parametrize("first,second", EQUIVALENCE)
def test_equivalent(declared_queue, ctx, first, second):
    ch, q = declared_queue(**first)
    declare_rules.redeclare(ctx, ch, declare_rules.QUEUE, q, first, second)


@case("queue.durable-and-transient", rules=["queue.declare.durable/types"], level=Level.MUST,
      description="Declaring one durable and one transient queue",
      expectation="both are answered with declare-ok and exist afterwards (passive declare)")
def test_durable_and_transient(amqp, ctx, cleanup):
    declare_rules.durable_and_transient(amqp, ctx, cleanup, declare_rules.QUEUE)


# Deprecated queue properties and arguments: accepted, or refused where a release denies them by
# default (RabbitMQ's deprecated features: the expectation names the setting that permits each
# again). The release rows (rabbitmq_releases.toml) say which release refuses which.
DEPRECATED_DOC = "rabbitmq-deprecated-features#configuring"
DEPRECATED = [
    param(Case(
        id="queue.deprecated-transient-non-exclusive", level=Level.EXTENSION, sources=(DEPRECATED_DOC,),
        queue_types=CLASSIC_ONLY, premise="a non-durable queue: classic queues only",
        description="queue.declare of a non-durable, non-exclusive classic queue (deprecated feature "
                    "transient_nonexcl_queues)",
        expectation="queue.declare-ok (RabbitMQ 4.3.0's release notes deny it by default, permitted again by "
                    "deprecated_features.permit.transient_nonexcl_queues = true; 4.3.6 accepts it: "
                    "docs/findings.md)",
        default="queue.declare-ok"), {"durable": False}),
    param(Case(
        id="queue.deprecated-x-queue-master-locator", level=Level.EXTENSION, sources=(DEPRECATED_DOC,),
        queue_types=CLASSIC_ONLY, premise="a classic queue's argument",
        description="queue.declare of a durable classic queue with x-queue-master-locator=client-local "
                    "(deprecated feature queue_master_locator)",
        expectation="queue.declare-ok; from RabbitMQ 4.3 connection.close 541 INTERNAL_ERROR naming "
                    "deprecated_features.permit.queue_master_locator = true (release row "
                    "queue-master-locator-denied)",
        default="queue.declare-ok"),
        {"durable": True, "arguments": {"x-queue-master-locator": "client-local"}}),
    param(Case(
        id="queue.deprecated-x-queue-mode-lazy", level=Level.EXTENSION, sources=(DEPRECATED_DOC,),
        queue_types=CLASSIC_ONLY, premise="a classic queue's argument",
        description="queue.declare of a durable classic queue with x-queue-mode=lazy (the CQv1 lazy mode)",
        expectation="queue.declare-ok (RabbitMQ 4.3.0's release notes say a declaration with x-queue-mode "
                    "set to any value fails; 4.3.6 accepts it: docs/findings.md)",
        default="queue.declare-ok"), {"durable": True, "arguments": {"x-queue-mode": "lazy"}}),
    param(Case(
        id="queue.x-queue-version-1", level=Level.EXTENSION, sources=(DEPRECATED_DOC,),
        queue_types=CLASSIC_ONLY, premise="a classic queue's argument",
        description="queue.declare of a durable classic queue with x-queue-version=1 (CQv1 storage)",
        expectation="queue.declare-ok; from RabbitMQ 4.3 (CQv1 removed) channel.close 406 "
                    "PRECONDITION_FAILED 'unsupported queue version' (release row cqv1-removed); no setting "
                    "permits it",
        default="queue.declare-ok"), {"durable": True, "arguments": {"x-queue-version": 1}}),
]


@pytest.mark.parametrize("fields", DEPRECATED)
def test_deprecated_declare(amqp, ctx, cleanup, fields):
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    got = outcome(ch, _declare(q, **fields), spec.Queue.DeclareOk)
    check_outcome(ctx, got, "queue.declare")
    if got[0] == "queue.declare-ok":  # a queue the broker accepted takes a message like any other
        publish_confirmed(ch, "", q, [b"m"])
        ctx.check(ch.message_count(q), 1, "messages in the queue after one confirmed publish")


@case("queue.minimum-256", rules=["queue.declare/minimum-queues"], level=Level.SHOULD,
      description="Declaring 256 queues in one virtual host",
      expectation="all 256 declares are answered with declare-ok")
def test_minimum_queues(amqp, ctx, cleanup):
    ch = amqp.channel()
    names = [cleanup.queue(ctx.name(f"q{i}")) for i in range(256)]
    oks = pipelined(ch, [_declare(n) for n in names], spec.Queue.DeclareOk, "declare-ok for 256 queues")
    ctx.check(oks, 256, "queues declared")
    for n in names:  # delete here, pipelined; cleanup's deletes then find nothing (fast)
        ch.send(spec.Queue.Delete(queue=n))
    ch.barrier()


# -- bind ----------------------------------------------------------------------------------------


@case("queue.bind-duplicate-ok", rules=["queue.bind/duplicates"], level=Level.MUST,
      description="Binding a queue twice with identical arguments",
      expectation="both queue.bind calls are answered with bind-ok")
def test_bind_duplicates(declared_queue, ctx):
    ch, q = declared_queue()
    got = [outcome(ch, spec.Queue.Bind(queue=q, exchange="amq.direct", routing_key="k"), spec.Queue.BindOk)[0]
           for _ in range(2)]
    ctx.check(got, ["queue.bind-ok", "queue.bind-ok"], "two identical queue.bind")


@case("queue.bind-unique-delivery", rules=["queue.bind/unique"], level=Level.MUST,
      description="A queue bound three times to amq.topic with patterns that all match one message",
      expectation="the queue holds the message once (message-count 1)")
def test_bind_unique(declared_queue, ctx):
    ch, q = declared_queue()
    key = ctx.name("k").replace("-", "_")
    for pattern in (f"{key}.*", f"*.{key}b", "#"):
        ch.bind(q, "amq.topic", pattern)
    # confirmed: a queue may enqueue after the channel's next round trip (quorum queues do)
    publish_confirmed(ch, "amq.topic", f"{key}.{key}b", [b"once"])
    ctx.check(ch.message_count(q), 1, "copies of one message in a queue with three matching bindings")


@case("queue.bind-durable-queue-transient-exchange", rules=["queue.bind/transient-exchange"],
      level=Level.MUST, description="Binding a durable queue to a transient exchange",
      expectation="queue.bind-ok")
def test_bind_transient_exchange(declared_exchange, ctx, cleanup):
    ch, x = declared_exchange("direct", durable=False)
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q, durable=True)
    got = outcome(ch, spec.Queue.Bind(queue=q, exchange=x, routing_key="k"), spec.Queue.BindOk)
    ctx.check(got[0], "queue.bind-ok", "durable queue bound to a transient exchange")


@case("queue.binding-count-4", rules=["queue.bind/binding-count"], level=Level.SHOULD,
      description="Binding one queue to 4 different exchanges", expectation="four bind-ok")
def test_binding_count(declared_queue, ctx, cleanup):
    ch, q = declared_queue()
    got = []
    for i in range(4):
        x = cleanup.exchange(ctx.name(f"x{i}"))
        ch.declare_exchange(x, "direct")
        got.append(outcome(ch, spec.Queue.Bind(queue=q, exchange=x, routing_key="k"), spec.Queue.BindOk)[0])
    ctx.check(got, ["queue.bind-ok"] * 4, "bindings of one queue to 4 exchanges")


@case("queue.direct-key-matching", rules=["queue.bind/direct-exchange-key-matching"], level=Level.MUST,
      description="A queue bound to a direct exchange with key K; a message published with key K",
      expectation="the message is in the queue")
def test_direct_key_matching(declared_exchange, ctx, cleanup):
    ch, x = declared_exchange("direct")
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    ch.bind(q, x, "key-K")
    ctx.check(routed_body(ch, x, "key-K", b"K", q), b"K", "message routed by K = R")


DEFAULT_EXCHANGE = [
    param(Case(
        "queue.bind-default-exchange", rules=("queue.bind/default-exchange",), level=Level.MUST,
        description="queue.bind with a blank exchange name (the default exchange)",
        expectation=(
            "spec: queue.bind-ok; RabbitMQ: channel.close 403 (no binding to the default exchange)"
        ),
        expected={"spec": "queue.bind-ok", "rabbitmq": "channel.close 403"},
        expected_sources={
            "spec": "queue.bind/default-exchange, exchange/default-access",
            "rabbitmq": f"{RMQ}: 403 'operation not permitted on the default exchange'",
        },
    ), "bind"),
    param(Case(
        "queue.unbind-default-exchange", rules=("queue.unbind/default-exchange",), level=Level.MUST,
        description="queue.unbind with a blank exchange name (the default exchange)",
        expectation="spec: queue.unbind-ok; RabbitMQ: channel.close 403",
        expected={"spec": "queue.unbind-ok", "rabbitmq": "channel.close 403"},
        expected_sources={
            "spec": "queue.unbind/default-exchange",
            "rabbitmq": f"{RMQ}: 403 'operation not permitted on the default exchange'",
        },
    ), "unbind"),
]


@pytest.mark.parametrize("op", DEFAULT_EXCHANGE)
def test_default_exchange_blank(declared_queue, ctx, op):
    ch, q = declared_queue()
    if op == "bind":
        got = outcome(ch, spec.Queue.Bind(queue=q, exchange="", routing_key=q), spec.Queue.BindOk)
    else:
        got = outcome(ch, spec.Queue.Unbind(queue=q, exchange="", routing_key=q), spec.Queue.UnbindOk)
    check_outcome(ctx, got, f"queue.{op} with exchange ''")


# -- missing entities: 404 -------------------------------------------------------------------------


def _missing_case(id_: str, rule: str, description: str, *, rabbitmq: str | None = None) -> Case:
    if rabbitmq is None:
        return Case(
            id_, rules=(rule,), level=Level.MUST, description=description,
            expectation="channel.close 404 NOT_FOUND", default="channel.close 404",
        )
    return Case(
        id_, rules=(rule,), level=Level.MUST, description=description,
        expectation=f"spec: channel.close 404 NOT_FOUND; RabbitMQ 3.x: {rabbitmq} (idempotent)",
        expected={"spec": "channel.close 404", "rabbitmq": rabbitmq},
        expected_sources={"spec": f"{rule} (on-failure not-found)",
                          "rabbitmq": f"{RMQ}: answered {rabbitmq}"},
    )


# (what to send, given a fresh queue name q that may or may not be declared): declared?, method, ok
MISSING = [
    param(
        _missing_case(
            "queue.bind-unnamed-404",
            "queue.bind/queue-known",
            "queue.bind with an empty queue name on a channel that declared no queue",
        ),
        False,
        lambda q, x: spec.Queue.Bind(queue="", exchange="amq.direct", routing_key="k"),
        spec.Queue.BindOk,
    ),
    param(
        _missing_case(
            "queue.unbind-unnamed-404",
            "queue.unbind/queue-known",
            "queue.unbind with an empty queue name on a channel that declared no queue",
        ),
        False,
        lambda q, x: spec.Queue.Unbind(queue="", exchange="amq.direct", routing_key="k"),
        spec.Queue.UnbindOk,
    ),
    param(
        _missing_case(
            "queue.purge-unnamed-404",
            "queue.purge/queue-known",
            "queue.purge with an empty queue name on a channel that declared no queue",
        ),
        False,
        lambda q, x: spec.Queue.Purge(queue=""),
        spec.Queue.PurgeOk,
    ),
    param(
        _missing_case(
            "queue.delete-unnamed-404",
            "queue.delete/queue-known",
            "queue.delete with an empty queue name on a channel that declared no queue",
        ),
        False,
        lambda q, x: spec.Queue.Delete(queue=""),
        spec.Queue.DeleteOk,
    ),
    param(
        _missing_case(
            "queue.bind-missing-queue-404", "queue.bind/must-exist", "queue.bind of a missing queue"
        ),
        False,
        lambda q, x: spec.Queue.Bind(queue=q, exchange="amq.direct", routing_key="k"),
        spec.Queue.BindOk,
    ),
    param(
        _missing_case(
            "queue.bind-missing-exchange-404",
            "queue.bind/exchange-existence",
            "queue.bind of an existing queue to a missing exchange",
        ),
        True,
        lambda q, x: spec.Queue.Bind(queue=q, exchange=x, routing_key="k"),
        spec.Queue.BindOk,
    ),
    param(
        _missing_case(
            "queue.unbind-missing-queue-404",
            "queue.unbind.queue/must-exist",
            "queue.unbind of a missing queue",
            rabbitmq="queue.unbind-ok",
        ),
        False,
        lambda q, x: spec.Queue.Unbind(queue=q, exchange="amq.direct", routing_key="k"),
        spec.Queue.UnbindOk,
    ),
    param(
        _missing_case(
            "queue.unbind-missing-exchange-404",
            "queue.unbind.exchange/must-exist",
            "queue.unbind of an existing queue from a missing exchange",
            rabbitmq="queue.unbind-ok",
        ),
        True,
        lambda q, x: spec.Queue.Unbind(queue=q, exchange=x, routing_key="k"),
        spec.Queue.UnbindOk,
    ),
    param(
        _missing_case("queue.purge-missing-404", "queue.purge/must-exist", "queue.purge of a missing queue"),
        False,
        lambda q, x: spec.Queue.Purge(queue=q),
        spec.Queue.PurgeOk,
    ),
    param(
        _missing_case(
            "queue.delete-missing-404",
            "queue.delete/must-exist",
            "queue.delete of a missing queue",
            rabbitmq="queue.delete-ok",
        ),
        False,
        lambda q, x: spec.Queue.Delete(queue=q),
        spec.Queue.DeleteOk,
    ),
]


@pytest.mark.parametrize("declared,make,ok", MISSING)
def test_missing(amqp, ctx, cleanup, declared, make, ok):
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    if declared:
        ch.declare_queue(q)
    method = make(q, ctx.name("missing-x"))
    check_outcome(ctx, outcome(ch, method, ok), method_name(method))


# -- purge and delete ------------------------------------------------------------------------------


@case("queue.purge-returns-count", sources=["amqp0-9-1.xml#queue.purge-ok (message-count)"],
      rules=["queue.purge/must-exist"], level=Level.MUST,
      description="Purging a queue holding 3 ready messages",
      expectation="queue.purge-ok with message-count 3, and the queue is then empty")
def test_purge_count(declared_queue, ctx):
    ch, q = declared_queue()
    for i in range(3):
        ch.publish("", q, f"m{i}".encode())
    ch.barrier()
    ok = ch.purge(q)
    after = ch.message_count(q)
    ctx.check((ok.message_count, after), (3, 0), "(purge-ok message-count, messages left)")


DELETE_GUARDS = [
    param(Case(
        "queue.delete-if-unused-406", rules=("queue.delete/in-use",), level=Level.MUST,
        description="queue.delete with if-unused on a queue that has a consumer",
        expectation="channel.close 406 PRECONDITION_FAILED", default="channel.close 406",
    ), "consumer", {"if_unused": True}),
    param(Case(
        "queue.delete-if-empty-406", rules=("queue.delete/not-empty",), level=Level.MUST,
        description="queue.delete with if-empty on a queue holding a message",
        expectation="channel.close 406 PRECONDITION_FAILED", default="channel.close 406",
    ), "message", {"if_empty": True}),
]


@pytest.mark.parametrize("setup,flags", DELETE_GUARDS)
def test_delete_guards(amqp, ctx, cleanup, setup, flags):
    conn = amqp()
    ch = conn.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    if setup == "consumer":
        conn.channel().consume(q)  # the consumer lives on another channel of this connection
    else:
        ch.publish("", q, b"keep-me")
        ch.barrier()
    check_outcome(ctx, outcome(ch, spec.Queue.Delete(queue=q, **flags), spec.Queue.DeleteOk),
                  f"queue.delete {flags} with a {setup}")


@case("queue.delete-if-empty-keeps-queue-and-message", rules=["queue.delete/not-empty"], level=Level.MUST,
      description="queue.delete with if-empty on a queue holding a message; then the queue's state, "
      "seen from another connection",
      expectation="the refused delete leaves the queue: a passive declare answers message-count 1, and the "
      "message is the one published")
def test_delete_if_empty_keeps_queue(amqp, ctx, cleanup):
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    ch.publish("", q, b"keep-me")
    ch.barrier()
    ch.send(spec.Queue.Delete(queue=q, if_empty=True))
    other = amqp.channel()  # another connection: the refusal's close is its own channel's business
    ok = other.rpc(spec.Queue.Declare(queue=q, passive=True))
    ev = other.get(q, no_ack=True)
    ctx.check((int(ok.message_count), ev.body if ev else None), (1, b"keep-me"),
              "(message-count, body) after the refused if-empty delete")


@case("queue.delete-if-empty-deletes-an-empty-queue", rules=["queue.delete/not-empty"], level=Level.MUST,
      description="queue.delete with if-empty on an empty queue; then a passive declare of it",
      expectation="queue.delete-ok with message-count 0, then the passive declare is refused with 404")
def test_delete_if_empty_on_empty(amqp, ctx, cleanup):
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    ok = ch.rpc(spec.Queue.Delete(queue=q, if_empty=True))
    ctx.check(int(ok.message_count), 0, "queue.delete-ok message-count")
    expect_passive_missing(ch, spec.Queue.Declare(queue=q, passive=True), "passive declare after the delete")


@case("queue.declare-nowait-no-reply", level=Level.MUST,
      sources=["amqp0-9-1.xml#queue.declare (no-wait: \"the server will not respond to the method\")"],
      description="queue.declare with no-wait, then a round trip on the same channel",
      expectation="no queue.declare-ok arrives: the round trip's answer is the first reply")
def test_declare_nowait_no_reply(amqp, ctx, cleanup):
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.send(spec.Queue.Declare(queue=q, nowait=True))
    ch.barrier()
    replies = [e.describe() for e in ch.history() if isinstance(e.method, spec.Queue.DeclareOk)]
    ctx.check(replies, [], "queue.declare-ok for the no-wait declare")


@case("queue.declare-nowait-creates-the-queue", level=Level.MUST,
      sources=["amqp0-9-1.xml#queue.declare (no-wait: \"the server will not respond to the method\")"],
      description="queue.declare with no-wait, a round trip, then a passive declare on another channel",
      expectation="the queue exists: the passive declare answers declare-ok with 0 messages")
def test_declare_nowait_creates(amqp, ctx, cleanup):
    ch = amqp.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.send(spec.Queue.Declare(queue=q, nowait=True))
    ch.barrier()
    ok = amqp.channel().rpc(spec.Queue.Declare(queue=q, passive=True))
    ctx.check((ok.queue, int(ok.message_count)), (q, 0), "passive queue.declare-ok (queue, message-count)")


@case("queue.consumers-16", rules=["basic.consume/01"], level=Level.SHOULD,
      description="16 consumers on one queue",
      expectation="all 16 basic.consume calls are answered with consume-ok")
def test_sixteen_consumers(declared_queue, ctx):
    ch, q = declared_queue()
    consumes = [spec.Basic.Consume(queue=q, consumer_tag=f"c{i}") for i in range(16)]
    oks = pipelined(ch, consumes, spec.Basic.ConsumeOk, "consume-ok for 16 consumers")
    ctx.check(oks, 16, "consumers accepted")


# -- client libraries ----------------------------------------------------------------------------


@case("queue.pika-passive-missing-404", rules=["queue.declare/passive"], level=Level.MUST, client="pika",
      description="pika: queue_declare(passive=True) of a missing queue",
      expectation="raises ChannelClosedByBroker with reply code 404")
def test_pika_passive_missing(broker_url, ctx):
    from pika import exceptions as pex

    with pika_session(broker_url, ctx.timeout, "pika passive queue_declare") as conn:
        ch = conn.channel()
        try:
            ch.queue_declare(ctx.name("missing"), passive=True)
            observed: object = "declare-ok"
        except pex.ChannelClosedByBroker as exc:
            observed = exc.reply_code
        check(observed, 404, "pika ChannelClosedByBroker reply code")


@case("queue.aio-pika-purge-count", sources=["amqp0-9-1.xml#queue.purge-ok (message-count)"],
      rules=["queue.declare/default-binding"], level=Level.MUST, client="aio-pika",
      description="aio-pika: publish 3 messages via the default exchange, then queue.purge()",
      expectation="purge reports message_count 3")
def test_aio_pika_purge(broker_url, ctx, cleanup):
    import aio_pika

    q = cleanup.queue(ctx.name("q"))

    async def scenario() -> int:
        async with aio_pika_session(broker_url, ctx.timeout) as conn:
            ch = await conn.channel(publisher_confirms=True)
            queue = await ch.declare_queue(q)
            for i in range(3):
                await ch.default_exchange.publish(aio_pika.Message(f"m{i}".encode()), routing_key=q)
            ok = await queue.purge()
            return int(ok.message_count)

    count = run_async(scenario(), ctx.timeout * 2, "aio-pika purge scenario")
    check(count, 3, "purge-ok message-count")
