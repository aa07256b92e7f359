"""Publisher confirms (RabbitMQ's ``confirm`` class extension, with basic.ack / basic.nack sent by
the broker).

Covers ``000_cd470977c809f5f5.txt`` (RabbitMQ guide "Confirms (aka Publisher Acknowledgements)":
confirm.select, sequence numbers, multiple, negative acknowledgment, when messages are confirmed,
confirms and guaranteed delivery) and the spec rules a publish in confirm mode still obeys
(``basic.publish/must-exist``). The tx/confirm mutual exclusion comes from the same guide and
DESIGN.md's measured facts.

Sections cited as ``000_cd470977c809f5f5.txt#<section>``: ``confirms`` (the opening section),
``negative-acknowledgment``, ``when-will-messages-be-confirmed``, ``confirms-and-guaranteed-delivery``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pamqp import commands as spec
from pamqp.base import Frame

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import Event, RawChannel, UnexpectedClose
from conformance.verify import (
    CONFIRM_TYPES,
    CaseTimeout,
    DeclareQueue,
    Mismatch,
    Settlement,
    aio_pika_session,
    check,
    expect_channel_close,
    pika_queue_channel,
    pika_session,
    reply_or_probe,
    run_async,
    settle_all,
    settle_and_close,
    short_seqs,
    summarize,
)

DOC = "000_cd470977c809f5f5.txt"
CONFIRMS = f"{DOC}#confirms"
NACK = f"{DOC}#negative-acknowledgment"
WHEN = f"{DOC}#when-will-messages-be-confirmed"
GUARANTEED = f"{DOC}#confirms-and-guaranteed-delivery"
CONFIRM_CAPS = ("publisher_confirms",)
NACK_CAPS = ("publisher_confirms", "basic.nack")


def confirm_channel(amqp: Any) -> RawChannel:
    ch = amqp.channel()
    ch.confirm_select()
    return ch


def first_confirm(ch: RawChannel, what: str) -> Event:
    return ch.wait(CONFIRM_TYPES, what)


# -- confirm.select ---------------------------------------------------------------------------------


@case("confirms.select-ok", sources=[CONFIRMS], level=Level.EXTENSION, requires=CONFIRM_CAPS,
      description="confirm.select without no-wait on a fresh channel",
      expectation="the broker answers confirm.select-ok and keeps the channel open")
def test_select_ok(amqp, ctx):
    ch = amqp.channel()
    ch.send(spec.Confirm.Select())
    ev = ch.wait((spec.Confirm.SelectOk,), "confirm.select-ok")
    ctx.observe("reply", ev.describe())
    ch.barrier()


@case("confirms.select-nowait-no-reply", sources=[CONFIRMS], level=Level.EXTENSION, requires=CONFIRM_CAPS,
      description="confirm.select with no-wait=true",
      expectation="no confirm.select-ok is sent (a probe after it is answered with nothing before it)")
def test_select_nowait_no_reply(amqp, ctx):
    ch = amqp.channel()
    ch.confirm_select(nowait=True)
    ch.barrier()
    replies = [e.describe() for e in ch.history() if isinstance(e.method, spec.Confirm.SelectOk)]
    ctx.check(replies, [], "confirm.select-ok frames after confirm.select(no-wait)")


@case("confirms.select-nowait-confirms-publishes", sources=[CONFIRMS], level=Level.EXTENSION,
      requires=CONFIRM_CAPS, description="Publishing after confirm.select with no-wait=true",
      expectation="the channel is in confirm mode: the first publish is acked with delivery-tag 1")
def test_select_nowait_confirms(declared_queue, ctx):
    ch, q = declared_queue()
    ch.confirm_select(nowait=True)
    ch.publish("", q, b"m1")
    ev = first_confirm(ch, "a confirm for the publish after confirm.select(no-wait)")
    ctx.check(ev.describe(), "basic.ack tag=1 multiple=False", "first confirm")


@case("confirms.seq-counts-every-publish", sources=[CONFIRMS, WHEN], level=Level.EXTENSION,
      requires=CONFIRM_CAPS, description="Ten publishes in confirm mode, alternately routable and unroutable",
      expectation="every publish counts: the confirms settle exactly seqs 1..10, routed or not")
def test_seq_counts_every_publish(declared_queue, ctx):
    ch, q = declared_queue(confirm=True)
    for i in range(10):
        ch.publish("", q if i % 2 == 0 else ctx.name("nowhere"), b"m%d" % i)
    st = settle_and_close(ch, settle_all(ch, 10, ctx.timeout), timeout=ctx.timeout)
    ctx.observe("confirms", st.summary())
    ctx.check(sorted(st.settled), list(range(1, 11)), "seqs settled by the confirms")
    ctx.check(st.twice() + st.anomalies, [], "seqs confirmed more than once (or stray confirms)")


# -- invariants over thousands of publishes --------------------------------------------------------

INVARIANT_PUBLISHES = 5000


def _invariant_run(declared_queue: DeclareQueue, ctx: Any, arguments: dict[str, Any] | None) -> Settlement:
    ch, q = declared_queue(confirm=True, arguments=arguments)
    for i in range(INVARIANT_PUBLISHES):
        ch.publish("", q, b"%d" % (i + 1))
    # Thousands of confirms: allow the whole case budget, at least 10 s.
    limit = max(ctx.timeout, 10.0)
    st = settle_and_close(ch, settle_all(ch, INVARIANT_PUBLISHES, limit), timeout=limit)
    ctx.observe("confirms", st.summary())
    return st


def _inv_settled_once(st: Settlement, ctx: Any) -> None:
    ctx.check(st.twice() + st.anomalies, [], "publishes settled more than once (or stray confirms)")


def _inv_never_backwards(st: Settlement, ctx: Any) -> None:
    backwards = []
    last = 0
    for e in st.events:
        tag = int(e.method.delivery_tag)
        if tag <= last:
            backwards.append(f"{e.describe()} after tag {last}")
        last = max(last, tag)
    ctx.check(backwards[:5], [], "confirms whose tag does not exceed an earlier confirm's tag")


def _inv_multiple_covers(st: Settlement, ctx: Any) -> None:
    multiples = [e for e in st.events if e.method.multiple]
    if not multiples:
        # The guide says the broker *may* set multiple; with none sent there is nothing to judge.
        ctx.informational(
            f"no multiple=true confirm among {len(st.events)} confirms", "broker sent no multiple acks"
        )
        return
    late: list[str] = []
    for i, e in enumerate(st.events):
        if not e.method.multiple:
            continue
        tag = int(e.method.delivery_tag)
        late.extend(f"{later.describe()} after {e.describe()}" for later in st.events[i + 1:]
                    if int(later.method.delivery_tag) <= tag)
    ctx.check(late[:5], [], "confirms for tags already covered by an earlier multiple=true confirm")


def _inv_not_both(st: Settlement, ctx: Any) -> None:
    both = sorted(set(st.acked) & set(st.nacked))
    ctx.observe("acked/nacked seqs", f"{len(st.acked)}/{len(st.nacked)}")
    if not both and (not st.acked or not st.nacked):
        # The broker did not refuse (or did not accept) any publish, so the invariant was not
        # exercised; confirms.reject-publish-overflow-nack judges the missing nacks.
        ctx.informational(
            f"{len(st.acked)} acked, {len(st.nacked)} nacked: no mix of acks and nacks to check",
            "invariant not exercised",
        )
        return
    ctx.check(short_seqs(both), "none", "seqs both acked and nacked")


@dataclass(frozen=True)
class Invariant:
    check: Callable[[Settlement, Any], None]
    arguments: dict[str, Any] | None = None


def _invariant(name: str, sources: tuple[str, ...], requires: tuple[str, ...], description: str,
               expectation: str, check: Callable[[Settlement, Any], None],
               arguments: dict[str, Any] | None = None) -> object:
    """One invariant over the confirms of INVARIANT_PUBLISHES publishes (an extension: confirms)."""
    return param(Case(id=f"confirms.{name}", sources=sources, level=Level.EXTENSION, requires=requires,
                      description=description, expectation=expectation), Invariant(check, arguments))


INVARIANTS = [
    _invariant("invariant-settled-exactly-once", (CONFIRMS, NACK), CONFIRM_CAPS,
               f"{INVARIANT_PUBLISHES} publishes to one queue, confirms read with multiple semantics",
               "every seq 1..N is settled exactly once (no confirm settles an already settled seq)",
               _inv_settled_once),
    _invariant("invariant-tags-never-backwards", (CONFIRMS,), CONFIRM_CAPS,
               f"{INVARIANT_PUBLISHES} publishes to one queue; the order of the confirm frames",
               "each confirm's delivery-tag is greater than every earlier confirm's tag",
               _inv_never_backwards),
    _invariant("multiple-covers-range", (CONFIRMS,), CONFIRM_CAPS,
               f"{INVARIANT_PUBLISHES} publishes to one queue; every basic.ack with multiple=true",
               "a multiple=true confirm with tag T settles every outstanding seq <= T: no later "
               "confirm names a tag <= T (INFORMATIONAL when the broker never sets multiple)",
               _inv_multiple_covers),
    _invariant("invariant-never-acked-and-nacked", (NACK,), NACK_CAPS,
               f"{INVARIANT_PUBLISHES} publishes to a queue with x-max-length 1000 and "
               "x-overflow reject-publish (so both acks and nacks are due)",
               "no seq is both acked and nacked (\"No message will be both confirmed and nack'd\")",
               _inv_not_both, {"x-max-length": 1000, "x-overflow": "reject-publish"}),
]


@pytest.mark.parametrize("inv", INVARIANTS)
def test_confirm_invariants(declared_queue, ctx, inv: Invariant):
    st = _invariant_run(declared_queue, ctx, inv.arguments)
    inv.check(st, ctx)


# -- when messages are confirmed -------------------------------------------------------------------


@dataclass(frozen=True)
class Routed:
    durable: bool
    persistent: bool
    publish: str = "a routed publish"  # its confirm is waited for as "the confirm of <publish>"
    what: str = "confirm of the routed publish"  # what the check of (method, delivery-tag) is called


# A declared queue, confirm.select, one publish: its confirm must be basic.ack with tag 1.
ROUTED = [
    param(Case(
        id="confirms.seq-starts-at-1", sources=(CONFIRMS,), level=Level.EXTENSION, requires=CONFIRM_CAPS,
        description="The first publish after confirm.select",
        expectation="its confirm is a basic.ack with delivery-tag 1 (counting starts at 1)",
    ), Routed(False, False, "the first publish", "first confirm (method, delivery-tag)")),
] + [
    param(Case(
        id=f"confirms.routed-acked.{'persistent' if r.persistent else 'transient'}-to-"
           f"{'durable' if r.durable else 'transient'}-queue",
        sources=(WHEN,), level=Level.EXTENSION, requires=CONFIRM_CAPS,
        description=f"A {'persistent' if r.persistent else 'transient'} publish routed to one "
                    f"{'durable' if r.durable else 'non-durable'} queue, in confirm mode",
        expectation="it is acked (with tag 1) once the queue has accepted it",
    ), r)
    for r in (Routed(False, False), Routed(False, True), Routed(True, False), Routed(True, True))
]


@pytest.mark.parametrize("r", ROUTED)
def test_routed_acked(declared_queue, ctx, r: Routed):
    ch, q = declared_queue(durable=r.durable)
    ch.confirm_select()
    ch.publish("", q, b"m1", persistent=r.persistent)
    ev = first_confirm(ch, f"the confirm of {r.publish}")
    ctx.check((ev.name, int(ev.method.delivery_tag)), ("basic.ack", 1), r.what)


@case("confirms.unroutable-acked", sources=[WHEN], level=Level.EXTENSION, requires=CONFIRM_CAPS,
      description="A publish (not mandatory) that amq.direct routes to no queue",
      expectation="it is confirmed with basic.ack (not nack) once the exchange finds no queue")
def test_unroutable_acked(amqp, ctx):
    ch = confirm_channel(amqp)
    ch.publish("amq.direct", ctx.name("unbound-key"), b"m1")
    ev = first_confirm(ch, "the confirm of an unroutable publish")
    ctx.check((ev.name, int(ev.method.delivery_tag)), ("basic.ack", 1), "confirm of the unroutable publish")


@case("confirms.mandatory-return-before-ack", rules=["basic.publish.mandatory/01"], sources=[WHEN],
      level=Level.EXTENSION, requires=CONFIRM_CAPS,
      description="A mandatory publish that routes to no queue, in confirm mode",
      expectation="basic.return (312 NO_ROUTE) arrives before the basic.ack for its seq")
def test_mandatory_return_before_ack(amqp, ctx):
    ch = confirm_channel(amqp)
    ch.publish("amq.direct", ctx.name("unbound-key"), b"m1", mandatory=True)
    ack = first_confirm(ch, "the confirm of a mandatory unroutable publish")
    ret = ch.wait(spec.Basic.Return, "basic.return of the mandatory unroutable publish")
    order = [e.describe() for e in sorted((ret, ack), key=lambda e: e.seq)]
    ctx.check(order, [ret.describe(), ack.describe()], "arrival order of basic.return and its confirm")


@case("confirms.fanout-three-queues-one-ack", sources=[WHEN], level=Level.EXTENSION, requires=CONFIRM_CAPS,
      description="Three publishes to a fanout exchange bound to three queues",
      expectation="each publish is confirmed exactly once (once accepted by all queues, not once per queue)")
def test_fanout_one_ack(declared_exchange, ctx, cleanup, queue_type):
    ch, x = declared_exchange("fanout")
    for i in range(3):
        q = cleanup.queue(ctx.name(f"q{i}"))
        ch.declare_queue(q, **ctx.declare_fields())
        ch.bind(q, x)
    ch.confirm_select()
    for i in range(3):
        ch.publish(x, "", b"m%d" % i)
    st = settle_and_close(ch, settle_all(ch, 3, ctx.timeout), timeout=ctx.timeout)
    ctx.observe("confirms", summarize(st.events))
    ctx.check({s: st.acked.get(s, 0) + st.nacked.get(s, 0) for s in (1, 2, 3)}, {1: 1, 2: 1, 3: 1},
              "confirms per seq")


@case("confirms.persistent-durable-survives-restart", rules=["queue.declare/persistence"],
      sources=[WHEN, GUARANTEED], level=Level.EXTENSION, requires=CONFIRM_CAPS, needs_restart=True,
      description="A persistent message to a durable queue, acked in confirm mode, then the broker is "
                  "killed (kill -9) and started again",
      expectation="the acked message is in the queue after the restart (the ack is sent after it is on disk)")
def test_persistent_survives_restart(amqp, ctx, restartable, queue_type):
    url = restartable.url
    ch = amqp.channel(url)
    q = ctx.name("durable")
    ch.declare_queue(q, **ctx.declare_fields(durable=True))
    restartable.settle_topology()  # the crash below tests the confirm, not the declaration
    ch = amqp.channel(url)
    ch.confirm_select()
    ch.publish("", q, b"precious", persistent=True)
    ev = first_confirm(ch, "the confirm of the persistent publish")
    ctx.check(ev.name, "basic.ack", "confirm of the persistent publish")
    restartable.controller.restart(kill=True)
    ch2 = amqp.channel(url)
    try:
        got = ch2.get(q, no_ack=True)
    except UnexpectedClose as exc:
        raise Mismatch("queue after restart", expected=f"durable queue {q} with the message",
                       observed=exc.event.describe()) from exc
    try:
        ctx.check(got.body if got else None, b"precious", "message in the durable queue after restart")
    finally:
        try:
            ch2.delete_queue(q)
        except (UnexpectedClose, CaseTimeout):
            pass


def _outstanding_case(op: str, verb: str) -> Case:
    return Case(
        id=f"confirms.queue-{verb}-while-outstanding", sources=(CONFIRMS, WHEN), level=Level.EXTENSION,
        requires=CONFIRM_CAPS,
        description=f"500 persistent publishes to a durable queue, then queue.{op} on the same channel "
                    "before their confirms arrive, then one more publish",
        expectation="every publish is still settled (ack or nack) exactly once",
    )


@pytest.mark.parametrize("op", [
    param(_outstanding_case("delete", "deleted"), "delete"),
    param(_outstanding_case("purge", "purged"), "purge"),
])
def test_queue_op_while_outstanding(declared_queue, ctx, op: str):
    ch, q = declared_queue(durable=True)
    ch.confirm_select()
    n = 500
    for i in range(n):
        ch.publish("", q, b"%d" % i, persistent=True)
    # Same channel: the broker handles the queue operation after routing every publish above,
    # while (for persistent messages to a durable queue) their confirms are typically outstanding.
    if op == "delete":
        ch.delete_queue(q)
    else:
        ch.purge(q)
    ch.publish("", q, b"after")  # routed nowhere (deleted) or to the empty queue (purged)
    st = settle_and_close(ch, settle_all(ch, n + 1, ctx.timeout), timeout=ctx.timeout)
    ctx.observe("confirms", st.summary())
    ctx.check(st.twice() + st.anomalies, [], f"publishes settled more than once around queue.{op}")


@case(
    "confirms.reject-publish-overflow-nack",
    # A quorum queue refuses a publish only once it is over x-max-length (RabbitMQ 3.10.8, measured):
    # queue_types.reject-publish-overflow-nack[quorum]. This premise holds for classic queues.
    queue_types=("classic",), premise="x-max-length 1 refuses the second publish: classic queues",
    sources=[NACK],
    level=Level.EXTENSION,
    requires=NACK_CAPS,
    description="Two publishes to a queue declared with x-max-length 1 and x-overflow reject-publish",
    expectation="the first is acked, the second (refused by the full queue) is nacked",
)
def test_reject_publish_nack(declared_queue, ctx):
    ch, q = declared_queue(arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_select()
    ch.publish("", q, b"m1")
    ch.publish("", q, b"m2")
    st = settle_all(ch, 2, ctx.timeout, quiet=0.0)
    verdicts = {s: ("ack" if s in st.acked else "nack") for s in (1, 2)}
    ctx.observe("confirms", summarize(st.events))
    ctx.check(verdicts, {1: "ack", 2: "nack"}, "confirm per seq")


# -- mutual exclusion with tx, errors in confirm mode ----------------------------------------------


def tx_mode(ch: RawChannel) -> None:
    """tx.select, then (without a reply) a probe: a broker that ignores tx.select is a precise FAIL,
    not a TIMEOUT. steps.tx_select does the same but words its mismatch otherwise (and makes 540
    UNSUPPORTED); this keeps the wording and verdicts this case's records have."""
    ch.send(spec.Tx.Select())
    first = reply_or_probe(ch, (spec.Tx.SelectOk,), "tx.select-ok (setup)")
    if not isinstance(first.method, spec.Tx.SelectOk):
        raise Mismatch("setup tx.select", expected="tx.select-ok",
                       observed="no tx.select-ok: a probe sent after it was answered first")


