"""Silence proven by the protocol: an event after which the thing a case must not see can no longer
happen, instead of a window listened to (:func:`~conformance.verify.expect.quiet_window`).

A window passes a broker that is merely slower than the window; a fence does not: the broker's own
reply closes the question, whatever its speed. Only a guarantee the spec states counts:

- **basic.cancel-ok** (:func:`deliveries_until_cancelled`): amqp0-9-1.xml, basic.cancel: "the server
  will not send any more messages for that consumer. The client may receive an arbitrary number of
  messages in between sending the cancel method and receiving the cancel-ok reply." A delivery to
  that consumer that has not come by its cancel-ok never comes.
- **channel.close-ok** (:func:`close_fence`): amqp0-9-1.xml, channel.close-ok: "This method confirms
  a Channel.Close method and tells the recipient that it is safe to release resources for the
  channel"; the channel is closed, so no frame of it (a confirm, a delivery, a return) can follow
  until it is opened again.

Where no such event exists the window stays, each with its reason: docs/waits.md
(``tests/unit/test_waits.py`` keeps that list complete).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pamqp import commands as spec

from conformance.model.verdicts import CaseTimeout, Mismatch
from conformance.protocol.raw import Event, RawChannel, UnexpectedClose
from conformance.verify.confirms import CONFIRM_TYPES, Settlement
from conformance.verify.expect import record

CANCEL_RULE = "basic.cancel: no message for that consumer after basic.cancel-ok"
CLOSE_RULE = "channel.close-ok: no frame of the channel after it"


def _taken_before(ch: RawChannel, reply: Event, keep: type | tuple[type, ...],
                  consumer_tags: Iterable[str] | None = None) -> list[Event]:
    """The pending events of ``keep`` on ``ch`` that arrived before ``reply`` (taken off)."""
    tags = None if consumer_tags is None else set(consumer_tags)
    out = []
    for ev in ch.pending():
        if ev.seq > reply.seq or not isinstance(ev.method, keep):
            continue
        if tags is not None and str(getattr(ev.method, "consumer_tag", "")) not in tags:
            continue
        ch.conn.discard(ch.id, ev)
        out.append(ev)
    return out


def _cancel_ok_of(tag: str) -> Callable[[Event], bool]:
    return lambda e: isinstance(e.method, spec.Basic.CancelOk) and str(e.method.consumer_tag) == tag


def deliveries_until_cancelled(ch: RawChannel, consumer_tags: Iterable[str], *,
                               timeout: float | None = None) -> list[Event]:
    """basic.cancel each of ``consumer_tags`` on ``ch`` and wait for every cancel-ok; the deliveries
    to those consumers that came before (in arrival order), taken off the channel. After the last
    cancel-ok none of them can receive another (:data:`CANCEL_RULE`)."""
    tags = list(consumer_tags)
    last: Event | None = None
    for tag in tags:
        ch.send(spec.Basic.Cancel(consumer_tag=tag))
    for tag in tags:
        ev = ch.conn.wait_event(ch.id, _cancel_ok_of(tag), f"basic.cancel-ok of {tag} (its last delivery)",
                                timeout=timeout)
        last = ev if last is None or ev.seq > last.seq else last
    assert last is not None or not tags
    return [] if last is None else _taken_before(ch, last, spec.Basic.Deliver, tags)


def expect_no_delivery_until_cancelled(ch: RawChannel, consumer_tags: str | Iterable[str], *,
                                       what: str = "no delivery", timeout: float | None = None) -> None:
    """Nothing more is delivered to the consumers: proven by basic.cancel-ok, not by a window."""
    tags = [consumer_tags] if isinstance(consumer_tags, str) else list(consumer_tags)
    try:
        extra = deliveries_until_cancelled(ch, tags, timeout=timeout)
    except CaseTimeout:
        # no cancel-ok within the deadline: what came meanwhile is still a delivery too many
        extra = [e for e in ch.pending() if isinstance(e.method, spec.Basic.Deliver)
                 and str(e.method.consumer_tag) in tags]
        if not extra:
            raise
    if extra:
        raise Mismatch(what, expected="no basic.deliver before basic.cancel-ok",
                       observed="; ".join(e.describe() for e in extra[:4]))
    record(what, f"no basic.deliver before basic.cancel-ok ({CANCEL_RULE})")


def close_fence(ch: RawChannel, *, timeout: float | None = None) -> Event:
    """channel.close on ``ch`` and its close-ok: the channel's last frame. Every frame of the
    channel that came before it stays pending (:func:`frames_before`). A channel.close from the
    broker crossing ours (an error) raises :class:`UnexpectedClose`, as any close a case did not
    cause."""
    ch.send(spec.Channel.Close(reply_code=200, reply_text="fence", class_id=0, method_id=0))
    ev = ch.conn.wait_event(
        ch.id, lambda e: isinstance(e.method, (spec.Channel.CloseOk, spec.Channel.Close)),
        "channel.close-ok (the channel's last frame)", timeout=timeout, close_is_error=False)
    if isinstance(ev.method, spec.Channel.Close):
        raise UnexpectedClose("channel.close-ok", ev)
    return ev


def frames_before(ch: RawChannel, end: Event, keep: type | tuple[type, ...]) -> list[Event]:
    """The frames of ``keep`` on ``ch`` that came before ``end`` (a fence's reply), taken off."""
    return _taken_before(ch, end, keep)


def settle_and_close(ch: RawChannel, st: Settlement, *, timeout: float | None = None) -> Settlement:
    """After every publish of ``st`` is settled: close ``ch`` and add every confirm that came before
    its close-ok (a stray or duplicate one), so ``st`` holds every confirm the channel ever sent
    (:data:`CLOSE_RULE`). The channel is closed afterwards."""
    end = close_fence(ch, timeout=timeout)
    for ev in _taken_before(ch, end, CONFIRM_TYPES):
        st.add(ev)
    record("confirms until channel.close-ok", f"{len(st.events)} confirm frames ({CLOSE_RULE})")
    return st
