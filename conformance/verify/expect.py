"""``expect_*`` helpers: one place that turns broker behaviour into clear expected-vs-observed.

Each helper either returns (the expectation held), raises :class:`~conformance.model.verdicts.Mismatch`
(the broker did something else: FAIL or NON_STRICT by the case's level) or raises
:class:`~conformance.model.verdicts.CaseTimeout` (the broker said nothing within the deadline).

Where a broker could *silently accept* an invalid method (no reply is ever due), the helpers
send a synchronous probe after it (:meth:`RawChannel.barrier`): an answer to the probe proves the
broker processed the invalid method without the required error, which is a precise FAIL instead
of a TIMEOUT.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from pamqp import commands as spec
from pamqp.base import Frame

from conformance.model.verdicts import CaseTimeout, Mismatch
from conformance.protocol.raw import (
    Event,
    RawChannel,
    RawConnection,
    SocketClosed,
    UnexpectedClose,
    method_name,
    reply_name,
)
from conformance.verify.confirms import settle_all


def quiet_window(timeout: float) -> float:
    """How long to listen for something that must not come: short, scaled from the case timeout.

    One tenth of the case timeout (1 s at the default 10 s), at least 0.2 s and at most 1 s. The
    longer of the two windows the suite once had (tx used a twentieth): a silence assertion that
    ends too soon passes on a broker that is merely slow, and on a loaded machine 0.5 s is close
    to a scheduling hiccup; the upper bound keeps a run with a long --case-timeout quick."""
    return max(0.2, min(1.0, timeout / 10))


# How long to keep listening for a late close after the probe has been answered.
LATE_CLOSE_GRACE = 1.0
# How long to wait for the broker's own answer (a close, a reply) before a probe goes out, at most
# (and at most a fifth of the timeout). A broker that ends the connection while a probe is still
# unread in its socket buffer makes its kernel reset the connection, and the client can then lose
# the connection.close sent before the reset (seen on RabbitMQ 3.10: channel.open beyond
# channel-max, exchange.declare of an unknown type). The answer normally comes well inside the
# window, so only a broker that stays silent pays it, once, before the probe tells "ignored" from
# "slow" (verify/outcomes.py uses the same window).
PROBE_SETTLE = 1.0


def settle_window(limit: float) -> float:
    return min(PROBE_SETTLE, limit / 5)


def reply_or_probe(ch: RawChannel, replies: tuple[type, ...], what: str, *,
                   timeout: float | None = None) -> Event:
    """The broker's answer to the method just sent on ``ch``: an event of ``replies``, or the
    answer to a probe (``exchange.declare-ok`` of ``amq.direct``) when that comes first -- the
    method was ignored. The probe goes out only when no reply came within the settle window (see
    ``PROBE_SETTLE``), so it is never pipelined behind a method the broker answers by ending the
    connection; when the reply comes after a probe, the probe's answer is taken too. A close that
    comes first raises :class:`UnexpectedClose` with that close (also when the probe's send finds
    the connection already closed by the broker)."""
    conn = ch.conn
    limit = conn.timeout if timeout is None else timeout
    try:
        return conn.wait_event(ch.id, lambda e: isinstance(e.method, replies), what,
                               timeout=settle_window(limit))
    except CaseTimeout:
        pass
    ch.barrier_send(timeout=limit)
    ev = conn.wait_event(ch.id, lambda e: isinstance(e.method, (*replies, spec.Exchange.DeclareOk)), what,
                         timeout=limit)
    if not isinstance(ev.method, spec.Exchange.DeclareOk):
        conn.wait_event(ch.id, lambda e: isinstance(e.method, spec.Exchange.DeclareOk),
                        "the probe's exchange.declare-ok", timeout=limit)
    return ev


# The running case's context, set for every conformance case by ``conformance.verify.fixtures``,
# so that a bare :func:`check` records what it observed exactly as ``ctx.check`` does.
ACTIVE_CONTEXT: ContextVar[Any] = ContextVar("amqp_conformance_case_context", default=None)


def record(what: str, observed: Any) -> None:
    """Record an observation in the running case (if any): every ``expect_*`` helper that holds
    says what it saw, so a PASS record shows the broker's answer, not just "as expected"."""
    ctx = ACTIVE_CONTEXT.get()
    if ctx is not None:
        ctx.observe(what, observed)