@dataclass(frozen=True)
class ModeClash:
    enter: Callable[[RawChannel], None]  # puts the channel in the first mode, its -ok received
    select: type[Frame]  # the other mode's select method, which must close the channel
    what: str


MODE_CLASHES = [
    param(Case(
        id="confirms.select-on-tx-channel-406",
        sources=(CONFIRMS, "DESIGN.md#facts-measured-on-rabbitmq-3-10-8"), level=Level.EXTENSION,
        requires=CONFIRM_CAPS, description="confirm.select on a channel already in tx mode",
        expectation="the channel is closed with 406 PRECONDITION_FAILED (a transactional channel cannot "
                    "be put into confirm mode)",
    ), ModeClash(tx_mode, spec.Confirm.Select, "confirm.select on a tx channel")),
    param(Case(
        id="confirms.tx-select-on-confirm-channel-406", sources=(CONFIRMS,), level=Level.EXTENSION,
        requires=CONFIRM_CAPS, description="tx.select on a channel already in confirm mode",
        expectation="the channel is closed with 406 PRECONDITION_FAILED (a channel in confirm mode "
                    "cannot be made transactional)",
    ), ModeClash(RawChannel.confirm_select, spec.Tx.Select, "tx.select on a confirm channel")),
]


@pytest.mark.parametrize("clash", MODE_CLASHES)
def test_mode_clash(amqp, ctx, clash: ModeClash):
    ch = amqp.channel()
    clash.enter(ch)
    ch.send(clash.select())
    expect_channel_close(ch, 406, what=clash.what, method=clash.select)


