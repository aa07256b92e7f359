"""Limits a client can observe: the negotiated frame-max and channel-max, the broker's maximum
message size, the memory alarm (``connection.blocked`` / ``connection.unblocked``) and queue
length limits with their overflow modes.

Covers the spec's ``connection.tune`` fields (frame-max, channel-max) and reply codes (501
frame-error, 530 not-allowed), and RabbitMQ's documents: Blocked Connection Notifications
(``rabbitmq-connection-blocked``), Queue Length Limit (``rabbitmq-maxlength``), Configuration
(``rabbitmq-configure``: max_message_size), Channels (``rabbitmq-channels``: channel_max) and
Memory Threshold and Limit (``rabbitmq-memory``). RabbitMQ 3.10.8 behaviour measured with the
raw client, where it differs from the XML, is the ``rabbitmq`` profile's data.

The maximum message size is configuration a client cannot read on the wire: the target tells it
(spawned targets are configured with 1 MiB; a url target needs ``--amqp-max-message-size``),
else those cases are UNSUPPORTED. The connection.blocked cases raise and clear the memory alarm
of a broker private to the worker (reference: SIGUSR1/SIGUSR2; local:rabbitmq: rabbitmqctl
set_vm_memory_high_watermark; a url target: ``--amqp-alarm-cmd``), UNSUPPORTED elsewhere.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp import header as pheader
from pamqp.body import ContentBody

from conformance.model.cases import Case, Level, case, param
from conformance.protocol import Event, RawChannel, RawConnection, default_client_properties
from conformance.verify import (
    CaseTimeout,
    Mismatch,
    Unsupported,
    check_outcome,
    controller_did_nothing,
    dead_letter_target,
    expect_channel_close,
    expect_connection_close,
    outcome,
    quiet_window,
    settle_all,
    summarize,
)

RMQ = "measured on RabbitMQ 3.10.8 with the raw client"
TUNE_FRAME_MAX = "amqp0-9-1.xml#connection.tune (frame-max)"
FRAME_ERROR = "amqp0-9-1.xml#constants (frame-error 501)"
CHANNEL_MAX_DOC = "rabbitmq-channels#channel-max"
MAX_SIZE_DOC = "rabbitmq-configure#config-items"
BLOCKED_WHEN = "rabbitmq-connection-blocked#when-sent"
BLOCKED_CAP = "rabbitmq-connection-blocked#capability"
MAXLEN = "rabbitmq-maxlength#overflow"
MAXLEN_DEFAULT = "rabbitmq-maxlength#default-behaviour"
NEGOTIATED = 8192  # frame-max the frame cases negotiate (above frame-min-size, below every default)
BLOCKED_CAPS = ("connection.blocked", "publisher_confirms")


def _frames(ch: RawChannel, q: str, payload: int) -> bytes:
    """basic.publish, its content header and ONE body frame whose payload is ``payload`` octets."""
    return (pframe.marshal(spec.Basic.Publish(exchange="", routing_key=q), ch.id)
            + pframe.marshal(pheader.ContentHeader(0, payload, spec.Basic.Properties()), ch.id)
            + pframe.marshal(ContentBody(b"f" * payload), ch.id))


# -- frame-max -----------------------------------------------------------------------------------


def _frame_max(slug: str, payload: int, frame: str, expectation: str, **expected: Any) -> Any:
    """A frame-max case: frame-max negotiated to NEGOTIATED, then one body frame (``frame``
    describes it) whose payload is ``payload`` octets; ``expected``: the Case's expected values."""
    return param(Case(
        id=f"limits.{slug}", sources=(TUNE_FRAME_MAX, FRAME_ERROR), level=Level.MUST,
        description=f"frame-max negotiated to {NEGOTIATED}; {frame}", expectation=expectation, **expected,
    ), payload)