def check(observed: Any, expected: Any, what: str) -> None:
    """``ctx.check`` for code that has no ``ctx`` at hand (the pika / aio-pika case bodies):
    record ``observed`` under ``what`` in the running case, then compare; a difference is a
    Mismatch naming what differed. Case bodies with a ``ctx`` call ``ctx.check``."""
    ctx = ACTIVE_CONTEXT.get()
    if ctx is not None:
        ctx.check(observed, expected, what)
        return
    if observed != expected:
        raise Mismatch(what, expected=expected, observed=observed)


def expect_channel_close(ch: RawChannel, code: int, *, what: str = "", probe: bool = True,
                         timeout: float | None = None, method: type[Frame] | None = None,
                         scope: bool = True) -> Event:
    """The broker closes ``ch`` with ``code`` (a soft error).

    ``method``: the method class that provoked the error, when the scenario determines it; the
    close must name it in its class-id and method-id (amqp0-9-1.xml, channel.close: "when a close
    is due to an exception, the sender provides the class and method id of the method which
    caused the exception"). ``scope``: a channel error ends that channel only, so the same
    connection must still open a fresh channel and answer a round trip on it
    (:func:`expect_connection_usable`); off only where the scenario itself ends the connection.
    """
    expected = f"channel.close {reply_name(code)}" + (f" ({what})" if what else "")
    ev = _await_close(ch, expected, probe=probe, timeout=timeout)
    if isinstance(ev, SocketClosed):
        raise Mismatch(what or "channel close", expected=expected, observed=ev.describe())
    if isinstance(ev.method, spec.Connection.Close):
        raise Mismatch(what or "channel close", expected=expected,
                       observed=f"connection closed instead: {ev.describe()}")
    if ev.method.reply_code != code:
        raise Mismatch(what or "channel close reply code", expected=expected, observed=ev.describe())
    if method is not None:
        _expect_failing_method(ev, method, expected)
    if scope:
        expect_connection_usable(ch.conn, after=ev.describe(), timeout=timeout)
    record(what or "channel close", ev.describe())
    return ev


def method_ids(method: type[Frame]) -> tuple[int, int]:
    """The (class-id, method-id) pair of a method class (pamqp keeps both in ``index``)."""
    return method.index >> 16, method.index & 0xFFFF


def _expect_failing_method(ev: Event, method: type[Frame], expected: str) -> None:
    class_id, method_id = method_ids(method)
    got = (int(ev.method.class_id), int(ev.method.method_id))
    if got != (class_id, method_id):
        raise Mismatch(
            "the close's class-id and method-id (the method that caused it)",
            expected=f"{expected} naming {method_name(method)} (class {class_id}, method {method_id})",
            observed=ev.describe(),
        )


def expect_connection_usable(conn: RawConnection, *, after: str, timeout: float | None = None) -> None:
    """After a channel error, the connection and its other channels carry on: a fresh channel
    opens and answers a round trip (the spec's soft errors close the channel only; a broker that
    escalates to connection.close or goes silent breaks every other channel of the client)."""
    limit = conn.timeout if timeout is None else timeout
    deadline = time.monotonic() + limit  # one deadline for the three round trips together
    expected = "a fresh channel on the same connection opens and answers a round trip"
    try:
        fresh = conn.channel_within(limit)
        fresh.barrier(timeout=max(0.0, deadline - time.monotonic()))
        fresh.close(timeout=max(0.0, deadline - time.monotonic()))
    except UnexpectedClose as exc:
        scope = (
            "the connection"
            if not isinstance(exc.event, Event) or exc.event.channel == 0
            else "the fresh channel"
        )
        raise Mismatch("channel error scope", expected=f"after {after}: {expected}",
                       observed=f"channel error escalated to {scope}: {exc.event.describe()}") from exc
    except CaseTimeout as exc:
        raise Mismatch("channel error scope", expected=f"after {after}: {expected}",
                       observed=f"the connection went silent after the channel error: no {exc.waiting_for} "
                                f"within {limit:.1f}s") from exc
    record("channel error scope", "the connection carried on: a fresh channel opened and answered")


