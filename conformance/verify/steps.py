"""Setup steps the scenario modules share: enqueue messages known to be there, take or read a
queue out, look at a queue, hand-made frames, and how long silence is listened for."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pamqp import commands as spec
from pamqp import frame as pframe
from pamqp.base import Frame

from conformance.protocol.raw import Event, RawChannel, UnexpectedClose, tags
from conformance.verdicts import CaseTimeout, Mismatch, Unsupported
from conformance.verify.confirms import settle_all
from conformance.verify.expect import reply_or_probe
from conformance.verify.outcome import short


def quiet_window(timeout: float) -> float:
    """How long to listen for something that must not come: short, scaled from the case timeout.

    One tenth of the case timeout (1 s at the default 10 s), at least 0.2 s and at most 1 s. The
    longer of the two windows the suite once had (tx used a twentieth): a silence assertion that
    ends too soon passes on a broker that is merely slow, and on a loaded machine 0.5 s is close
    to a scheduling hiccup; the upper bound keeps a run with a long --case-timeout quick."""
    return max(0.2, min(1.0, timeout / 10))


def publish_confirmed(ch: RawChannel, exchange: str, routing_key: str, bodies: Sequence[bytes]) -> None:
    """Publish ``bodies`` on a separate confirm-mode channel of ``ch``'s connection and wait until
    every publish is confirmed, so the messages are known to be enqueued (in this order) before the
    case goes on. A nack is a setup Mismatch; missing confirms a TIMEOUT naming the unconfirmed ones."""
    pub = ch.conn.channel()
    pub.confirm_select()
    for body in bodies:
        pub.publish(exchange, routing_key, body)
    try:
        st = settle_all(pub, len(bodies))
    except CaseTimeout as exc:
        raise CaseTimeout(f"setup: publisher confirms for {len(bodies)} messages", exc.seconds,
                          observed=exc.observed) from exc
    if st.nacked:
        raise Mismatch("setup publish", expected="every publish confirmed with basic.ack",
                       observed=f"basic.nack for publishes {sorted(st.nacked)[:10]}")
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


def fill(ch: RawChannel, queue: str, n: int, prefix: str = "m", size: int = 0) -> list[bytes]:
    """Publish ``n`` messages ``<prefix>1..n`` (padded with dots to ``size`` octets) to ``queue`` by
    the default exchange, then prove the broker has routed them (barrier); the bodies sent."""
    sent = []
    for i in range(1, n + 1):
        body = f"{prefix}{i}".encode()
        sent.append(body + b"." * max(0, size - len(body)))
        ch.publish("", queue, sent[-1])
    ch.barrier()
    return sent


def passive_answer(ch: RawChannel, queue: str) -> str:
    """What a passive queue.declare of ``queue`` is answered, short form:
    ``queue.declare-ok (queue exists, 2 messages)`` or the close (``channel.close 404 NOT_FOUND``)."""
    try:
        ok = ch.declare_queue(queue, passive=True)
    except UnexpectedClose as exc:
        return short(exc.event)
    return f"queue.declare-ok (queue exists, {ok.message_count} messages)"


def get_n(ch: RawChannel, queue: str, n: int, what: str = "setup basic.get") -> list[Event]:
    """``n`` messages by basic.get with manual ack; a get-empty before the n-th is a Mismatch."""
    got: list[Event] = []
    for i in range(n):
        ev = ch.get(queue)
        if ev is None:
            raise Mismatch(what, expected=f"{n} messages in {queue}", observed=f"get-empty after {i}")
        got.append(ev)
    return got


def get_one(ch: RawChannel, queue: str, what: str) -> Event:
    """One message by basic.get with manual ack (get-empty is a Mismatch naming ``what``)."""
    return get_n(ch, queue, 1, what)[0]


def get_tags(ch: RawChannel, queue: str, n: int) -> list[int]:
    """The delivery tags of ``n`` messages taken by basic.get with manual ack."""
    return tags(get_n(ch, queue, n))


def body_list(events: Sequence[Event]) -> list[str]:
    """The bodies of ``events`` as text, in order (what order and content checks compare)."""
    return [(e.body or b"").decode() for e in events]


def bad_name_frame(ch: RawChannel, bad: str, make: Callable[[str], Frame]) -> bytes:
    """A method frame carrying a name pamqp refuses to encode (it validates names): encode a
    same-length placeholder and swap the bytes."""
    placeholder = "z" * len(bad.encode())
    data = pframe.marshal(make(placeholder), ch.id)
    if data.count(placeholder.encode()) != 1:
        raise ValueError("the placeholder name must occur exactly once in the frame")
    return data.replace(placeholder.encode(), bad.encode())


def tx_select(ch: RawChannel) -> None:
    """tx.select, then (without a reply within the settle window) a probe: a broker that answers
    the probe but never tx.select-ok ignored the method (a precise FAIL, not a TIMEOUT); 540
    NOT_IMPLEMENTED means tx is not offered (:func:`~conformance.verify.expect.reply_or_probe`)."""
    ch.send(spec.Tx.Select())
    try:
        ev = reply_or_probe(ch, (spec.Tx.SelectOk,), "tx.select-ok (reply to tx.select)")
    except UnexpectedClose as exc:
        if exc.reply_code == 540:
            raise Unsupported("tx.select answered 540 NOT_IMPLEMENTED", expected="tx.select-ok",
                              observed=exc.event.describe()) from exc
        raise
    if isinstance(ev.method, spec.Exchange.DeclareOk):
        raise Mismatch("tx.select", expected="tx.select-ok before the reply to a later probe",
                       observed="no tx.select-ok: the probe sent after tx.select (exchange.declare passive) "
                                "was answered first")
