"""Routing: every exchange type's matching rule, one case a row of the routing table.

Documents: the AMQP 0-9-1 specification's exchange types (the PDF's 3.1.3: direct, fanout, topic,
headers; the XML's ``exchange/default-exchange``, ``queue.bind/direct-exchange-key-matching``,
``queue.bind/unique``), RabbitMQ's guides for its extensions (exchange-to-exchange bindings,
alternate exchanges, sender-selected distribution, x-local-random) and RabbitMQ 3.10.8's source
where only the code says it (the empty topic key, headers value comparison): see
``conformance/model/routing_sources.py``.

The table is data (``conformance/profiles/routing.toml``); each case builds its row's topology,
publishes the one message mandatory on a confirm channel and checks it from two sides: the
basic.return (sent iff no queue got it) and every queue's content (one copy where expected, none
elsewhere). Every case sets ``ctx.extra["routing_row"]`` / ``["routing_observed"]`` for the
report's routing table. The routing oracle (``routing.oracle-*``) runs the same model on bindings
and messages generated from a seed.
"""

from __future__ import annotations

from typing import Any

import pytest
from pamqp import commands as spec

from conformance.model.cases import Case, Level, param
from conformance.model.routing import VOID
from conformance.model.routing_table import Row, describe, expectation, rows
from conformance.protocol import RawChannel, SocketClosed, UnexpectedClose
from conformance.verify import Mismatch, Unsupported, expect_channel_close, settle_all
from conformance.verify.oracle import ORACLE_CASES, run_oracle_case

#: the value release data gives a row whose exchange type the applied release does not offer
NOT_OFFERED = "exchange type not offered"
PREMISE = "an exchange's matching rule: the queues it routes to are plain classic queues"


def _expected(row: Row) -> str | list[str]:
    """The row's expected value as profile data (release data may override it): ``routed`` / ``not
    routed`` for a short row, the queues that get a copy for a topology row."""
    if row.short:
        return "routed" if row.raw.get("routed") else "not routed"
    return sorted(row.expect)


def _e2e(row: Row) -> bool:
    return any(b["to"].startswith("e:") for b in row.raw.get("bindings", ()))


def _case(row: Row) -> Case:
    return Case(row.case_id, level=Level[row.level], rules=row.rules, sources=row.sources,
                description=describe(row) + (f" ({row.why})" if row.why else ""),
                expectation=expectation(row), wedges=row.level == "EXTENSION",
                requires=("publisher_confirms",) + (("exchange_exchange_bindings",) if _e2e(row) else ()),
                queue_types=("classic",), premise=PREMISE,
                default=_expected(row),
                expected_sources={"rabbitmq": "the routing table, profiles/routing.toml (RabbitMQ 3.10.8; "
                                  "where a release changed it, release data)"})


TABLE = [param(_case(r), r) for r in rows()]


def _wire(args: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if v is VOID else v) for k, v in args.items()}


def _declare(ch: RawChannel, name: str, type_: str, arguments: dict[str, Any] | None) -> None:
    """exchange.declare; a broker refusing a type outside the four required/recommended ones, or the
    alternate-exchange argument, does not offer it: UNSUPPORTED with its answer."""
    try:
        ch.declare_exchange(name, type_, arguments=arguments)
    except UnexpectedClose as exc:
        what = "the alternate-exchange argument" if arguments else f"exchange type {type_}"
        if type_ in ("direct", "fanout") and not arguments:
            raise
        raise Unsupported(f"the broker does not offer {what}", expected="exchange.declare-ok",
                          observed=exc.event.describe()) from exc


def _drain(ch: RawChannel, q: str, body: bytes) -> int:
    """How many copies of ``body`` queue ``q`` holds (taken with basic.get no-ack); another body
    there is a Mismatch (nothing else was published to it)."""
    n = 0
    while (ev := ch.get(q, no_ack=True)) is not None:
        if ev.body != body:
            raise Mismatch(f"message in {q}", expected=body, observed=ev.body)
        n += 1
        if n > 4:
            break
    return n