def expect_connection_close(conn: RawConnection, code: int, *, what: str = "",
                            probe_channel: RawChannel | None = None, timeout: float | None = None,
                            probe_after: float | None = None) -> Event:
    """The broker closes the whole connection with ``code`` (a hard error).

    With ``probe_channel``, a probe on it tells a broker that ignored the method from a slow one;
    it goes out only after waiting ``probe_after`` seconds (default: a fifth of the timeout, at
    most 1 s) for the close. A broker that closes its socket while the probe is still unread in
    its buffer makes the kernel send a reset, and the client can lose the connection.close that
    came before it (RabbitMQ 3.10 on channel.open beyond channel-max, about one run in two)."""
    expected = f"connection.close {reply_name(code)}" + (f" ({what})" if what else "")
    if probe_after is None:
        probe_after = settle_window(conn.timeout if timeout is None else timeout)
    early: Event | SocketClosed | None = None
    if probe_channel is not None and probe_after > 0:
        try:
            early = conn.wait_connection_close(timeout=probe_after, what=expected)
        except CaseTimeout:
            early = None
    if early is not None:
        ev = early
    elif probe_channel is not None:
        ev = _await_close(probe_channel, expected, probe=True, timeout=timeout, connection_level=True,
                          settle=0.0)  # the settle wait was probe_after
    else:
        ev = conn.wait_connection_close(timeout=timeout, what=expected)
    if isinstance(ev, SocketClosed):
        raise Mismatch(what or "connection close", expected=expected,
                       observed=f"{ev.describe()} without connection.close")
    if isinstance(ev.method, spec.Channel.Close):
        raise Mismatch(what or "connection close", expected=expected,
                       observed=f"only the channel was closed: {ev.describe()}")
    if ev.method.reply_code != code:
        raise Mismatch(what or "connection close reply code", expected=expected, observed=ev.describe())
    record(what or "connection close", ev.describe())
    return ev


def _await_close(ch: RawChannel, expected: str, *, probe: bool, timeout: float | None,
                 connection_level: bool = False, settle: float | None = None) -> Event | SocketClosed:
    conn = ch.conn
    limit = conn.timeout if timeout is None else timeout

    if probe:
        window = settle_window(limit) if settle is None else settle
        if window > 0:
            try:  # the close itself, before any probe is sent (see PROBE_SETTLE)
                return _wait_any_close(conn, ch.id, window, expected)
            except CaseTimeout:
                pass
        try:
            ch.barrier(timeout=limit)
        except UnexpectedClose as exc:
            if isinstance(exc.event, Event):
                conn.discard(exc.event.channel, exc.event)
            return exc.event
        except CaseTimeout as exc:
            raise CaseTimeout(expected, limit, observed="no close and no answer to a probe") from exc
        # The probe was answered: the broker carried on. Allow a short grace for a close
        # that a broker sends asynchronously after the probe's answer.
        try:
            return _wait_any_close(conn, ch.id, min(LATE_CLOSE_GRACE, limit), expected)
        except CaseTimeout as exc:
            scope = "connection" if connection_level else "channel"
            raise Mismatch(f"the {scope} stayed open", expected=expected,
                           observed=f"{scope} still open: a probe (exchange.declare passive amq.direct) "
                                    "was answered normally") from exc
    return _wait_any_close(conn, ch.id, limit, expected)


