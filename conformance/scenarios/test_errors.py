"""Error codes and their scope: soft errors close one channel, hard errors the whole connection,
and every close names the offending class and method.

Documents: the spec XML's reply-code constants (``amqp0-9-1.xml#constants``: soft-error /
hard-error classes), ``channel.close`` / ``connection.close`` (reply-code, class-id, method-id) and
``channel.open/state``.
"""

from __future__ import annotations

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import UnexpectedClose
from conformance.verify import (
    CaseTimeout,
    Mismatch,
    aio_pika_session,
    check,
    expect_passive_missing,
    expect_second_open,
    outcome,
    pika_session,
    run_async,
)

SPEC_CONSTANTS = "amqp0-9-1.xml#constants"


def _missing_queue(ctx) -> spec.Queue.Declare:
    """A passive queue.declare of a queue that does not exist (a 404 soft error)."""
    return spec.Queue.Declare(queue=ctx.name("missing"), passive=True)


# -- cases ---------------------------------------------------------------------------------------


@case(
    "errors.soft-error-keeps-other-channels", sources=[f"{SPEC_CONSTANTS} (not-found 404: soft-error)"],
    rules=["exchange.declare/not-found"], level=Level.MUST,
    description="A 404 on one channel leaves the other channels of the same connection working",
    expectation="channel 1 is closed with 404; channel 2 of the same connection still answers queue.declare",
)
def test_soft_error_scope(amqp, ctx, cleanup):
    conn = amqp()
    ch1, ch2 = conn.channel(), conn.channel()
    q = cleanup.queue(ctx.name("q"))
    missing = spec.Exchange.Declare(exchange=ctx.name("missing"), exchange_type="direct", passive=True)
    expect_passive_missing(ch1, missing, "passive declare of a missing exchange")
    ok = outcome(ch2, spec.Queue.Declare(queue=q), spec.Queue.DeclareOk)
    ctx.observe("channel 2 after the soft error on channel 1", ok[1])
    ctx.check(ok[0], "queue.declare-ok", "queue.declare on the other channel after a soft error")


@case("errors.hard-error-ends-all-channels", rules=["channel.open/state"],
      sources=[f"{SPEC_CONSTANTS} (channel-error 504: hard-error)"], level=Level.MUST,
      description=(
          "A connection exception (504 from a second channel.open) ends every channel of the connection"
      ),
      expectation="connection.close 504; a queue.declare then sent on the other channel is never answered")
def test_hard_error_scope(amqp, ctx, cleanup):
    conn = amqp()
    ch1, ch2 = conn.channel(), conn.channel()
    q = cleanup.queue(ctx.name("q"))
    expect_second_open(conn, ch1, "channel.open on an open channel")
    # Spec connection.close: after sending close the broker discards every method but
    # close/close-ok, so the declare on channel 2 must never be answered.
    try:
        ch2.send(spec.Queue.Declare(queue=q))
    except UnexpectedClose:
        return  # the socket is already gone: nothing can arrive on channel 2
    try:
        ev = conn.wait_event(ch2.id, lambda e: True, "anything on channel 2 after connection.close",
                             timeout=min(1.0, ctx.timeout), close_is_error=False)
    except (UnexpectedClose, CaseTimeout):
        return  # the socket ended, or silence: channel 2 is gone
    raise Mismatch("channel 2 after a connection exception", expected="nothing on channel 2",
                   observed=f"channel 2 received {ev.describe()}")


def _names_method(scope: str, rule: str, expectation: str, names: tuple[int, int]) -> object:
    """A provoked ``scope``.close names the method that caused it: (class-id, method-id) ``names``."""
    return param(Case(
        f"errors.{scope}-close-names-method", rules=(rule,),
        sources=(f"amqp0-9-1.xml#{scope}.close (class-id, method-id)",), level=Level.MUST,
        description=f"A {scope}.close names the method that caused it", expectation=expectation,
    ), scope, names)


NAMES_METHOD = [
    _names_method("channel", "queue.declare/passive",
                  "passive queue.declare of a missing queue → channel.close 404 with class-id 50, "
                  "method-id 10",
                  (50, 10)),
    _names_method("connection", "channel.open/state",
                  "a second channel.open → connection.close 504 with class-id 20, method-id 10", (20, 10)),
]