def _bind_all(ch: RawChannel, ctx: Any, row: Row, topo: Any) -> bool:
    """Every binding of the row; False when the row's point is a refused binding (checked here)."""
    for b in topo.bindings:
        kind, _, dest = b.destination.partition(":")
        args = _wire(dict(b.args)) or None
        if row.bind_error:
            ch.send(spec.Queue.Bind(queue=dest, exchange=b.source, routing_key=b.key, arguments=args))
            expect_channel_close(ch, row.bind_error, method=spec.Queue.Bind,
                                 what=f"queue.bind with arguments {args}")
            ctx.extra["routing_observed"] = f"refused {row.bind_error}"
            return False
        method: Any = (
            spec.Queue.Bind(queue=dest, exchange=b.source, routing_key=b.key, arguments=args) if kind == "q"
            else spec.Exchange.Bind(destination=dest, source=b.source, routing_key=b.key, arguments=args))
        try:
            ch.rpc(method)
        except UnexpectedClose as exc:
            if row.level != "EXTENSION" or isinstance(exc.event, SocketClosed):
                raise
            # a RabbitMQ extension's binding refused: the broker does not offer it
            raise Unsupported(f"the broker refuses the binding {b.key!r} {args or ''}",
                              expected=f"{method.name.lower()}-ok", observed=exc.event.describe()) from exc
    return True


def _check_landing(ctx: Any, row: Row, got: dict[str, int], returned: list[Any]) -> None:
    """Where the message landed (one copy per expected queue) and its basic.return, both checked."""
    routed = sorted(q for q, n in got.items() if n)
    if row.short:
        n = got["q"]
        ctx.extra["routing_observed"] = "routed" if n == 1 else "not routed" if not n else f"{n} copies"
    else:
        ctx.extra["routing_observed"] = ",".join(routed) if routed else "none"
    if row.one_of:
        others = any(n for q, n in got.items() if q not in row.one_of)
        if sum(got[q] for q in row.one_of) != 1 or others:
            raise Mismatch("copies per queue", expected=f"exactly one copy in one of {list(row.one_of)}",
                           observed=got)
        ctx.extra["routing_observed"] = "one of"
    else:
        want = ctx.expected
        expect = (("q",) if want == "routed" else ()) if row.short else tuple(want)
        ctx.check(got, {q: int(q in expect) for q in row.queues()}, "copies per queue")
    first = returned[0].method if returned else None
    seen = ("no basic.return" if first is None else
            "basic.return 312" if first.reply_code == 312 else returned[0].describe())
    ctx.check(seen, "no basic.return" if any(got.values()) else "basic.return 312",
              "mandatory publish's return")


@pytest.mark.parametrize("row", TABLE)
def test_routing_row(isolated, ctx, row: Row) -> None:
    ctx.extra["routing_row"] = row.id
    ctx.extra["routing_observed"] = "undefined"
    if row.since and ctx.expected == NOT_OFFERED:
        raise Unsupported(f"RabbitMQ offers the exchange type from {row.since} on; the applied release "
                          f"({ctx.release or 'not RabbitMQ'}) does not",
                          expected=f"RabbitMQ >= {row.since}", observed=ctx.release or ctx.profile)
    names: dict[str, str] = {}

    def name_of(sym: str) -> str:
        if sym not in names:
            names[sym] = ctx.name(sym)
        return names[sym]

    topo, x, msg = row.build(name_of)
    ch = isolated.channel()
    for ex, type_ in topo.exchanges.items():
        isolated.exchange(ex)
        ae = topo.alternates.get(ex)
        _declare(ch, ex, type_, {"alternate-exchange": ae} if ae else None)
    for q in topo.queues:
        ch.declare_queue(isolated.queue(q))
    if not _bind_all(ch, ctx, row, topo):
        return
    for b in row.unbinds(name_of):  # each unbind must be answered with its unbind-ok
        kind, _, dest = b.destination.partition(":")
        args = _wire(dict(b.args)) or None
        unbind: Any = (
            spec.Queue.Unbind(queue=dest, exchange=b.source, routing_key=b.key, arguments=args) if kind == "q"
            else spec.Exchange.Unbind(destination=dest, source=b.source, routing_key=b.key, arguments=args))
        ch.rpc(unbind)
    ch.confirm_select()
    body = f"routing {row.id}".encode()
    headers = _wire(dict(msg.headers)) if row.has_headers() else None
    ch.publish(x, msg.routing_key, body, mandatory=True, properties=spec.Basic.Properties(headers=headers))
    st = settle_all(ch, 1, ctx.timeout)
    returned = [e for e in ch.history() if isinstance(e.method, spec.Basic.Return)]
    got = {q: _drain(ch, name_of(q), body) for q in row.queues()}
    ctx.observe("copies per queue", got)
    if st.nacked:
        raise Mismatch("publisher confirm", expected="basic.ack", observed=st.summary())
    _check_landing(ctx, row, got, returned)


@pytest.mark.parametrize("family,flavour", ORACLE_CASES)
def test_routing_oracle(isolated, ctx, family: str, flavour: str) -> None:
    run_oracle_case(isolated, ctx, family, flavour)