def _wait_any_close(conn: RawConnection, channel: int, limit: float, expected: str) -> Event | SocketClosed:
    try:
        return conn.wait_event(channel, lambda e: isinstance(e.method, spec.Channel.Close), expected,
                               timeout=limit, close_is_error=False)
    except UnexpectedClose as exc:
        if isinstance(exc.event, Event):
            conn.discard(exc.event.channel, exc.event)
        return exc.event
    except CaseTimeout:
        if conn.closed_by_broker is not None:
            return conn.closed_by_broker
        raise


def expect_ok(fn: Callable[[], Any], what: str) -> Any:
    """Run an operation that must succeed; a broker close becomes a Mismatch naming ``what``."""
    try:
        result = fn()
    except UnexpectedClose as exc:
        raise Mismatch(what, expected=f"{what} succeeds", observed=exc.event.describe()) from exc
    record(what, "succeeded")
    return result


def expect_no_delivery(ch: RawChannel, within: float, *, what: str = "no delivery") -> None:
    """Nothing is delivered on ``ch`` for ``within`` seconds (silence is the expectation)."""
    try:
        ev = ch.next_delivery(timeout=within, what=what)
    except CaseTimeout:
        record(what, f"no basic.deliver within {within:.1f}s")
        return
    raise Mismatch(what, expected=f"no basic.deliver within {within:.1f}s", observed=ev.describe())


def expect_get_empty(ch: RawChannel, queue: str, *, what: str = "queue is empty") -> None:
    ev = ch.get(queue, no_ack=True)
    if ev is not None:
        raise Mismatch(what, expected="basic.get-empty", observed=ev.describe())
    record(what, "basic.get-empty")


def drain_confirms(ch: RawChannel, last_seq: int, *, timeout: float | None = None) -> list[Event]:
    """Collect basic.ack / basic.nack until every sequence number 1..``last_seq`` is settled
    (:class:`~conformance.verify.confirms.Settlement` reads them); the confirm frames."""
    return settle_all(ch, last_seq, timeout, what=f"confirms of publishes 1..{last_seq}").events


def summarize(events: Sequence[Event], limit: int = 6) -> str:
    shown = [e.describe() for e in events[:limit]]
    more = f" (+{len(events) - limit} more)" if len(events) > limit else ""
    return "; ".join(shown) + more if shown else "nothing"


def names(events: Sequence[Event]) -> list[str]:
    return [method_name(e.method) for e in events]


# --- provoke ---
# Methods that make a broker raise a known error, written once for the cases that need one.
#
# Several areas need "a soft error on this channel" or "a hard error on this connection" as a
# step before what they actually check (the scope of an error, the class-id/method-id of a close,
# the close handshake). These helpers send the offending method and expect the close it must
# cause, recording it like every ``expect_*``:
#
# - :func:`expect_passive_missing`: a passive declare of an entity that does not exist — channel.close
#   404 NOT_FOUND naming the declare (``queue.declare/passive``, ``exchange.declare/not-found``).
# - :func:`open_again` / :func:`expect_second_open`: channel.open on a channel that is already open —
#   connection.close 504 CHANNEL_ERROR (``channel.open/state``, a hard error).


def expect_passive_missing(ch: RawChannel, declare: Frame, what: str) -> Event:
    """Send ``declare`` (a passive queue.declare or exchange.declare of an entity that does not
    exist) and expect channel.close 404 naming it."""
    ch.send(declare)
    return expect_channel_close(ch, 404, what=what, method=type(declare))


def open_again(conn: RawConnection, ch: RawChannel) -> None:
    """Send channel.open on ``ch``, which is already open: a 504 connection exception."""
    conn.send_method(ch.id, spec.Channel.Open())


def expect_second_open(conn: RawConnection, ch: RawChannel, what: str = "second channel.open") -> Event:
    """:func:`open_again`, then expect connection.close 504 (probed on ``ch``)."""
    open_again(conn, ch)
    return expect_connection_close(conn, 504, what=what, probe_channel=ch)