@pytest.mark.parametrize(("scope", "names"), NAMES_METHOD)
def test_close_names_method(amqp, ctx, scope: str, names: tuple[int, int]) -> None:
    if scope == "channel":
        ev = expect_passive_missing(amqp.channel(), _missing_queue(ctx), "passive declare of a missing queue")
    else:
        conn = amqp()
        ev = expect_second_open(conn, conn.channel())
    ctx.check((ev.method.class_id, ev.method.method_id), names, f"{scope}.close (class-id, method-id)")


@case("errors.channel-reusable-after-close", rules=["channel.open/state"],
      sources=["amqp0-9-1.xml#channel.close-ok"], level=Level.MUST,
      description="After a channel exception and close-ok, the same channel number can be opened again",
      expectation="channel.open on the closed channel's number is answered with channel.open-ok")
def test_channel_reusable_after_close(amqp, ctx):
    conn = amqp()
    ch = conn.channel()
    expect_passive_missing(ch, _missing_queue(ctx), "passive declare of a missing queue")
    got = outcome(ch, spec.Channel.Open(), spec.Channel.OpenOk)
    ctx.check(got[0], "channel.open-ok", f"channel.open on channel {ch.id} after its close-ok")


@case("errors.pika-soft-error-keeps-connection", rules=["exchange.declare/not-found"],
      sources=[f"{SPEC_CONSTANTS} (not-found 404: soft-error)"], level=Level.MUST, client="pika",
      description="pika: a 404 closes only the channel; the connection opens a new channel and works",
      expectation=(
          "exchange_declare(passive=True) raises ChannelClosedByBroker(404); a new channel declares a queue"
      ))
def test_pika_soft_error(broker_url, ctx, cleanup):
    from pika import exceptions as pex

    with pika_session(broker_url, ctx.timeout, "pika soft error scenario") as conn:
        ch = conn.channel()
        try:
            ch.exchange_declare(ctx.name("missing"), exchange_type="direct", passive=True)
            raise Mismatch("passive exchange_declare of a missing exchange",
                           expected="ChannelClosedByBroker 404", observed="declare-ok")
        except pex.ChannelClosedByBroker as exc:
            check(exc.reply_code, 404, "pika ChannelClosedByBroker reply code")
        q = cleanup.queue(ctx.name("q"))
        ok = conn.channel().queue_declare(q)
        check(ok.method.queue, q, "queue declared on a new channel of the same connection")
        check(conn.is_open, True, "pika connection still open")


@case("errors.aio-pika-soft-error-keeps-connection", rules=["queue.declare/passive"],
      sources=[f"{SPEC_CONSTANTS} (not-found 404: soft-error)"], level=Level.MUST, client="aio-pika",
      description="aio-pika: a 404 on one channel leaves another channel of the same connection usable",
      expectation=(
          "declare_queue(passive=True) raises ChannelNotFoundEntity; another channel publishes and "
          "gets a message"
      ))
def test_aio_pika_soft_error(broker_url, ctx, cleanup):
    import aio_pika
    from aiormq import exceptions as aex

    q = cleanup.queue(ctx.name("q"))

    async def scenario() -> tuple[str, bytes | None]:
        async with aio_pika_session(broker_url, ctx.timeout) as conn:
            good = await conn.channel()
            bad = await conn.channel()
            try:
                await bad.declare_queue(ctx.name("missing"), passive=True)
                raised = "declare-ok"
            except aex.ChannelNotFoundEntity as exc:
                raised = f"ChannelNotFoundEntity {exc.args[:1]}"
            queue = await good.declare_queue(q)
            await good.default_exchange.publish(aio_pika.Message(b"still-works"), routing_key=q)
            msg = await queue.get(timeout=ctx.timeout, fail=False)
            return raised, (msg.body if msg else None)

    raised, body = run_async(scenario(), ctx.timeout * 2, "aio-pika soft error scenario")
    ctx.observe("passive declare of a missing queue", raised)
    check(raised.startswith("ChannelNotFoundEntity"), True, "passive declare of a missing queue raised 404")
    check(body, b"still-works", "message published and got on the other channel")