@case("confirms.publish-missing-exchange-404", rules=["basic.publish/must-exist"], sources=[CONFIRMS],
      level=Level.MUST, requires=CONFIRM_CAPS,
      description="A publish to an exchange that does not exist, on a channel in confirm mode",
      expectation="the channel is closed with 404 NOT_FOUND")
def test_publish_missing_exchange(amqp, ctx):
    ch = confirm_channel(amqp)
    ch.publish(ctx.name("no-such-x"), "k", b"m1")
    expect_channel_close(ch, 404, what="publish to a missing exchange in confirm mode",
                         method=spec.Basic.Publish)


# -- the two client libraries ----------------------------------------------------------------------


@case("confirms.pika-publish-returns", sources=[CONFIRMS], level=Level.EXTENSION, requires=CONFIRM_CAPS,
      client="pika",
      description="pika BlockingChannel.confirm_delivery(), then basic_publish of a routable message",
      expectation="basic_publish returns normally (the broker acked) and the message is in the queue")
def test_pika_publish_returns(broker_url, ctx, cleanup):
    from pika import exceptions as pex

    q = cleanup.queue(ctx.name("q"))

    with pika_session(broker_url, ctx.timeout, "pika confirmed publish") as conn:
        ch = pika_queue_channel(conn, q)
        try:
            ch.basic_publish("", q, b"m1", mandatory=True)
        except (pex.NackError, pex.UnroutableError, pex.AMQPChannelError) as exc:
            raise Mismatch("pika basic_publish in confirm mode", expected="returns (broker acked)",
                           observed=repr(exc)) from exc
        count = int(ch.queue_declare(q, passive=True).method.message_count)
    ctx.check(count, 1, "messages in the queue after the confirmed publish")


