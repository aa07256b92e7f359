"""Steps the RabbitMQ extension cases share: where they run (:class:`Isolated`: a broker private to
the worker where the suite can spawn one), declaring with an extension's argument (a broker that
refuses it outright is UNSUPPORTED with its answer; one that accepts and ignores it is judged by
what happens next; one that drops the connection FAILs), waiting for a delivery with a deadline,
and reading headers and x-death.

The scenario modules ``test_ttl``, ``test_dead_letter``, ``test_alternate_exchange``,
``test_sender_selected``, ``test_single_active_consumer``, ``test_user_id`` and
``test_consumer_timeout`` use them.
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import Any

from pamqp import commands as spec

from conformance.model.verdicts import CaseOutcome, CaseTimeout, HarnessError, Mismatch
from conformance.protocol.raw import Event, RawChannel, RawConnection, UnexpectedClose
from conformance.protocol.rawevents import SocketClosed
from conformance.protocol.wire import URL
from conformance.verify.confirms import settle_all
from conformance.verify.expect import quiet_window, record
from conformance.verify.fresh_channel import NoConnection, fresh_channel, probe_queue_name
from conformance.verify.unsupported import Unsupported

__all__ = [
    "Isolated",
    "count_drops_to",
    "death_fields",
    "declare_exchange_ext",
    "declare_queue_ext",
    "delivery_within",
    "headers",
    "login_user",
    "must_arrive",
    "no_return",
    "props",
    "send_confirmed",
    "settle_for",
    "x_death",
]


class Isolated:
    """Where an extension case runs (the ``isolated`` fixture): the broker private to this worker
    where the suite can spawn one (``private_broker``), else the target itself.

    An extension's argument or header can take a broker down, not only be refused or ignored:
    garagemq's process ends on a field table value of a type its reader lacks (``u``, which the
    raw client's codec uses for 32768..65535) — every case after it then had no broker. On a
    private broker that costs the one case: after it the case's connections are closed and, when
    none of them was dropped by the broker and a fresh connection still declares a queue, its
    queues and exchanges are deleted there and the broker counts as healthy; otherwise it is
    killed and started again before the next case. On a target the suite cannot isolate, the
    entities go to the case's ``cleanup`` and the case runs after all others (``wedges``).
    """

    def __init__(self, url: URL, timeout: float, cleanup: Any) -> None:
        self.url = url
        self.timeout = timeout
        self.cleanup = cleanup
        self.opened: list[RawConnection] = []

    def connection(self) -> RawConnection:
        conn = RawConnection.open(self.url, timeout=self.timeout)
        self.opened.append(conn)
        return conn

    def channel(self) -> RawChannel:
        """A new connection's channel on the case's broker."""
        return self.connection().channel()

    def queue(self, name: str) -> str:
        """``name``, deleted after the case."""
        return str(self.cleanup.queue(name))

    def exchange(self, name: str) -> str:
        return str(self.cleanup.exchange(name))

    def close(self) -> list[str]:
        """Close the case's connections; what the broker dropped without a connection.close."""
        dropped = []
        for conn in reversed(self.opened):
            ended = conn.socket_closed
            # no connection.close from the broker and none begun by the case: the broker dropped it
            if conn.closed_by_broker is None and ended is not None and not conn._closing:
                dropped.append(ended.describe())
            conn.close(timeout=1.0)
        self.opened.clear()
        return dropped

    def tidy(self, case_id: str) -> bool:
        """After a case on a private broker: True when the broker is fit for the next case (its
        entities deleted); False sends it to a restart."""
        if self.close():
            return False
        try:
            with fresh_channel(self.url, min(5.0, self.timeout)) as ch:
                ch.declare_queue(probe_queue_name("isolated"), exclusive=True, auto_delete=True)
        except (NoConnection, CaseTimeout, HarnessError, OSError):
            return False
        except CaseOutcome:
            pass  # a refusal is an answer: the broker is alive
        self.cleanup.run(case_id)
        return True


def _offered(ch: RawChannel, method: Any, feature: str) -> Any:
    try:
        return ch.rpc(method)
    except UnexpectedClose as exc:
        if isinstance(exc.event, SocketClosed):
            raise  # a dropped connection is no answer, so no refusal: a FAIL (expected the -ok)
        # A broker that answers the argument with a channel or connection error does not offer
        # the extension: UNSUPPORTED with its answer (one that accepts and ignores it is a FAIL
        # the case's observation finds).
        raise Unsupported(f"the broker refuses {feature}", expected=f"{method.name.lower()}-ok",
                          observed=exc.event.describe()) from exc


def declare_queue_ext(ch: RawChannel, name: str, arguments: dict[str, Any], feature: str, *,
                      durable: bool = False) -> spec.Queue.DeclareOk:
    """queue.declare ``name`` with ``arguments``; its declare-ok (name, 0 messages, 0 consumers)
    checked; a refusal is UNSUPPORTED naming ``feature``."""
    ok = _offered(ch, spec.Queue.Declare(queue=name, durable=durable, arguments=arguments), feature)
    got = (ok.queue, int(ok.message_count), int(ok.consumer_count))
    if got != (name, 0, 0):
        raise Mismatch(f"queue.declare-ok of {name}", expected=(name, 0, 0), observed=got)
    return ok


