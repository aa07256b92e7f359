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
    body_list,
    check_outcome,
    controller_did_nothing,
    dead_letter_target,
    deliveries_until_cancelled,
    drain,
    expect_channel_close,
    expect_connection_close,
    outcome,
    quiet_window,
    settle_all,
    settle_and_close,
    summarize,
)
from conformance.verify import extensions as ext

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


def _check_confirms(ch: RawChannel, ctx: Any, expected: dict[int, str]) -> RawChannel:
    """Wait for the confirms of publishes 1..n (``expected``: seq -> ack / nack) and compare; every
    confirm until ``ch``'s close-ok counts (no stray one can follow it). A new channel of the same
    connection, for what the case does next."""
    st = settle_and_close(ch, settle_all(ch, len(expected), ctx.timeout), timeout=ctx.timeout)
    ctx.observe("confirms", summarize(st.events))
    ctx.check(
        {s: ("ack" if s in st.acked else "nack" if s in st.nacked else "none") for s in expected},
        expected,
        "confirm per publish",
    )
    ctx.check(st.twice() + st.anomalies, [], "publishes confirmed more than once (or stray confirms)")
    return ch.conn.channel()


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
    ch = _check_confirms(ch, ctx, confirms)
    ctx.check(_body(ch.get(q, no_ack=True)), kept, "the message the queue kept")
    ctx.check(ch.message_count(q), 0, "messages left in the queue after taking it")
    dead = ch.get(dlq, no_ack=True)
    ctx.check(_body(dead), dead_body, "the message dead-lettered")
    ctx.check(_deaths(dead), [(r, qq.format(q=q)) for r, qq in deaths], "x-death (reason, queue) of it")


# The rejected message seen from the routing side: a message routed to two queues, one of them
# full. The Queue Length Limit guide (rabbitmq-maxlength#overflow): "If a message is routed to
# multiple queues and rejected by at least one of them, the channel will inform the publisher via
# basic.nack. The message will still be published to all other queues which can enqueue it. The
# difference between reject-publish and reject-publish-dlx is that reject-publish-dlx also
# dead-letters rejected messages." Entity names are compared by their role (x, full, room, dlx).
SPREAD_DLX: dict[str, Any] = {
    "confirms": {1: "ack", 2: "nack"},
    "full": ["m1"],
    "room": ["m1", "m2"],
    "dead-lettered": [{
        "body": "m2", "exchange": "dlx", "routing key": "k",
        "x-death": [{"count": 1, "reason": "maxlen", "queue": "full", "time": "timestamp during the case",
                     "exchange": "x", "routing-keys": ["k"]}],
        "x-first-death": {"reason": "maxlen", "queue": "full", "exchange": "x"},
    }],
}
# A quorum queue does not support reject-publish-dlx (the quorum queue guide's feature matrix: queue
# length limits "yes (except x-overflow: reject-publish-dlx)"): it keeps its default overflow,
# drop-head, so both publishes are acked and the head m1 is dead-lettered.
SPREAD_DLX_QUORUM = {
    **SPREAD_DLX,
    "confirms": {1: "ack", 2: "ack"},
    "full": ["m2"],
    "dead-lettered": [{**SPREAD_DLX["dead-lettered"][0], "body": "m1"}],
}
QUORUM_DLX_SOURCE = (
    "rabbitmq-quorum-queues#feature-matrix (queue length limits: 'yes (except x-overflow: "
    "reject-publish-dlx)'); RabbitMQ 3.10.8's rabbit_quorum_queue:overflow/3 logs 'Invalid overflow "
    "strategy' and keeps the default drop_head (rabbitmq-server PR #16673, open in 2026: 'Prior to this "
    "change, QQs would fall back to drop-head when reject-publish-dlx was specified'); measured on RabbitMQ "
    "3.10.8, 4.0.5 and 4.3.6: ack, ack, the queue holds m2, m1 dead-lettered (reason maxlen)"
)