@case("confirms.pika-unroutable-mandatory-raises", rules=["basic.publish.mandatory/01"], sources=[WHEN],
      level=Level.EXTENSION, requires=CONFIRM_CAPS, client="pika",
      description="pika confirm_delivery(), then basic_publish(mandatory=True) to a routing key no "
                  "queue is bound to",
      expectation="pika raises UnroutableError (it saw the basic.return before the ack)")
def test_pika_unroutable_raises(broker_url, ctx):
    from pika import exceptions as pex

    with pika_session(broker_url, ctx.timeout, "pika mandatory unroutable publish") as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        try:
            ch.basic_publish("amq.direct", ctx.name("unbound-key"), b"m1", mandatory=True)
            outcome = "returned normally"
        except pex.UnroutableError as exc:
            outcome = f"UnroutableError ({len(exc.messages)} returned)"
        except pex.NackError as exc:
            outcome = repr(exc)
    ctx.check(outcome, "UnroutableError (1 returned)", "pika basic_publish outcome")


@case("confirms.aio-pika-publish-acked", sources=[CONFIRMS], level=Level.EXTENSION, requires=CONFIRM_CAPS,
      client="aio-pika",
      description="aio-pika channel(publisher_confirms=True), then await exchange.publish to a queue",
      expectation="the awaited publish returns the broker's basic.ack confirmation")
def test_aio_pika_publish_acked(broker_url, ctx, cleanup, queue_type):
    import aio_pika

    q = cleanup.queue(ctx.name("q"))

    async def run() -> str:
        async with aio_pika_session(broker_url, ctx.timeout) as conn:
            channel = await conn.channel(publisher_confirms=True)
            await channel.declare_queue(q, **ctx.declare_fields())
            confirmation = await channel.default_exchange.publish(aio_pika.Message(b"m1"), routing_key=q)
            return type(confirmation).__name__ if confirmation is not None else "None"

    try:
        got = run_async(run(), ctx.timeout, "aio-pika confirmed publish")
    except (aio_pika.exceptions.DeliveryError, aio_pika.exceptions.ChannelClosed) as exc:
        # aio-pika surfaces a nack, a return or a channel close as these: the broker's doing.
        raise Mismatch("aio-pika publish with publisher_confirms", expected="Ack",
                       observed=f"{type(exc).__name__}: {exc}") from exc
    check(got, "Ack", "type of the confirmation aio-pika returns")