def declare_exchange_ext(ch: RawChannel, name: str, type_: str, arguments: dict[str, Any],
                         feature: str) -> None:
    _offered(ch, spec.Exchange.Declare(exchange=name, exchange_type=type_, arguments=arguments), feature)


def delivery_within(ch: RawChannel, within: float, what: str) -> Event | None:
    """The next basic.deliver on ``ch`` within ``within`` seconds, else None (a bounded wait)."""
    try:
        return ch.next_delivery(timeout=within, what=what)
    except CaseTimeout:
        return None


def must_arrive(ch: RawChannel, within: float, what: str, expected: str) -> Event:
    ev = delivery_within(ch, within, what)
    if ev is None:
        raise Mismatch(what, expected=expected, observed=f"no delivery within {within:.1f}s")
    record(what, ev.describe())
    return ev


def props(**fields: Any) -> spec.Basic.Properties:
    return spec.Basic.Properties(**fields)


def headers(ev: Event | None) -> dict[str, Any]:
    if ev is None or ev.properties is None:
        return {}
    return dict(ev.properties.headers or {})


def x_death(ev: Event) -> list[dict[str, Any]]:
    """The x-death array of a delivered message, its entries as plain dicts (a non-array is a FAIL)."""
    deaths = headers(ev).get("x-death")
    if not isinstance(deaths, list) or not all(isinstance(d, dict) for d in deaths):
        raise Mismatch("x-death header", expected="an array of tables", observed=repr(deaths))
    return [dict(d) for d in deaths]


def death_fields(entry: dict[str, Any], *, since: float) -> dict[str, Any]:
    """One x-death entry with its ``time`` replaced by whether it is a timestamp taken during the
    case (from ``since``, epoch seconds, to now, with a second's grace each side for rounding:
    the AMQP timestamp has second resolution) — so the whole entry compares in one check."""
    out = dict(entry)
    t = out.get("time")
    if isinstance(t, _dt.datetime):
        stamp = t.replace(tzinfo=_dt.UTC).timestamp() if t.tzinfo is None else t.timestamp()
        out["time"] = "timestamp during the case" if since - 1 <= stamp <= time.time() + 1 else f"{t!r}"
    else:
        out["time"] = f"not a timestamp: {t!r}"
    for key in ("routing-keys",):
        if isinstance(out.get(key), tuple):
            out[key] = list(out[key])
    return out


def no_return(ch: RawChannel, what: str) -> None:
    """No basic.return arrived on ``ch`` (after a barrier: everything before it was processed)."""
    ch.barrier()
    returns = [e for e in ch.history() if isinstance(e.method, spec.Basic.Return)]
    if returns:
        raise Mismatch(what, expected="no basic.return", observed=returns[0].describe())
    record(what, "no basic.return")


def login_user(ch: RawChannel) -> str:
    """The user the connection of ``ch`` logged in as (the name its URL gave the handshake)."""
    return str(ch.conn.url.user)


def send_confirmed(ch: RawChannel, exchange: str,
                   messages: list[tuple[str, bytes, spec.Basic.Properties | None]]) -> None:
    """Publish (routing key, body, properties) triples on a confirm-mode channel of ``ch``'s
    connection and wait until each is confirmed, so all are enqueued before the case goes on; a
    nack is a Mismatch (the broker refused a message the case needs)."""
    pub = ch.conn.channel()
    pub.confirm_select()
    for rk, body, properties in messages:
        pub.publish(exchange, rk, body, properties=properties or spec.Basic.Properties())
    st = settle_all(pub, len(messages))
    if st.nacked:
        raise Mismatch("setup: publisher confirms", expected="every publish acked",
                       observed=f"nacked seqs {sorted(st.nacked)}")


def settle_for(ttl_ms: int, timeout: float) -> float:
    """How long a case waits for something due ``ttl_ms`` from now: the TTL plus the settle window
    (:func:`~conformance.verify.expect.quiet_window`), never longer."""
    return ttl_ms / 1000 + quiet_window(timeout)


def count_drops_to(ch: RawChannel, queue: str, target: int, within: float) -> int:
    """Poll ``queue``'s message count (passive declare) until it is ``target`` or ``within``
    seconds pass; the last count seen. (Expiry has no event a client sees: this is the bounded
    wait for it; a passive declare does not renew a message's TTL. Nor has a queue's applying a
    publish whose channel is gone: a quorum queue counts it a moment after the channel's close-ok.)"""
    deadline = time.monotonic() + within
    count = ch.message_count(queue)
    while count != target and time.monotonic() < deadline:
        time.sleep(0.05)
        count = ch.message_count(queue)
    return count
