"""The tx class: the seed's "Semantics of tx" table, one or a few variant cases per table row.

Covers ``001_27f7ea2622bbc99f.txt#tx`` (RabbitMQ "Broker Semantics", the tx table and the text
under it), the spec XML's tx class (``tx.commit/transacted``, ``tx.rollback/transacted``,
``tx/not-multiple-queues``, ``tx/not-mandatory``) and DESIGN.md's facts measured on RabbitMQ 3.10.8.

The table itself is data (``conformance/profiles/tx.toml``); each variant case below observes one
table value for its row (``yes`` / ``no`` / ``immediate`` / ``on commit``) and compares it with
the value of its profile's column. Where that column says ``undefined`` the observation is recorded
as INFORMATIONAL. Every table case sets ``ctx.extra["tx_row"]`` and ``ctx.extra["tx_observed"]``
for the report pipeline; ``tx_observed`` stays ``undefined`` when the case could not observe the
row (e.g. the broker never answered tx.select) or saw something outside the table's vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, param
from conformance.model.cases import case as case_decorator
from conformance.protocol import Event, RawChannel, UnexpectedClose, reply_name
from conformance.verify import (
    CaseTimeout,
    Env,
    Mismatch,
    aio_pika_session,
    closes_with,
    committed_only,
    counted,
    expect_channel_close,
    expect_no_delivery,
    get_tags,
    load_table,
    pika_session,
    publish_confirmed,
    quiet_window,
    run_async,
    tx_select,
)

TABLE: dict[str, Any] = load_table("tx")
UNDEFINED: str = TABLE["undefined"]
VALUES: frozenset[str] = frozenset(TABLE["values"])
TX_SOURCE: str = TABLE["source"]
# suite profile -> the table column that stands for it
PROFILE_COLUMN: dict[str, str] = {
    col["profile"]: name for name, col in TABLE["columns"].items() if "profile" in col
}
DESIGN_FACTS = "DESIGN.md#facts-measured-on-rabbitmq-3-10-8"


# -- variants: each returns the observed table value for its row ----------------------------------


def close_after_barrier(ch: RawChannel) -> None:
    """Close a channel once the broker has processed everything sent on it before."""
    ch.barrier()
    ch.close()


# how a publish's tx ends -> (the ending, the table value for 1 / 0 messages left, what is counted)
PUBLISH_ENDINGS: dict[str, tuple[Callable[[RawChannel], None], dict[int, str], str]] = {
    "commit": (lambda ch: ch.tx_commit(), {1: "yes", 0: "no"}, "messages in the queue after tx.commit-ok"),
    "rollback": (
        lambda ch: ch.tx_rollback(),
        {0: "yes", 1: "no"},
        "messages in the queue after tx.rollback-ok",
    ),
    "close": (close_after_barrier, {0: "yes", 1: "no"}, "messages in the queue after closing the tx channel"),
}


def publish_then(ending: str, env: Env) -> str:
    """One publish in a tx, ended by ``ending`` (a key of PUBLISH_ENDINGS)."""
    end, mapping, what = PUBLISH_ENDINGS[ending]
    q = env.queue()
    ch = env.tx_channel()
    ch.publish("", q, b"m1")
    end(ch)
    return counted(env.count(q), mapping, what)


def ack_rollback_reack(env: Env) -> str:
    q, ch, (tag,) = env.got_in_tx(1)
    ch.ack(tag)
    ch.tx_rollback()
    ch.ack(tag)  # still unacked after the rollback, so this must be accepted
    closed = closes_with(ch, ch.tx_commit)
    if closed is not None:
        env.ctx.observe("re-ack after rollback", closed.describe())
        return "no" if closed.method.reply_code == 406 else _unexpected(closed, "re-ack + tx.commit")
    ch.close()
    return counted(env.count(q), {0: "yes"}, "messages in the queue after the committed re-ack")


def ack_close_uncommitted(env: Env) -> str:
    q, ch, (tag,) = env.got_in_tx(1)
    ch.ack(tag)
    close_after_barrier(ch)
    return counted(env.count_after_close(q, 1), {1: "yes", 0: "no"},
                   "messages requeued after closing the channel with an uncommitted ack")


def ack_out_of_order(env: Env) -> str:
    q, ch, (t1, t2, t3) = env.got_in_tx(3)
    ch.ack(t3)
    ch.ack(t1)
    ch.tx_commit()
    ch.ack(t2)
    ch.tx_rollback()
    ch.close()  # only t2 is unacked now: it is requeued
    return counted(env.count_after_close(q, 1), {1: "yes", 0: "no"},
                   "messages requeued on close after committing acks 3,1 and rolling back ack 2")


def ack_tag0_multiple(env: Env) -> str:
    rolled, committed = env.queue("rolled"), env.queue("committed")
    env.fill(rolled, 2)
    env.fill(committed, 2)
    a = env.tx_channel()
    get_tags(a, rolled, 2)
    a.ack(0, multiple=True)
    a.tx_rollback()
    a.close()
    b = env.tx_channel()
    get_tags(b, committed, 2)
    b.ack(0, multiple=True)
    b.tx_commit()
    b.close()
    left = env.count(committed)
    if left != 0:
        raise Mismatch(
            "ack(0, multiple=true) committed",
            expected="all outstanding acked (0 requeued on close)",
            observed=f"{left} requeued",
        )
    return counted(env.count_after_close(rolled, 2), {2: "yes", 0: "no"},
                   "messages requeued on close after ack(0, multiple=true) was rolled back")


def _reject_then_commit(env: Env, op: Callable[[RawChannel, int], None]) -> str:
    q, ch, (tag,) = env.got_in_tx(1)
    op(ch, tag)
    ch.barrier()
    before = env.count(q)
    ch.tx_commit()
    # A quorum queue applies the committed return just after commit-ok: poll (bounded) for it.
    after = env.count_after_close(q, 1)
    env.ctx.observe("ready before / after commit", (before, after))
    if before == 1:
        return "no"
    if after == 1:
        return "yes"
    raise Mismatch("requeue by a committed reject", expected="the message requeued by commit",
                   observed=f"ready before commit {before}, after commit {after}")


def reject_requeue_on_commit(env: Env) -> str:
    return _reject_then_commit(env, lambda ch, tag: ch.reject(tag, requeue=True))


def nack_requeue_on_commit(env: Env) -> str:
    return _reject_then_commit(env, lambda ch, tag: ch.nack(tag, requeue=True))


def reject_rollback(env: Env) -> str:
    q, ch, (tag,) = env.got_in_tx(1)
    ch.reject(tag, requeue=True)
    ch.tx_rollback()
    requeued = env.count(q)
    env.ctx.observe("ready after rollback", requeued)
    if requeued:
        return "no"
    ch.ack(tag)  # the rollback undid the reject: the delivery is still ours to ack
    closed = closes_with(ch, ch.tx_commit)
    if closed is not None:
        raise Mismatch("ack after the rolled-back reject", expected="accepted (delivery still unacked)",
                       observed=closed.describe())
    return "yes"


def queue_exists_after_rollback(env: Env, q: str, op: Callable[[RawChannel], object]) -> bool:
    """Run ``op`` on queue ``q`` in a tx and roll back; whether ``q`` exists afterwards."""
    ch = env.tx_channel()
    op(ch)
    ch.tx_rollback()
    gone = closes_with(env.observer(), lambda: env.observer().declare_queue(q, passive=True))
    env.ctx.observe("passive declare after rollback", gone.describe() if gone else "exists")
    if gone is None:
        return True
    env._observer = None  # the 404 closed the observer channel
    if gone.method.reply_code != 404:
        _unexpected(gone, "passive queue.declare")
    return False


def declare_rollback(env: Env) -> str:
    q = env.cleanup.queue(env.ctx.name("q"))
    return (
        "no"
        if queue_exists_after_rollback(env, q, lambda ch: ch.declare_queue(q, **env.ctx.declare_fields()))
        else "yes"
    )


def delete_rollback(env: Env) -> str:
    q = env.queue()
    return "yes" if queue_exists_after_rollback(env, q, lambda ch: ch.delete_queue(q)) else "no"


def bind_rollback(env: Env) -> str:
    q = env.queue()
    x = env.cleanup.exchange(env.ctx.name("x"))
    env.observer().declare_exchange(x, "fanout")
    ch = env.tx_channel()
    ch.bind(q, x)
    ch.tx_rollback()
    publish_confirmed(env.observer(), x, "", [b"after-rollback"])
    return counted(
        env.count(q), {1: "no", 0: "yes"}, "messages routed through the binding made in the rolled-back tx"
    )


def _get_noack(ch: RawChannel, q: str) -> None:
    if ch.get(q, no_ack=True) is None:
        raise Mismatch("setup basic.get", expected="1 message", observed="get-empty")


def _consume_noack(ch: RawChannel, q: str) -> None:
    ch.consume(q, no_ack=True)
    ch.next_delivery()


# how the one message is taken inside the tx -> (take it, close the channel after the rollback,
# what the count after the rollback is)
TAKES: dict[str, tuple[Callable[[RawChannel, str], object], bool, str]] = {
    "get": (lambda ch, q: get_tags(ch, q, 1), False, "messages ready after rolling back a basic.get"),
    "get-noack": (_get_noack, True, "messages in the queue after rolling back a no-ack basic.get"),
    "consume-noack": (
        _consume_noack,
        True,
        "messages in the queue after rolling back (and closing) an auto-ack consumer's delivery",
    ),
}


def take_then_rollback(take: str, env: Env) -> str:
    """One message taken in a tx by ``take`` (a key of TAKES), then tx.rollback: requeued or not."""
    fetch, close, what = TAKES[take]
    q = env.filled(1)
    ch = env.tx_channel()
    fetch(ch, q)
    ch.tx_rollback()
    if close:
        ch.close()
    return counted(env.count(q), {0: "no", 1: "yes"}, what)


def consume_rollback(env: Env) -> str:
    q = env.filled(1)
    ch = env.tx_channel()
    ch.consume(q)
    ch.next_delivery()
    ch.tx_rollback()
    try:
        expect_no_delivery(ch, quiet_window(env.ctx.timeout), what="redelivery after rollback")
    except Mismatch:
        return "yes"
    return counted(env.count(q), {0: "no", 1: "yes"}, "messages ready after rolling back a consumed delivery")


def atomic_single(env: Env) -> str:
    q = env.queue()
    ch = env.tx_channel()
    for i in range(20):
        ch.publish("", q, b"m%d" % i)
    ch.tx_commit()
    env.ctx.observe("messages after commit", env.count(q))
    # Atomicity is only observable with a fault during tx.commit; the suite injects none.
    return UNDEFINED


def atomic_multi(env: Env) -> str:
    q1, q2 = env.queue("q1"), env.queue("q2")
    ch = env.tx_channel()
    for i in range(10):
        ch.publish("", q1, b"a%d" % i)
        ch.publish("", q2, b"b%d" % i)
    ch.tx_commit()
    env.ctx.observe("messages after commit (q1, q2)", (env.count(q1), env.count(q2)))
    return UNDEFINED


def _when_error(env: Env, send: Callable[[RawChannel], object], code: int, what: str) -> str:
    ch = env.tx_channel()
    send(ch)
    closed = closes_with(ch, ch.barrier)
    when = "immediate"
    if closed is None:
        when = "on commit"
        closed = closes_with(ch, ch.tx_commit)
    if closed is None:
        env.ctx.observe("error", "never reported (tx.commit-ok)")
        raise Mismatch(what, expected=f"channel.close {reply_name(code)} (immediately or on commit)",
                       observed="no error: the probe and tx.commit were answered normally")
    if closed.method.reply_code != code:
        return _unexpected(closed, what)
    env.ctx.observe("error", f"{when}: {closed.describe()}")
    return when


def error_missing_exchange(env: Env) -> str:
    x = env.ctx.name("no-such-x")
    return _when_error(
        env, lambda ch: ch.publish(x, "k", b"m1"), 404, "publish to a missing exchange in a tx"
    )


def error_unknown_tag(env: Env) -> str:
    return _when_error(env, lambda ch: ch.ack(999), 406, "ack of an unknown delivery tag in a tx")


def no_route_return(env: Env) -> str:
    ch = env.tx_channel()
    ch.publish("amq.direct", env.ctx.name("unbound-key"), b"m1", mandatory=True)
    ch.barrier()
    if any(isinstance(e.method, spec.Basic.Return) for e in ch.history()):
        return "immediate"
    ch.tx_commit()
    commit_ok = next(e for e in ch.history() if isinstance(e.method, spec.Tx.CommitOk))
    try:
        ret = ch.wait(
            spec.Basic.Return,
            "basic.return of the mandatory unroutable publish",
            timeout=quiet_window(env.ctx.timeout),
        )
    except CaseTimeout:
        env.ctx.observe("basic.return", "never")
        return "never"
    if ret.seq < commit_ok.seq:
        return "on commit"
    env.ctx.observe("basic.return", "after tx.commit-ok")
    return "after commit-ok"


def visibility_other_connection(env: Env) -> str:
    q = env.queue()
    ch = env.tx_channel()
    ch.publish("", q, b"m1")
    ch.barrier()
    if env.count(q):
        return "immediate"
    ch.tx_commit()
    return counted(env.count(q), {1: "on commit", 0: "after commit-ok"},
                   "messages another connection sees right after tx.commit-ok")


def durable_after_commit(env: Env) -> str:
    target = env.request.getfixturevalue("restartable")
    ch = env.amqp.channel(target.url)
    q = env.ctx.name("durable")
    ch.declare_queue(q, **env.ctx.declare_fields(durable=True))
    target.settle_topology()  # the crash below tests the commit, not the declaration
    ch = env.amqp.channel(target.url)
    tx_select(ch)
    ch.publish("", q, b"precious", persistent=True)
    ch.tx_commit()
    target.controller.restart(kill=True)
    ch2 = env.amqp.channel(target.url)
    got = ch2.get(q, no_ack=True)
    env.ctx.observe("after kill -9 and restart", got.body if got else "get-empty")
    try:
        ch2.delete_queue(q)
    except (UnexpectedClose, CaseTimeout):
        pass
    return "on commit" if got is not None and got.body == b"precious" else "lost after commit-ok"


def _unexpected(closed: Event, what: str) -> str:
    raise Mismatch(what, expected="the table's behaviour", observed=closed.describe())


# -- the two client libraries ---------------------------------------------------------------------


def publish_pika(env: Env) -> str:
    from pika import exceptions as pex

    q = env.queue()

    bodies: list[bytes] = []
    with pika_session(env.broker_url, env.ctx.timeout, "pika tx publish") as conn:
        ch = conn.channel()
        try:
            ch.tx_select()
            ch.basic_publish("", q, b"rolled-back")
            ch.tx_rollback()
            ch.basic_publish("", q, b"committed")
            ch.tx_commit()
        except pex.AMQPChannelError as exc:
            raise Mismatch("pika tx_select / tx_rollback / tx_commit", expected="all succeed",
                           observed=repr(exc)) from exc
        while (body := ch.basic_get(q, auto_ack=True)[2]) is not None:
            bodies.append(body)
    return committed_only(env.ctx, bodies, "pika")


def publish_aio_pika(env: Env) -> str:
    import aio_pika

    q = env.queue()

    async def run() -> list[bytes]:
        async with aio_pika_session(env.broker_url, env.ctx.timeout) as conn:
            # publisher_confirms defaults to True in aio-pika, and a confirm channel cannot be
            # made transactional: ask for a plain channel.
            channel = await conn.channel(publisher_confirms=False)
            tx = channel.transaction()
            await tx.select()
            await channel.default_exchange.publish(aio_pika.Message(b"rolled-back"), routing_key=q)
            await tx.rollback()
            await channel.default_exchange.publish(aio_pika.Message(b"committed"), routing_key=q)
            await tx.commit()
            queue = await channel.get_queue(q, ensure=False)
            got = []
            while (msg := await queue.get(no_ack=True, fail=False)) is not None:
                got.append(msg.body)
            return got

    try:
        bodies = run_async(run(), env.ctx.timeout, "aio-pika tx publish")
    except aio_pika.exceptions.ChannelClosed as exc:
        raise Mismatch("aio-pika transaction", expected="select / rollback / commit succeed",
                       observed=repr(exc)) from exc
    return committed_only(env.ctx, bodies, "aio-pika")


# -- the table as cases ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    row: str
    variant: str
    description: str
    expectation: str
    run: Callable[[Env], str] = field(compare=False)
    rules: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    level: Level = Level.MUST
    requires: tuple[str, ...] = ()
    client: str = "raw"
    needs_restart: bool = False

    @property
    def id(self) -> str:
        return f"tx.{self.row}.{self.variant}"


V = Variant
# fmt: off
# (a hand-laid table: one variant per entry, kept compact so it reads as the tx table does)
VARIANTS: tuple[Variant, ...] = (
    V("publish", "commit", "A publish in a tx, then tx.commit",
      "after commit-ok the message is in the queue", partial(publish_then, "commit")),
    V("publish", "rollback", "A publish in a tx, then tx.rollback",
      "the publish is discarded: the queue stays empty", partial(publish_then, "rollback")),
    V("publish", "close-without-commit", "A publish in a tx, then channel.close without commit",
      "the uncommitted publish is discarded: the queue stays empty", partial(publish_then, "close")),
    V("publish", "pika", "pika BlockingChannel tx_select, publish, tx_rollback, publish, tx_commit",
      "only the committed message is in the queue", publish_pika, client="pika"),
    V("publish", "aio-pika", "aio-pika channel.transaction(): select, publish, rollback, publish, commit",
      "only the committed message is in the queue", publish_aio_pika, client="aio-pika"),
    V("ack", "rollback-then-reack", "basic.get, ack in a tx, tx.rollback, ack the same tag again, commit",
      "the rollback undid the ack: the re-ack is accepted (no 406) and the message is gone after commit",
      ack_rollback_reack, rules=("basic.ack/exists",)),
    V("ack", "close-without-commit", "basic.get, ack in a tx, channel.close without commit",
      "the uncommitted ack is discarded: the message is requeued", ack_close_uncommitted),
    V("ack", "out-of-order", "Three gets; ack tags 3 then 1 and commit; ack tag 2 and roll back; close",
      "the committed out-of-order acks apply, the rolled-back one does not: exactly 1 message requeued",
      ack_out_of_order, rules=("basic.ack/exists",)),
    V("ack", "tag0-multiple", "ack(delivery-tag 0, multiple=true) in a tx: rolled back on one channel, "
      "committed on another",
      "rolled back it acks nothing (both messages requeued on close); committed it acks all outstanding",
      ack_tag0_multiple, rules=("basic.ack/exists",)),
    V("reject", "requeue-on-commit", "basic.reject(requeue=true) in a tx, then commit",
      "the message is requeued only on commit (not visible before commit-ok)", reject_requeue_on_commit),
    V("reject", "nack-requeue-on-commit", "basic.nack(requeue=true) in a tx, then commit",
      "the message is requeued only on commit (not visible before commit-ok)", nack_requeue_on_commit,
      requires=("basic.nack",)),
    V("reject", "rollback-undoes", "basic.reject(requeue=true) in a tx, then tx.rollback",
      "the rollback undoes the reject: the message is not requeued and can still be acked", reject_rollback),
    V("declare-delete-bind", "declare-survives-rollback", "queue.declare inside a tx, then tx.rollback",
      "declaring is not transactional: the queue still exists after the rollback", declare_rollback,
      sources=(DESIGN_FACTS,)),
    V("declare-delete-bind", "delete-survives-rollback", "queue.delete inside a tx, then tx.rollback",
      "deleting is not transactional: the queue is still gone after the rollback", delete_rollback),
    V("declare-delete-bind", "bind-survives-rollback", "queue.bind inside a tx, then tx.rollback",
      "binding is not transactional: a later publish is routed through the binding", bind_rollback),
    V("consume-get", "get-not-requeued-on-rollback", "basic.get (ack mode) inside a tx, then tx.rollback",
      "getting is not transactional: the message is not requeued by the rollback",
      partial(take_then_rollback, "get")),
    V("consume-get", "get-noack-not-undone", "basic.get with no-ack inside a tx, then tx.rollback",
      "the auto-acked get is not undone: the queue stays empty", partial(take_then_rollback, "get-noack"),
      sources=(DESIGN_FACTS,)),
    V("consume-get", "consume-not-requeued-on-rollback",
      "basic.consume delivery inside a tx, then tx.rollback",
      "consuming is not transactional: no requeue and no redelivery after the rollback", consume_rollback),
    V("consume-get", "autoack-outside-tx",
      "An auto-ack (no-ack) consumer's delivery in a tx, rollback, close",
      "auto-ack deliveries are outside the tx: the message is not requeued", partial(take_then_rollback,
      "consume-noack")),
    V("atomicity-single-queue", "commit-no-fault", "20 publishes to one queue in a tx, committed "
      "without fault injection", "recorded only: atomicity needs a fault during tx.commit", atomic_single,
      level=Level.INFO),
    V("atomicity-multi-queue", "commit-no-fault", "Publishes to two queues in a tx, committed without "
      "fault injection", "recorded only: atomicity needs a fault during tx.commit", atomic_multi,
      rules=("tx/not-multiple-queues",), level=Level.INFO),
    V("error-detection", "missing-exchange", "basic.publish to a missing exchange inside a tx",
      "the channel is closed 404 NOT_FOUND immediately, before any commit", error_missing_exchange,
      rules=("basic.publish/must-exist",), sources=(DESIGN_FACTS,)),
    V("error-detection", "unknown-ack-tag", "basic.ack of a delivery tag never delivered, inside a tx",
      "the channel is closed 406 PRECONDITION_FAILED immediately, before any commit", error_unknown_tag,
      rules=("basic.ack/exists",)),
    V("no-route-return", "mandatory-unroutable", "A mandatory publish routed to no queue, inside a tx",
      "no basic.return before commit; the return arrives on commit, before tx.commit-ok", no_route_return,
      rules=("tx/not-mandatory",), sources=(DESIGN_FACTS,)),
    V("effect-visibility", "other-connection", "A publish in a tx, watched from another connection",
      "invisible before commit, visible as soon as tx.commit-ok arrives", visibility_other_connection),
    V("effect-visibility", "durable-after-commit-ok", "A persistent publish to a durable queue in a tx; "
      "after commit-ok the broker is killed (kill -9) and restarted",
      "the broker took responsibility at commit-ok: the message survives the restart", durable_after_commit,
      rules=("queue.declare/persistence",), needs_restart=True),
)
# fmt: on


def _case(v: Variant) -> Case:
    row = TABLE["rows"][v.row]
    expected = {profile: row[column] for profile, column in PROFILE_COLUMN.items()}
    return Case(
        id=v.id, description=v.description, expectation=v.expectation, level=v.level, rules=v.rules,
        sources=(TX_SOURCE, *v.sources), expected=expected,
        expected_sources={
            profile: f"{TX_SOURCE} row '{row['feature']}', column {TABLE['columns'][column]['label']}"
            for profile, column in PROFILE_COLUMN.items()
        },
        requires=v.requires, client=v.client, needs_restart=v.needs_restart,
    )


TABLE_CASES = [param(_case(v), v) for v in VARIANTS]


def record(ctx: Any, v: Variant, observed: str) -> None:
    """File the observation for the pipeline and judge it against this profile's column."""
    ctx.extra["tx_observed"] = observed if observed in VALUES else UNDEFINED
    if v.level is Level.INFO:
        ctx.informational(observed, "atomicity is not observable without fault injection")
        return
    if ctx.expected == UNDEFINED:
        ctx.informational(observed, f"the {PROFILE_COLUMN[ctx.profile]} column says undefined")
        return
    ctx.check_profile(observed, f"tx table row {v.row!r}")


