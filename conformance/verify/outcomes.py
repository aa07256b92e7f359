"""Send one method plus a probe and classify what the broker did with it.

:func:`outcome` turns "what did the broker do with this method" into one short, comparable string
(``queue.declare-ok``, ``channel.close 404``, ``connection.close 504``, ``socket closed``,
``no reply …``) plus the full description; :func:`check_outcome` compares it with the case's
expected value — per profile where brokers legitimately differ, with ``*`` wildcards where the
spec requires *an* error but names no code. :func:`answer` is the same for a synchronous method
whose reply names the error in full (``channel.close 405 RESOURCE_LOCKED``).
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable
from typing import Any, Protocol

from pamqp import commands as spec

from conformance.model.cases import Case
from conformance.model.verdicts import CaseTimeout, Mismatch, Strictness
from conformance.protocol.raw import Event, RawChannel, SocketClosed, UnexpectedClose
from conformance.protocol.wire import method_name, short_method
from conformance.verify.expect import LATE_CLOSE_GRACE, PROBE_SETTLE

# A synchronous probe sent after the method under test: AMQP processes a channel's methods in
# order, so an answer to the probe *before* any reply proves the method was dropped.
PROBE_EXCHANGE = "amq.direct"
# How long :func:`outcome` waits for the broker's own answer before it sends the probe (see
# ``expect.PROBE_SETTLE``: a probe left unread in a broker that ends the connection can cost the
# client the connection.close). An asynchronous method has no reply: an error, if any, comes at
# once, so its window is shorter.
SETTLE_SYNC = PROBE_SETTLE
SETTLE_ASYNC = 0.3


class CaseContextLike(Protocol):
    """What these helpers read and write of the plugin's per-case context (``ctx``)."""

    case: Case | None
    profile: str
    observed: dict[str, Any]

    @property
    def expected(self) -> Any: ...

    def observe(self, key: str, value: Any) -> Any: ...


def short(ev: Event | SocketClosed, *, names: bool = True) -> str:
    """``channel.close 405 RESOURCE_LOCKED`` / ``queue.declare-ok`` / ``socket closed``
    (``names=False``: ``channel.close 405``)."""
    return short_method(None if isinstance(ev, SocketClosed) else ev.method, names=names)


def _probe() -> spec.Exchange.Declare:
    return spec.Exchange.Declare(exchange=PROBE_EXCHANGE, exchange_type="direct", passive=True)


def _code(ev: Event | SocketClosed) -> str:
    """The outcome tables' form: ``channel.close 404`` (codes only, so ``channel.close *``
    matches any channel error), ``queue.declare-ok``, ``socket closed``."""
    return short(ev, names=False)


def _closed_since(ch: RawChannel, after: int) -> tuple[str, str] | None:
    """The connection.close the broker sent after event ``after``, as an outcome, if any."""
    closed = ch.conn.closed_by_broker
    if closed is not None and closed.seq > after:
        return _code(closed), closed.describe()
    return None


def _first_answer(ch: RawChannel, after: int, match: Callable[[Event], bool], what: str,
                  limit: float) -> Event | tuple[str, str]:
    """The first event after ``after`` that ``match`` accepts, or the close that came instead."""
    deadline = time.monotonic() + limit
    while True:
        # Short slices so a connection.close (filed on channel 0) ends the wait promptly even
        # when the broker keeps the socket open after close-ok.
        closed = _closed_since(ch, after)
        if closed is not None:
            return closed
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CaseTimeout(what, limit)
        try:
            return ch.conn.wait_event(ch.id, match, what, timeout=min(0.2, remaining), close_is_error=False)
        except UnexpectedClose as exc:
            return _code(exc.event), exc.event.describe()
        except CaseTimeout:
            continue


def _late_close(ch: RawChannel, after: int, answered: int, grace: float) -> tuple[str, str] | None:
    """A close that arrives within ``grace`` seconds after the probe's answer (event ``answered``)."""
    until = time.monotonic() + grace
    while time.monotonic() < until:
        closed = _closed_since(ch, after)
        if closed is not None:
            return closed
        try:
            late = ch.conn.wait_event(
                ch.id,
                lambda e: e.seq > answered and isinstance(e.method, spec.Channel.Close),
                "a late close",
                timeout=0.1,
                close_is_error=False,
            )
            return _code(late), late.describe()
        except UnexpectedClose as exc:
            return _code(exc.event), exc.event.describe()
        except CaseTimeout:
            continue
    return None


