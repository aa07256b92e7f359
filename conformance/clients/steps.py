"""Setup steps the scenario modules share: enqueue messages known to be there, read a queue
out, and how long silence is listened for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pamqp import commands as spec

from conformance.clients.raw import Event, RawChannel, SocketClosed, UnexpectedClose, method_name, reply_name
from conformance.verdicts import CaseTimeout, Mismatch


def quiet_window(timeout: float) -> float:
    """How long to listen for something that must not come: short, scaled from the case timeout."""
    return max(0.2, min(1.0, timeout / 10))


def publish_confirmed(ch: RawChannel, exchange: str, routing_key: str, bodies: Sequence[bytes]) -> None:
    """Publish ``bodies`` on a separate confirm-mode channel of ``ch``'s connection and wait until
    every publish is confirmed, so the messages are known to be enqueued (in this order) before the
    case goes on. A nack is a setup Mismatch; missing confirms a TIMEOUT naming the first pending."""
    pub = ch.conn.channel()
    pub.confirm_select()
    for body in bodies:
        pub.publish(exchange, routing_key, body)
    want = set(range(1, len(bodies) + 1))
    acked: set[int] = set()
    nacked: set[int] = set()
    while not want <= acked | nacked:
        try:
            ev = pub.wait((spec.Basic.Ack, spec.Basic.Nack), f"publisher confirms for {len(bodies)} messages")
        except CaseTimeout as exc:
            pending = sorted(want - acked - nacked)
            raise CaseTimeout(f"setup: publisher confirms for {len(bodies)} messages", exc.seconds,
                              observed=f"{len(pending)} unconfirmed, first {pending[:5]}") from exc
        tag = int(ev.method.delivery_tag)
        covered = {t for t in want if t <= tag} if ev.method.multiple else {tag}
        (acked if isinstance(ev.method, spec.Basic.Ack) else nacked).update(covered)
    if nacked:
        raise Mismatch("setup publish", expected="every publish confirmed with basic.ack",
                       observed=f"basic.nack for publishes {sorted(nacked)[:10]}")
    pub.close()


def drain(ch: RawChannel, queue: str, limit: int = 100) -> list[Event]:
    """Every ready message of ``queue`` by basic.get with auto-ack, until get-empty (at most ``limit``)."""
    got: list[Event] = []
    for _ in range(limit):
        ev = ch.get(queue, no_ack=True)
        if ev is None:
            break
        got.append(ev)
    return got


def short(ev: Event | SocketClosed) -> str:
    """``channel.close 405 RESOURCE_LOCKED`` / ``queue.declare-ok`` / ``socket closed``."""
    if isinstance(ev, SocketClosed):
        return "socket closed"
    m = ev.method
    if isinstance(m, (spec.Channel.Close, spec.Connection.Close)):
        return f"{method_name(m)} {reply_name(m.reply_code)}"
    return method_name(m)


def answer(ctx: Any, ch: RawChannel, method: Any) -> str:
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