@case("limits.overflow-reject-publish-dlx-other-queue-keeps-it", sources=[MAXLEN, "rabbitmq-dlx#effects"],
      level=Level.EXTENSION, requires=NACKS,
      description="A fanout exchange x routes to two queues: full (x-max-length 1, x-overflow "
      "reject-publish-dlx, dead-letter exchange dlx) and room (no limit); m1 then m2 published to x with "
      "key k, each confirmed before the next",
      expectation="m1 acked, m2 nacked (one of its queues rejected it); room holds m1 and m2 (the message is "
      "still published to the queue that can take it); full holds m1; m2, and only m2, is dead-lettered "
      "from full: one x-death entry {count 1, reason maxlen, queue full, exchange x, routing-keys [k]}; "
      "rabbitmq@quorum (reject-publish-dlx unsupported, drop-head kept): both acked, full holds m2, m1 "
      "dead-lettered",
      default=SPREAD_DLX, expected={"rabbitmq@quorum": SPREAD_DLX_QUORUM},
      expected_sources={"rabbitmq@quorum": QUORUM_DLX_SOURCE})
def test_reject_publish_dlx_other_queue(declared_queue, declared_exchange, amqp, ctx, cleanup) -> None:
    since = time.time()
    ch = amqp.channel()
    dlx, dlq = dead_letter_target(ch, ctx, cleanup)
    _, x = declared_exchange("fanout", ch=ch)
    _, full = declared_queue("full", ch=ch, arguments={"x-max-length": 1, "x-overflow": "reject-publish-dlx",
                                                       "x-dead-letter-exchange": dlx})
    _, room = declared_queue("room", ch=ch)
    for q in (full, room):
        ch.bind(q, x, "")
    tag = ch.consume(dlq, no_ack=True)
    pub = ch.conn.channel()
    pub.confirm_select()
    confirms: dict[int, str] = {}
    for seq, body in enumerate((b"m1", b"m2"), 1):
        # one at a time: a queue applies its limit to what it has enqueued
        pub.publish(x, "k", body)
        ev = pub.wait((spec.Basic.Ack, spec.Basic.Nack), f"the confirm of publish {seq}")
        # (multiple may be set: every earlier publish is confirmed already, so it covers this one only)
        ctx.check(int(ev.method.delivery_tag), seq, f"delivery-tag of confirm {seq}")
        confirms[seq] = "ack" if isinstance(ev.method, spec.Basic.Ack) else "nack"
    # Dead-lettering may trail the confirm (a quorum queue's drop-head): wait for the first dead letter
    # (none within the case timeout is an observed value), then any further one comes before the cancel-ok.
    first = ext.delivery_within(ch, ctx.timeout, "the dead-lettered message")
    dead = ([first] if first is not None else []) + deliveries_until_cancelled(ch, [tag])
    roles = {x: "x", full: "full", room: "room", dlx: "dlx"}
    ctx.check_profile({
        "confirms": confirms,
        "full": body_list(drain(ch, full)),
        "room": body_list(drain(ch, room)),
        "dead-lettered": [_dead_letter(ev, since, roles) for ev in dead],
    }, "confirms, queues and dead letters")


def _dead_letter(ev: Event, since: float, roles: dict[str, str]) -> dict[str, Any]:
    """A dead-lettered delivery as SPREAD_DLX writes it: entity names replaced by their role. (The
    x-last-death-* headers of RabbitMQ 3.13+ are the dead_letter area's, release data there.)"""
    def role(v: Any) -> Any:
        v = v.decode() if isinstance(v, bytes) else v
        return roles.get(v, v) if isinstance(v, str) else [role(i) for i in v] if isinstance(v, list) else v

    hdrs = ext.headers(ev)
    deaths = hdrs.get("x-death")
    entries: Any = f"not an array of tables: {deaths!r}"
    if isinstance(deaths, list) and all(isinstance(d, dict) for d in deaths):
        entries = [{k: role(v) for k, v in ext.death_fields(dict(d), since=since).items()} for d in deaths]
    return {
        "body": _body(ev), "exchange": role(ev.method.exchange), "routing key": ev.method.routing_key,
        "x-death": entries,
        "x-first-death": {k: role(hdrs.get(f"x-first-death-{k}")) for k in ("reason", "queue", "exchange")},
    }


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
    ch = _check_confirms(ch, ctx, {1: "ack", 2: "nack", 3: "ack"})
    got = [_body(ch.get(q, no_ack=True)) for _ in range(2)]
    ctx.check(got, ["aaaaaa", "cccc"], "messages the queue kept, in order")
    ctx.check(ch.message_count(q), 0, "messages left")