# fmt: off
# (a hand-laid table: case slug, payload octets, the frame, expectation, expected values)
FRAME_MAX_CASES = [
    _frame_max("frame-max-payload-above-501", NEGOTIATED + 1,
               f"a body frame whose payload alone is {NEGOTIATED + 1} octets",
               "connection.close 501 FRAME_ERROR (the frame exceeds frame-max whatever the header)",
               default="connection.close 501"),
    _frame_max("frame-max-one-octet-over", NEGOTIATED + 1 - 8,
               f"a body frame of {NEGOTIATED + 1} octets in all (header, payload and frame-end)",
               "spec: connection.close 501 FRAME_ERROR; RabbitMQ 3.10 accepts frames up to frame-max + 8 "
               "octets (its FRAME_SIZE_FUDGE) and routes the message",
               expected={"spec": "connection.close 501", "rabbitmq": "accepted (probe answered)"},
               expected_sources={
                   "spec": TUNE_FRAME_MAX + ": 'the largest frame size that the client and server will use "
                           "for the connection'",
                   "rabbitmq": f"{RMQ}: a payload of up to frame_max octets is accepted; "
                               "{frame_too_large,8193,8184} only for a payload of 8193",
               }),
]
# fmt: on


@pytest.mark.parametrize("payload", FRAME_MAX_CASES)
def test_frame_max(amqp, ctx, cleanup, payload: int):
    conn = amqp(frame_max=NEGOTIATED)
    ctx.check(conn.frame_max, NEGOTIATED, "negotiated frame-max")
    ch = conn.channel()
    q = cleanup.queue(ctx.name("q"))
    ch.declare_queue(q)
    ctx.observe("frame octets", payload + 8)
    got = outcome(ch, None, (), raw=_frames(ch, q, payload))
    check_outcome(ctx, got, f"answer to a {payload + 8}-octet frame (frame-max {NEGOTIATED})")
    if got[0].startswith("accepted"):
        # accepted means routed whole, not dropped
        ctx.check(ch.message_count(q), 1, "messages in the queue after the accepted frame")


# -- channel-max ---------------------------------------------------------------------------------


@case(
    "limits.channel-max-exceeded-530",
    sources=["amqp0-9-1.xml#connection.tune (channel-max)", CHANNEL_MAX_DOC], level=Level.MUST,
    description="channel-max negotiated to 2 (tune-ok); channels 1 and 2 open, then channel.open on a third",
    expectation="connection.close 530 NOT_ALLOWED: channel-max is 'the maximum total number of channels "
                "that the server allows per connection'",
)
def test_channel_max(amqp, ctx):
    conn = amqp(channel_max=2)
    ctx.check(conn.channel_max, 2, "negotiated channel-max")
    first = conn.channel()
    conn.channel()
    conn.send_method(3, spec.Channel.Open())
    expect_connection_close(conn, 530, what="channel.open beyond the negotiated channel-max",
                            probe_channel=first)


# -- max message size ----------------------------------------------------------------------------


def _max_message_size(target_limits: dict[str, int]) -> int:
    size = target_limits.get("max_message_size")
    if not size:
        raise Unsupported("the target's max message size is not known: give --amqp-max-message-size "
                          "(RabbitMQ: max_message_size) or use a spawned target")
    if size > 16 * 1024 * 1024:
        raise Unsupported(f"max message size {size} is too large to cross within a case (at most 16 MiB)",
                          observed=f"max_message_size {size}")
    return size


@case("limits.max-message-size-exceeded-406",
      sources=[MAX_SIZE_DOC, "DESIGN.md#facts-measured-on-rabbitmq-3-10-8"], level=Level.EXTENSION,
      description="A publish whose body is one octet larger than the broker's max message size",
      expectation="channel.close 406 PRECONDITION_FAILED naming basic.publish (60/40); the connection "
      "carries on and nothing is routed")
def test_max_message_size_exceeded(declared_queue, target_limits, ctx):
    limit = _max_message_size(target_limits)
    ch, q = declared_queue()
    ctx.observe("max message size", limit)
    ch.publish("", q, b"s" * (limit + 1))
    expect_channel_close(ch, 406, what=f"a {limit + 1}-octet message", method=spec.Basic.Publish)
    probe = ch.conn.channel()
    ctx.check(probe.message_count(q), 0, "messages routed from the oversized publish")


@case("limits.max-message-size-at-limit-accepted", sources=[MAX_SIZE_DOC], level=Level.EXTENSION,
      description="A publish whose body is exactly the broker's max message size",
      expectation="the message is routed whole (the limit is inclusive)")