@pytest.mark.parametrize("v", TABLE_CASES)
def test_tx_table(v: Variant, amqp, ctx, cleanup, broker_url, request, queue_type):
    ctx.extra["tx_row"] = v.row
    ctx.extra["tx_observed"] = UNDEFINED  # until the variant observes its row
    observed = v.run(Env(amqp, ctx, cleanup, broker_url, request))
    record(ctx, v, observed)


# -- tx methods outside the table -----------------------------------------------------------------


@case_decorator(
    "tx.select-ok",
    sources=[TX_SOURCE],
    level=Level.MUST,
    description="tx.select on a fresh channel",
    expectation="the broker answers tx.select-ok (before the reply to any later method)",
)
def test_select_ok(amqp, ctx):
    ch = amqp.channel()
    tx_select(ch)
    ok = [e.describe() for e in ch.history() if isinstance(e.method, spec.Tx.SelectOk)]
    ctx.observe("reply to tx.select", ok[0])


NON_TRANSACTED = [
    param(Case(
        "tx.commit-non-transacted-406", rules=("tx.commit/transacted",), level=Level.MUST,
        description="tx.commit on a channel that never sent tx.select",
        expectation="the channel is closed with 406 PRECONDITION_FAILED",
    ), spec.Tx.Commit()),
    param(Case(
        "tx.rollback-non-transacted-406", rules=("tx.rollback/transacted",), level=Level.MUST,
        description="tx.rollback on a channel that never sent tx.select",
        expectation="the channel is closed with 406 PRECONDITION_FAILED",
    ), spec.Tx.Rollback()),
]


@pytest.mark.parametrize("method", NON_TRANSACTED)
def test_non_transacted(amqp, ctx, method: spec.Tx.Commit | spec.Tx.Rollback) -> None:
    ch = amqp.channel()
    ch.send(method)
    expect_channel_close(ch, 406, what=f"{method.name.lower()} on a non-transacted channel",
                         method=type(method))