def outcome(ch: RawChannel, method: Any, ok: type | tuple[type, ...] = (), *, raw: bytes | None = None,
            timeout: float | None = None) -> tuple[str, str]:
    """Send ``method`` (or the hand-made ``raw`` frame bytes) and a probe; return (short, detail).

    The first of: a reply of type ``ok``, a channel.close, a connection.close or the socket's
    end decides. If the probe is answered first the method was silently dropped (or, for an
    asynchronous method with ``ok=()``, accepted): ``no reply (probe answered)``. The probe goes
    out once the broker has answered, or after a short settle window if it has not (see
    ``SETTLE_SYNC``); after a reply it still checks that the channel carries on.
    """
    conn = ch.conn
    oks = ok if isinstance(ok, tuple) else (ok,)
    # Only what arrives after this send counts (an earlier close may still be pending).
    after = max((e.seq for e in ch.history()), default=0)
    limit = conn.timeout if timeout is None else timeout
    started = time.monotonic()
    name = method_name(method) if method is not None else "the frame"
    replies = " or ".join(method_name(t) for t in oks) or "an error or the probe's answer"
    waiting_for = f"{replies} (reply to {name})"
    settle = min(SETTLE_SYNC if oks else SETTLE_ASYNC, limit / 5)

    def match(e: Event) -> bool:
        return e.seq > after and isinstance(e.method, (*oks, spec.Channel.Close, spec.Exchange.DeclareOk))

    probed = False
    try:
        if raw is not None:
            conn.send_bytes(raw)
        else:
            ch.send(method)
        try:
            first = _first_answer(ch, after, match, waiting_for, settle)
        except CaseTimeout:  # no answer yet: the probe tells a dropped method from a slow one
            conn.send_if_open(ch.id, _probe())
            probed = True
            remaining = max(0.0, limit - (time.monotonic() - started))
            first = _first_answer(ch, after, match, waiting_for, remaining)
        if not isinstance(first, Event):
            return first
        ev = first
        if isinstance(ev.method, spec.Exchange.DeclareOk) and spec.Exchange.DeclareOk not in oks:
            if not oks:
                # An asynchronous method or a bare frame has no reply: allow a short grace for an
                # error the broker raises after answering the probe.
                late = _late_close(ch, after, ev.seq, min(LATE_CLOSE_GRACE, limit))
                return late or ("accepted (probe answered)", f"no error for {name}; the probe was answered")
            return "no reply (probe answered)", (f"no reply to {name}: the broker answered a later probe "
                                                  f"(exchange.declare passive {PROBE_EXCHANGE}) instead")
        if isinstance(ev.method, spec.Channel.Close):
            return _code(ev), ev.describe()  # the broker discards a probe sent after its close
        if not probed:
            conn.send_if_open(ch.id, _probe())  # the channel must carry on after the reply
    except UnexpectedClose as exc:
        return _code(exc.event), exc.event.describe()
    # Take the probe's own answer too, so it cannot be mistaken for a reply by a later call.
    try:
        conn.wait_event(ch.id, lambda e: e.seq > ev.seq and isinstance(e.method, spec.Exchange.DeclareOk),
                        "the probe's answer", timeout=limit)
    except UnexpectedClose as exc:
        return f"{_code(ev)} then {_code(exc.event)}", f"{ev.describe()}, then {exc.event.describe()}"
    return _code(ev), ev.describe()


def expected_patterns(expected: Any) -> tuple[str, ...]:
    """A case's expected outcome as a tuple of ``fnmatch`` patterns (it is one or several)."""
    return tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)


def matches(short_text: str, patterns: tuple[str, ...]) -> bool:
    """Whether an outcome in short form (``channel.close 404``) matches one of ``patterns``."""
    return any(fnmatch.fnmatchcase(short_text, p) for p in patterns)


def check_outcome(ctx: CaseContextLike, observed: tuple[str, str], what: str) -> None:
    """Compare an :func:`outcome` with the case's expected value for this profile.

    The expected value is a pattern (``fnmatch``: ``channel.close *`` = any channel error) or a
    tuple of patterns. A difference from profile data (the case names this profile) is a FAIL;
    otherwise the case's level decides (FAIL for MUST, NON_STRICT for SHOULD/MAY).
    """
    short_text, detail = observed
    patterns = expected_patterns(ctx.expected)
    ctx.observed[what] = detail
    keep = getattr(ctx, "keep_release_value", None)
    if keep is not None:
        keep(short_text)  # a release-keyed case's value (which release a broker behaves like)
    if matches(short_text, patterns):
        return
    case_ = ctx.case
    source = getattr(ctx, "expected_source", None) or (case_.source_for(ctx.profile) if case_ else "")
    profile_data = case_ is not None and (ctx.profile in case_.expected or source.startswith("RabbitMQ "))
    raise Mismatch(f"{what} (profile {ctx.profile}: {source})", expected=" or ".join(patterns),
                   observed=detail, strictness=Strictness.BINDING if profile_data else None)


def answer(ctx: CaseContextLike, ch: RawChannel, method: Any) -> str:
    """Send a synchronous method and return the broker's answer — its reply or the close it
    sent instead — in short form; the full answer is recorded as observed."""
    ch.send(method)
    names = tuple(method.valid_responses or ())
    try:
        ev: Event | SocketClosed = ch.conn.wait_event(
            ch.id, lambda e: e.method.name in names, f"reply to {method_name(method)}")
    except UnexpectedClose as exc:
        ev = exc.event
        if isinstance(ev, Event):
            ch.conn.discard(ev.channel, ev)  # dealt with: never read again as a later answer
    ctx.observe("broker answer", ev.describe())
    return short(ev)