def test_max_message_size_at_limit(declared_queue, target_limits, ctx):
    limit = _max_message_size(target_limits)
    ch, q = declared_queue(confirm=True)
    body = bytes(range(256)) * (limit // 256) + b"e" * (limit % 256)
    ch.publish("", q, body)
    st = settle_all(ch, 1, ctx.timeout)
    ctx.check(sorted(st.acked), [1], "publisher confirm of the message at the limit")
    ev = ch.get(q, no_ack=True)
    ctx.check(len(ev.body) if ev is not None and ev.body is not None else None, limit, "routed body length")
    ctx.check(ev.body == body, True, "routed body is the published one")


# -- memory alarm: connection.blocked --------------------------------------------------------------


def _no_blocked_capability() -> dict[str, Any]:
    props = default_client_properties()
    props["capabilities"] = {k: v for k, v in props["capabilities"].items() if k != "connection.blocked"}
    return props


def _ch0(conn: RawConnection) -> list[str]:
    return [e.describe() for e in conn.history(0)
            if isinstance(e.method, (spec.Connection.Blocked, spec.Connection.Unblocked))]


def _alarm(target: Any, on: bool) -> None:
    # A failing alarm command (TargetError) is the harness's fault: it ends the case as ERROR.
    target.alarm(on)


def _blocked_event(conn: RawConnection, ctx, what: str, timeout: float | None = None) -> Event:
    return conn.wait_event(
        0,
        lambda e: isinstance(e.method, (spec.Connection.Blocked, spec.Connection.Unblocked)),
        what,
        timeout=ctx.timeout if timeout is None else timeout,
    )


def _confirm_channel(amqp, target: Any, ctx, props: dict[str, Any] | None,
                     suffix: str = "q") -> tuple[RawConnection, RawChannel, str]:
    conn = amqp(target.url, client_properties=props)
    ch = conn.channel()
    q = ctx.name(suffix)
    ch.declare_queue(q, exclusive=True)  # on the private broker: gone with the connection
    ch.confirm_select()
    return conn, ch, q


def _publishes_held(ch: RawChannel, n: int, ctx) -> bool:
    """Whether the broker holds back publishes 1..n (it stops reading a publishing connection
    during a memory alarm): some are not confirmed within a quiet window. All confirmed means the
    alarm is not in force, whatever the broker would notify."""
    try:
        settle_all(ch, n, quiet_window(ctx.timeout))
    except CaseTimeout:
        return True
    return False


def _publish_until_blocked(conn: RawConnection, ch: RawChannel, q: str, ctx) -> tuple[int, Event]:
    """Publish one message at a time until a notification arrives: a broker's alarm reaches its
    connections asynchronously (RabbitMQ: a message to each reader), so the first publish after
    raising it may still pass. Returns (messages published, the first notification). No
    notification while every publish is confirmed: the alarm command did nothing (UNSUPPORTED, not
    the broker's fault); publishes held back with no notification: the broker's FAIL."""
    deadline = time.monotonic() + ctx.timeout
    n = 0
    while True:
        n += 1
        ch.publish("", q, f"during-{n}".encode())
        try:
            return n, _blocked_event(conn, ctx, "connection.blocked", timeout=0.2)
        except CaseTimeout:
            if time.monotonic() > deadline:
                if not _publishes_held(ch, n, ctx):
                    raise controller_did_nothing(
                        "every publish made after raising the memory alarm was confirmed at once and no "
                        "connection.blocked came: the alarm is not in force",
                        expected="publishes held back (and connection.blocked)",
                        observed=f"{n} publishes confirmed, no notification") from None
                raise Mismatch(
                    "notification to a connection publishing during the memory alarm",
                    expected="connection.blocked",
                    observed=f"none within {ctx.timeout:.1f}s of publishing ({n} publishes)",
                ) from None


@case("limits.connection-blocked-then-unblocked", sources=[BLOCKED_WHEN, BLOCKED_CAP, "rabbitmq-memory"],
      level=Level.EXTENSION, requires=BLOCKED_CAPS,
      description="A client announcing the connection.blocked capability publishes while the broker's memory "
      "alarm is raised; then the alarm is cleared",
      expectation="connection.blocked (non-empty reason) after it publishes, connection.unblocked once the "
      "alarm clears, exactly one of each; every publish made during the alarm is confirmed and routed")
def test_connection_blocked(amqp, alarm_target, ctx):
    try:
        conn, ch, q = _confirm_channel(amqp, alarm_target, ctx, None)
        _alarm(alarm_target, True)
        n, blocked = _publish_until_blocked(conn, ch, q, ctx)
        if not isinstance(blocked.method, spec.Connection.Blocked):
            raise Mismatch("first notification", expected="connection.blocked", observed=blocked.describe())
        ctx.check(bool(blocked.method.reason), True, "connection.blocked carries a reason")
        ctx.observe("blocked", blocked.describe())
        _alarm(alarm_target, False)
        unblocked = _blocked_event(conn, ctx, "connection.unblocked after the alarm cleared")
        if not isinstance(unblocked.method, spec.Connection.Unblocked):
            raise Mismatch("notification after the alarm cleared", expected="connection.unblocked",
                           observed=unblocked.describe())
        st = settle_all(ch, n, ctx.timeout, quiet=quiet_window(ctx.timeout))
        ctx.check(sorted(st.acked), list(range(1, n + 1)), "confirms of the publishes made during the alarm")
        ctx.check(ch.message_count(q), n, "messages routed")
        ctx.check(_ch0(conn), [blocked.describe(), unblocked.describe()],
                  "every connection.blocked/unblocked the connection received")
    finally:
        _alarm(alarm_target, False)


@case("limits.connection-blocked-needs-capability", sources=[BLOCKED_CAP], level=Level.EXTENSION,
      requires=BLOCKED_CAPS,
      description="While the memory alarm is raised (a witness connection with the capability was told "
      "connection.blocked), a client WITHOUT the connection.blocked capability publishes; then the "
      "alarm is cleared (the witness is told connection.unblocked)",
      expectation="no connection.blocked or connection.unblocked ever reaches the client without the "
      "capability; its publish is confirmed once the alarm clears")
def test_connection_blocked_needs_capability(amqp, alarm_target, ctx):
    try:
        wconn, wch, wq = _confirm_channel(amqp, alarm_target, ctx, None, "witness")
        conn, ch, q = _confirm_channel(amqp, alarm_target, ctx, _no_blocked_capability())
        _alarm(alarm_target, True)
        _publish_until_blocked(wconn, wch, wq, ctx)  # the alarm is in force
        ch.publish("", q, b"during")
        try:
            ev: Event | None = _blocked_event(conn, ctx, "no notification", timeout=quiet_window(ctx.timeout))
        except CaseTimeout:
            ev = None
        if ev is not None:
            raise Mismatch("notifications to a client without the capability", expected="none",
                           observed=ev.describe())
        _alarm(alarm_target, False)
        _blocked_event(wconn, ctx, "connection.unblocked of the witness after the alarm cleared")
        st = settle_all(ch, 1, ctx.timeout, quiet=quiet_window(ctx.timeout))
        ctx.check(sorted(st.acked), [1], "confirm of the publish made during the alarm")
        ctx.check(_ch0(conn), [], "connection.blocked/unblocked frames received")
    finally:
        _alarm(alarm_target, False)


# -- queue length limits -------------------------------------------------------------------------


def _deaths(ev: Event | None) -> list[tuple[str, str]]:
    headers = (ev.properties.headers or {}) if ev is not None and ev.properties is not None else {}
    deaths = headers.get("x-death") or []
    if not isinstance(deaths, list):
        return [("x-death is not an array", repr(deaths))]
    return [(str(d.get("reason")), str(d.get("queue"))) for d in deaths if isinstance(d, dict)]


def _body(ev: Event | None) -> str | None:
    return ev.body.decode() if ev is not None and ev.body is not None else None


def _check_confirms(ch: RawChannel, ctx: Any, expected: dict[int, str]) -> None:
    """Wait for the confirms of publishes 1..n (``expected``: seq -> ack / nack) and compare."""
    st = settle_all(ch, len(expected), ctx.timeout, quiet=quiet_window(ctx.timeout))
    ctx.observe("confirms", summarize(st.events))
    ctx.check(
        {s: ("ack" if s in st.acked else "nack" if s in st.nacked else "none") for s in expected},
        expected,
        "confirm per publish",
    )


def _overflow(
    mode: str, slug: str, sources: tuple[str, ...], requires: tuple[str, ...], expectation: str
) -> Any:
    """The case of one overflow mode: two confirmed publishes to a queue with x-max-length 1 and a
    dead-letter exchange."""
    overflow = "default overflow (drop-head)" if mode == "drop-head" else f"x-overflow {mode}"
    return param(Case(
        id=f"limits.{slug}", sources=sources, level=Level.EXTENSION, requires=requires,
        description=f"Two publishes (confirmed) to a queue with x-max-length 1, {overflow} and a "
        "dead-letter exchange",
        expectation=expectation,
    ), mode)


CONFIRMS = ("publisher_confirms",)
NACKS = ("publisher_confirms", "basic.nack")
# fmt: off
# (a hand-laid table: overflow mode, case slug, sources, required capabilities, expectation)
OVERFLOW = [
    _overflow("drop-head", "overflow-drop-head-dead-letters-head", (MAXLEN_DEFAULT,), CONFIRMS,
              "both confirmed with ack; the queue holds m2; m1 (the head) is dead-lettered with x-death "
              "reason maxlen"),
    _overflow("reject-publish", "overflow-reject-publish-not-dead-lettered", (MAXLEN,), NACKS,
              "m1 acked, m2 nacked; the queue holds m1; nothing is dead-lettered"),
    _overflow("reject-publish-dlx", "overflow-reject-publish-dlx-nacks-and-dead-letters", (MAXLEN,), NACKS,
              "m1 acked, m2 nacked; the queue holds m1; m2 is dead-lettered with x-death reason maxlen"),
]
# fmt: on
EXPECTED_OVERFLOW = {
    "drop-head": ({1: "ack", 2: "ack"}, "m2", ("m1", [("maxlen", "{q}")])),
    "reject-publish": ({1: "ack", 2: "nack"}, "m1", (None, [])),
    "reject-publish-dlx": ({1: "ack", 2: "nack"}, "m1", ("m2", [("maxlen", "{q}")])),
}


@pytest.mark.parametrize("mode", OVERFLOW)
def test_overflow(amqp, ctx, cleanup, mode: str):
    ch = amqp.channel()
    dlx, dlq = dead_letter_target(ch, ctx, cleanup)
    q = cleanup.queue(ctx.name("q"))
    args: dict[str, Any] = {"x-max-length": 1, "x-dead-letter-exchange": dlx}
    if mode != "drop-head":
        args["x-overflow"] = mode
    ch.declare_queue(q, arguments=args)
    ch.confirm_select()
    ch.publish("", q, b"m1")
    ch.publish("", q, b"m2")
    confirms, kept, (dead_body, deaths) = EXPECTED_OVERFLOW[mode]
    _check_confirms(ch, ctx, confirms)
    ctx.check(_body(ch.get(q, no_ack=True)), kept, "the message the queue kept")
    ctx.check(ch.message_count(q), 0, "messages left in the queue after taking it")
    dead = ch.get(dlq, no_ack=True)
    ctx.check(_body(dead), dead_body, "the message dead-lettered")
    ctx.check(_deaths(dead), [(r, qq.format(q=q)) for r, qq in deaths], "x-death (reason, queue) of it")


@case("limits.max-length-bytes-reject-publish", sources=[MAXLEN], level=Level.EXTENSION,
      requires=("publisher_confirms", "basic.nack"), queue_types=("classic",),
      premise="reject-publish refuses the publish that would pass the limit: classic queues (a quorum queue "
      "refuses only once it is already over the limit; queue_types area)",
      description="x-max-length-bytes 10 with x-overflow reject-publish; publishes of 6, 5 and 4 body octets",
      expectation="6 acked, 5 nacked (6 + 5 > 10), 4 acked (6 + 4 = 10: the limit is inclusive); the queue "
      "holds the 6- and 4-octet messages")
def test_max_length_bytes(declared_queue, ctx):
    ch, q = declared_queue(confirm=True, arguments={"x-max-length-bytes": 10, "x-overflow": "reject-publish"})
    for body in (b"aaaaaa", b"bbbbb", b"cccc"):
        ch.publish("", q, body)
    _check_confirms(ch, ctx, {1: "ack", 2: "nack", 3: "ack"})
    got = [_body(ch.get(q, no_ack=True)) for _ in range(2)]
    ctx.check(got, ["aaaaaa", "cccc"], "messages the queue kept, in order")
    ctx.check(ch.message_count(q), 0, "messages left")
