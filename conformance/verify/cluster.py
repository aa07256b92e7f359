"""The cluster cases' steps: replicated queues, numbered publishes with confirms, a drain that
outlives a leader election, and the bookkeeping of what was confirmed and what came back.

Every message body is its number (``b"17"``), so "confirmed but never consumed" is a set
difference. Every wait has a deadline; a node that dies under a connection ends that
connection's part of the story (recorded), never the case.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pamqp import commands as spec

from conformance.cluster.base import ClusterController, ClusterError, Leader
from conformance.model.verdicts import CaseTimeout
from conformance.protocol.raw import RawChannel, RawConnection
from conformance.protocol.rawevents import UnexpectedClose
from conformance.protocol.wire import URL
from conformance.verify.queue_types import QUORUM
from conformance.verify.unsupported import Unsupported

#: the replicated queue types the cluster cases run on: quorum, classic mirrored, and stream
#: (RabbitMQ 3.9+; a target without streams answers the declaration, and the case is UNSUPPORTED)
MIRRORED = "mirrored"
STREAM = "stream"
REPLICATED = (QUORUM, MIRRORED, STREAM)
#: the replicated types whose consumers take messages off the queue (ack removes, reject requeues,
#: a consumer's death returns its unacked deliveries): every one but a stream, which is a log each
#: consumer reads from an offset of its own (RabbitMQ's streams guide, "non-destructive consumer
#: semantics") — the cases about requeues and redeliveries do not apply to it
DESTRUCTIVE = (QUORUM, MIRRORED)
#: the body of the marker a stream drain publishes after everything else: a stream is an ordered
#: log, so once a reader has the marker it has every message appended before it
STREAM_END = 999_999
#: the classic-mirroring policy a mirrored case sets on its own queue and removes afterwards
HA_ALL = {"ha-mode": "all", "ha-sync-mode": "automatic"}

__all__ = [
    "DESTRUCTIVE", "HA_ALL", "MIRRORED", "REPLICATED", "STREAM", "ClusterController", "Confirms", "Consuming",
    "Drained", "Leader", "Seen", "all_running", "answer", "consumer_arguments", "declare_replicated", "drain",
    "drain_ids", "drain_stream", "drain_until", "in_background", "index_of", "mandatory_publish",
    "out_of_order", "publish_numbered", "require", "start_again", "unflagged_repeats", "wait_for",
]


def require(cluster: ClusterController, *actions: str) -> None:
    """UNSUPPORTED, with the controller's one-line reason, when an action the case needs is missing."""
    for action in actions:
        reason = cluster.supports(action)
        if reason is not None:
            raise Unsupported(reason, expected=f"node control: {action}", observed="not available")


def index_of(cluster: ClusterController, node_name: str) -> int:
    for n in cluster.nodes:
        if n.name == node_name:
            return n.index
    raise CaseTimeout("the leader's node among the target's nodes", 0, observed=node_name)


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy (returned) or the deadline (TIMEOUT naming
    the last thing it said): cluster state changes (mirrors, elections) send no event to a client."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            got = check()
            if got:
                return got
            last = got
        except (ClusterError, OSError, CaseTimeout) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise CaseTimeout(what, timeout, observed=str(last))
        time.sleep(interval)


def declare_replicated(cluster: ClusterController, ch: RawChannel, queue: str, qtype: str, cleanup: Any,
                       timeout: float, finalizer: Callable[[Callable[[], None]], None]) -> Leader:
    """Declare ``queue`` through ``ch``'s node as a quorum queue, a stream, or a classic queue
    mirrored on every node (an ``ha-mode: all`` policy on exactly this name, removed after the
    case); returns where it leads once every node holds a replica (for mirrored: once the mirrors
    are there). A target that does not offer streams refuses the stream's declaration (RabbitMQ
    before 3.9: "unsupported queue type"; 3.9+ with the ``stream_queue`` feature flag disabled):
    UNSUPPORTED with that answer, never a guess."""
    if qtype == STREAM:
        _declare_stream(ch, queue, cleanup)
    elif qtype == MIRRORED:
        policy = f"{queue}-ha"
        try:
            cluster.set_policy(policy, f"^{queue}$", json.dumps(HA_ALL))
        except ClusterError as exc:
            raise Unsupported(f"classic mirroring needs a policy: {exc}", expected="ha-mode policy set",
                              observed=str(exc)) from exc
        finalizer(lambda: cluster.clear_policy(policy))
        ch.declare_queue(cleanup.queue(queue), durable=True)
    else:
        ch.declare_queue(cleanup.queue(queue), durable=True, arguments={"x-queue-type": QUORUM})
    size = len(cluster.nodes)

    def whole() -> Leader | None:
        where = cluster.leader(queue)
        return where if len(where.members) >= size else None

    try:
        leader: Leader = wait_for(f"{queue} replicated on {size} nodes", whole, timeout)
    except CaseTimeout as exc:
        raise CaseTimeout("setup: the queue replicated on every node", timeout,
                          observed=exc.observed) from exc
    if qtype == STREAM:
        deadline = time.monotonic() + timeout
        for node in cluster.nodes:
            _await_stream_reader(node.url, queue, max(1.0, deadline - time.monotonic()))
    return leader


def _await_stream_reader(url: URL, queue: str, timeout: float) -> None:
    """Wait until a consumer can attach to stream ``queue`` through ``url`` (basic.consume-ok,
    then cancelled). A stream's record lists its members at once, but each node's replica starts
    on its own; until it runs, RabbitMQ refuses a consumer there with 406 PRECONDITION_FAILED
    "... does not have a running replica on the local node" (``rabbit_stream_queue:consume``,
    3.9 to 4.3; RabbitMQ's own AMQP 1.0 Java client retries exactly that answer). A case's
    consumers come after this, so the order and loss cases never judge a replica still starting.
    A refusal that lasts to the deadline is the setup's TIMEOUT, naming the last answer."""
    answers: list[str] = []

    def attach_and_cancel(ch: RawChannel) -> None:
        ch.qos(1)  # a stream consumer needs a prefetch (RabbitMQ's streams guide, "Consuming")
        ch.cancel(ch.consume(queue, arguments={"x-stream-offset": "next"}))

    def attached() -> bool:
        answers.append(answer(url, attach_and_cancel, min(5.0, timeout)))
        return answers[-1] == "ok"

    try:
        wait_for(f"a consumer attached to {queue} through {url.host}:{url.port}", attached, timeout,
                 interval=0.2)
    except CaseTimeout as exc:
        raise CaseTimeout(f"setup: a consumer attached to the stream through {url.host}:{url.port}",
                          timeout, observed=answers[-1] if answers else exc.observed) from exc


def _declare_stream(ch: RawChannel, queue: str, cleanup: Any) -> None:
    try:
        ch.declare_queue(cleanup.queue(queue), durable=True, arguments={"x-queue-type": STREAM})
    except UnexpectedClose as exc:
        method = getattr(exc.event, "method", None)
        text = f"{getattr(method, 'reply_code', '?')} {getattr(method, 'reply_text', exc.event.describe())}"
        # only a refusal of the queue type itself means "no streams here" (RabbitMQ 3.10.8 answers an
        # unknown type with 406 "invalid arg 'x-queue-type' ... unsupported queue type '...'"); any
        # other close is the case's to report
        if getattr(method, "reply_code", None) == 406 and any(
                t in text for t in ("invalid arg 'x-queue-type'", "unsupported queue type", "feature flag")):
            raise Unsupported(f"the target does not offer stream queues: queue.declare with x-queue-type "
                              f"stream answered {text}", expected="a stream declared",
                              observed=text) from exc
        raise


def consumer_arguments(qtype: str) -> dict[str, Any] | None:
    """basic.consume arguments for ``qtype``: a stream consumer reads from the start of the log
    (``x-stream-offset: first``; the default, ``next``, would miss what came before it)."""
    return {"x-stream-offset": "first"} if qtype == STREAM else None


@dataclass
class Confirms:
    """What one publisher channel saw: publish number → ack / nack, and how the channel ended.

    Publishes are mandatory: a message the broker routed to no queue comes back (basic.return,
    312 NO_ROUTE) and is then confirmed all the same — RabbitMQ's confirms guide: "For unroutable
    messages, the broker will issue a confirm once the exchange verifies a message won't route to
    any queue"; with mandatory "the basic.return is sent to the client before basic.ack". Such a
    message is in ``returned``, never in ``acked``: ``acked`` is what a queue took. (A stream
    whose every node stopped is unroutable for a moment after the nodes are back: RabbitMQ 3.10.8
    acked publishes into that gap, and counted as stored they looked lost.)"""

    published: list[int] = field(default_factory=list)  # message numbers, in publish order
    acked: set[int] = field(default_factory=set)  # confirmed and not returned: stored by a queue
    nacked: set[int] = field(default_factory=set)
    returned: set[int] = field(default_factory=set)  # returned unroutable (then confirmed): not stored
    ended: str = ""  # "" while open; else what the client saw (connection.close, socket closed ...)

    @property
    def unconfirmed(self) -> set[int]:
        return set(self.published) - self.acked - self.nacked - self.returned

    def summary(self) -> str:
        return (f"published {len(self.published)}, acked {len(self.acked)}, nacked {len(self.nacked)}, "
                + (f"returned unroutable {len(self.returned)}, " if self.returned else "")
                + f"unanswered {len(self.unconfirmed)}" + (f"; then {self.ended}" if self.ended else ""))


def _read_confirms(ch: RawChannel, seq_to_msg: dict[int, int], got: Confirms) -> None:
    """Fold the returns, acks and nacks ``ch`` received so far into ``got`` (multiple=true covers a
    range), in the order they came: a return precedes its message's confirm."""
    settled: set[int] = set()
    returned: set[int] = set()
    for ev in ch.history():
        m = ev.method
        if isinstance(m, spec.Basic.Return):
            with contextlib.suppress(TypeError, ValueError):
                returned.add(int(ev.body or b""))
        elif isinstance(m, (spec.Basic.Ack, spec.Basic.Nack)):
            tags = [t for t in seq_to_msg if (t <= m.delivery_tag and t not in settled)] if m.multiple \
                else [m.delivery_tag]
            for tag in tags:
                settled.add(tag)
                if tag not in seq_to_msg:
                    continue
                n = seq_to_msg[tag]
                if isinstance(m, spec.Basic.Nack):
                    got.nacked.add(n)
                elif n in returned:
                    got.returned.add(n)
                else:
                    got.acked.add(n)


def publish_numbered(url: URL, queue: str, numbers: Iterable[int], *, timeout: float,
                     got: Confirms | None = None, between: Callable[[int], None] | None = None,
                     pace: float = 0.0) -> Confirms:
    """Publish persistent messages ``numbers`` to ``queue`` through ``url`` in confirm mode and wait
    (until ``timeout``) for every confirm; ``between(i)`` runs after the i-th publish (a fault
    injected mid-stream). A connection that dies is recorded in ``ended``, not raised."""
    got = got if got is not None else Confirms()
    seq_to_msg: dict[int, int] = {}
    try:
        conn = RawConnection.open(url, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - a node that refuses a connection is an observation here
        got.ended = f"connect refused: {type(exc).__name__}: {exc}"
        return got
    try:
        ch = conn.channel()
        ch.confirm_select()
        for i, n in enumerate(numbers):
            try:
                seq_to_msg[ch.publish("", queue, str(n).encode(), persistent=True, mandatory=True)] = n
            except Exception as exc:  # noqa: BLE001 - the node died under the publisher: recorded
                got.ended = f"publish {n} failed: {type(exc).__name__}: {exc}"
                break
            got.published.append(n)
            if between is not None:
                between(i)
            if pace:
                time.sleep(pace)  # a steady stream, so a fault lands mid-stream (not after it)
        deadline = time.monotonic() + timeout
        while not got.ended:
            _read_confirms(ch, seq_to_msg, got)
            if not got.unconfirmed or time.monotonic() > deadline:
                break
            try:
                conn.wait_event(ch.id, lambda e: isinstance(e.method, (spec.Basic.Ack, spec.Basic.Nack)),
                                "basic.ack or basic.nack",
                                timeout=min(1.0, max(0.1, deadline - time.monotonic())))
            except CaseTimeout:
                continue
            except Exception as exc:  # noqa: BLE001 - the connection ended while confirms were pending
                got.ended = f"{type(exc).__name__}: {exc}"
        _read_confirms(ch, seq_to_msg, got)
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - closing a connection to a dead node
            pass
    return got


@dataclass
class Drained:
    """What a drain through one node got: message number → deliveries (redelivered flag, headers)."""

    got: dict[int, list[tuple[bool, dict[str, Any]]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)  # the same deliveries, in receipt order

    @property
    def numbers(self) -> set[int]:
        return set(self.got)


def drain_ids(url: URL, queue: str, *, timeout: float, expect: int | None = None) -> Drained:
    """basic.get (with ack) every message of ``queue`` through ``url`` until it is empty — retrying
    while the queue is unavailable (a leader election) until ``timeout``. ``expect``: stop as soon
    as that many distinct numbers came."""
    out = Drained()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = RawConnection.open(url, timeout=min(5.0, timeout))
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            out.errors.append(f"connect: {exc}")
            time.sleep(0.5)
            continue
        try:
            ch = conn.channel()
            while True:
                ev = ch.get(queue, timeout=min(5.0, max(0.5, deadline - time.monotonic())))
                if ev is None:
                    return out
                n = int(ev.body or b"-1")
                props = ev.properties
                headers = dict(props.headers or {}) if props is not None else {}
                out.got.setdefault(n, []).append((bool(ev.method.redelivered), headers))
                out.seen.append(Seen(n, bool(ev.method.redelivered), headers, "drain", time.monotonic()))
                ch.ack(ev.method.delivery_tag)
                if expect is not None and len(out.got) >= expect:
                    ch.barrier(timeout=5.0)
                    return out
        except Exception as exc:  # noqa: BLE001 - queue unavailable mid-election: try again
            out.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            time.sleep(0.5)
        finally:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
    raise CaseTimeout(f"draining {queue} through {url.host}:{url.port}", timeout,
                      observed=f"{len(out.got)} messages; last error {out.errors[-1:] or 'none'}")


def drain_until(url: URL, queue: str, want: set[int], *, timeout: float) -> Drained:
    """:func:`drain_ids` through ``url`` again and again until every number of ``want`` came (or
    none is wanted), within ``timeout``; at the deadline what came is returned (what is missing is
    the case's finding, not a timeout: the queue answered, empty). For messages a queue returns
    on an event of its own (a node back), which a get-empty before it cannot tell apart."""
    deadline = time.monotonic() + timeout
    out = Drained()
    while True:
        got = drain_ids(url, queue, timeout=max(1.0, deadline - time.monotonic()))
        for n, deliveries in got.got.items():
            out.got.setdefault(n, []).extend(deliveries)
        out.seen += got.seen
        out.errors += got.errors
        if want <= out.numbers or time.monotonic() > deadline:
            return out
        time.sleep(0.5)  # the queue sends a client nothing when it returns them


def all_running(cluster: ClusterController, timeout: float = 60.0) -> None:
    """Where the controller can tell (a local cluster's ``wait_running``), wait until every node
    runs again; a cluster the user runs says nothing more than that its nodes answer."""
    wait_running = getattr(cluster, "wait_running", None)
    if wait_running is not None:
        wait_running(timeout=timeout)


def start_again(cluster: ClusterController, index: int, timeout: float = 60.0) -> None:
    """Start node ``index`` again (returns when it answers AMQP), then :func:`all_running`."""
    cluster.start(index)
    all_running(cluster, timeout)


def mandatory_publish(url: URL, queue: str, number: int, timeout: float) -> dict[str, str]:
    """Publish message ``number`` (persistent, mandatory, confirm mode) to ``queue`` through
    ``url``: the basic.return it got (``"none"``) and its confirm (ack, nack, or what ended it)."""
    conn = RawConnection.open(url, timeout=timeout)
    try:
        ch = conn.channel()
        ch.confirm_select()
        ch.publish("", queue, str(number).encode(), persistent=True, mandatory=True)
        try:
            ev = conn.wait_event(ch.id, lambda e: isinstance(e.method, (spec.Basic.Ack, spec.Basic.Nack)),
                                 "basic.ack or basic.nack", timeout=timeout)
            confirm = "ack" if isinstance(ev.method, spec.Basic.Ack) else "nack"
        except Exception as exc:  # noqa: BLE001 - no confirm is the observation
            confirm = f"{type(exc).__name__}: {exc}"[:120]
        returns = [e.method for e in ch.history() if isinstance(e.method, spec.Basic.Return)]
        returned = f"{returns[0].reply_code} {returns[0].reply_text}" if returns else "none"
        return {"returned": returned, "confirm": confirm}
    finally:
        conn.close(timeout=1.0)


def drain_stream(url: URL, queue: str, *, timeout: float) -> Drained:
    """Read a stream through ``url`` from its first offset up to a marker: the marker
    (:data:`STREAM_END`) is published with confirms through ``url`` first — retried until a leader
    confirms it, until ``timeout`` — so every message appended before it (everything confirmed
    before the drain) is read once the marker comes; no idle wait decides "empty". basic.get does
    not exist for streams (540 NOT_IMPLEMENTED); consumption needs a prefetch and manual acks
    (RabbitMQ's streams guide, "Consuming"). The marker is not among the drained messages."""
    deadline = time.monotonic() + timeout

    def marked() -> Confirms | None:
        left = max(0.5, deadline - time.monotonic())
        c = publish_numbered(url, queue, [STREAM_END], timeout=min(5.0, left))
        return c if c.acked else None

    wait_for(f"the end marker confirmed by {queue}'s leader", marked, timeout, interval=0.5)
    out = Drained()
    while time.monotonic() < deadline:
        try:
            reader = Consuming(url, queue, "drain", timeout=min(5.0, timeout), prefetch=100,
                               arguments=consumer_arguments(STREAM), until=STREAM_END)
        except Exception as exc:  # noqa: BLE001 - stream unavailable mid-election: try again
            out.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            time.sleep(0.5)
            continue
        reader.finished.wait(timeout=max(0.0, deadline - time.monotonic()))
        reader.stop()
        if STREAM_END in reader.numbers:
            for s in reader.seen:
                if s.number != STREAM_END:
                    out.got.setdefault(s.number, []).append((s.redelivered, s.headers))
                    out.seen.append(s)
            return out
        out.errors.append(reader.ended or "the marker did not come")
    raise CaseTimeout(f"reading {queue} to its end marker through {url.host}:{url.port}", timeout,
                      observed=f"last error {out.errors[-1:] or 'none'}")


def drain(url: URL, queue: str, qtype: str, *, timeout: float) -> Drained:
    """Everything in ``queue`` through ``url``: basic.get until empty, or a stream read to its end."""
    if qtype == STREAM:
        return drain_stream(url, queue, timeout=timeout)
    return drain_ids(url, queue, timeout=timeout)


def in_background(fn: Callable[[], None]) -> threading.Thread:
    """Run a fault (a kill waits for the process to go) while the publisher keeps publishing."""
    t = threading.Thread(target=fn, daemon=True, name="amqpc-cluster-fault")
    t.start()
    return t


def answer(url: URL, action: Callable[[RawChannel], Any], timeout: float) -> str:
    """What the broker answers ``action`` on a fresh channel through ``url``: ``"ok"`` (then a
    barrier round trip proved the channel still open), or ``"<code> <reply-text>"`` of the
    channel.close / connection.close it sent instead. A refused connection is raised."""
    conn = RawConnection.open(url, timeout=timeout)
    try:
        ch = conn.channel()
        try:
            action(ch)
            ch.barrier(timeout=timeout)
        except UnexpectedClose as exc:
            method = getattr(exc.event, "method", None)
            if method is None:
                return exc.event.describe()
            return f"{method.reply_code} {method.reply_text}"
        return "ok"
    finally:
        conn.close(timeout=1.0)


@dataclass(frozen=True)
class Seen:
    """One delivery a consumer (or a drain) received: message number, redelivered flag, headers."""

    number: int
    redelivered: bool
    headers: dict[str, Any]
    who: str  # which consumer, e.g. "C1 on node 3" or "drain"
    at: float  # time.monotonic() on receipt: the order across consumers


class Consuming:
    """A manual-ack consumer through one node, in a thread of its own, recording every delivery
    before acking it; it never acks its first ``hold`` deliveries (so some are unacked when a fault
    lands). A connection that dies ends it (recorded in ``ended``). ``arguments``: basic.consume's
    (a stream's offset); ``until``: the message number after which it stops by itself. ``finished``
    is set when it stops, whatever the reason."""

    def __init__(self, url: URL, queue: str, who: str, *, timeout: float, prefetch: int = 10,
                 hold: int = 0, arguments: dict[str, Any] | None = None, until: int | None = None) -> None:
        self.who = who
        self.seen: list[Seen] = []
        self.ended = ""
        self.finished = threading.Event()
        self._hold = hold
        self._until = until
        self._stop = threading.Event()
        self._conn = RawConnection.open(url, timeout=timeout)
        try:
            self._ch = self._conn.channel()
            self._ch.qos(prefetch)
            self.tag = self._ch.consume(queue, arguments=arguments)
        except BaseException:
            self._conn.close(timeout=1.0)
            raise
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"amqpc-cluster-{who}")
        self._thread.start()

    @property
    def numbers(self) -> set[int]:
        return {s.number for s in self.seen}

    def _loop(self) -> None:
        try:
            self._consume()
        finally:
            self.finished.set()

    def _consume(self) -> None:
        while not self._stop.is_set():
            try:
                ev = self._ch.next_delivery(timeout=0.5)
            except CaseTimeout:
                continue
            except Exception as exc:  # noqa: BLE001 - the node died under the consumer: recorded
                self.ended = f"{type(exc).__name__}: {exc}"[:200]
                return
            props = ev.properties
            headers = dict(props.headers or {}) if props is not None else {}
            number = int(ev.body or b"-1")
            self.seen.append(Seen(number, bool(ev.method.redelivered), headers, self.who, time.monotonic()))
            if number == self._until:
                return
            if len(self.seen) <= self._hold:
                continue
            try:
                self._ch.ack(ev.method.delivery_tag)
            except Exception as exc:  # noqa: BLE001 - as above
                self.ended = f"ack failed: {type(exc).__name__}: {exc}"[:200]
                return

    def stop(self) -> None:
        """End the thread (bounded) and close the connection; unacked deliveries go back."""
        self._stop.set()
        self._thread.join(timeout=5.0)
        try:
            self._conn.close(timeout=1.0)
        except Exception:  # noqa: BLE001 - closing a connection to a dead node
            pass


#: deliveries received on different connections within this many seconds of each other have no
#: order a client can observe (two reader threads, two sockets, possibly two nodes delivering at
#: once after a pause): neither may be called "the later one"
RECEIPT_TIE = 0.1


def unflagged_repeats(seen: Iterable[Seen], tie: float = RECEIPT_TIE) -> list[Seen]:
    """The deliveries of a message already delivered before that do not carry redelivered=true:
    AMQP's redelivered flag says the message may have been delivered before. A message delivered
    twice without the flag always counts (one of the two was a repeat); an unflagged delivery after
    a flagged one counts when it was received later on the same connection, or more than ``tie``
    seconds later on another (closer than that, the unflagged one may have been the first)."""
    by_number: dict[int, list[Seen]] = {}
    for s in sorted(seen, key=lambda s: s.at):
        by_number.setdefault(s.number, []).append(s)
    bad = []
    for deliveries in by_number.values():
        for i, s in enumerate(deliveries):
            if s.redelivered:
                continue
            earlier = deliveries[:i]
            if any(not e.redelivered or e.who == s.who or s.at - e.at > tie for e in earlier):
                bad.append(s)
    return sorted(bad, key=lambda s: s.at)


def out_of_order(seen: Iterable[Seen], limit: int = 5) -> list[str]:
    """Per consumer, its first deliveries (redelivered=false) that come after a higher message
    number: one publisher's messages, numbered in publish order, must reach a consumer in that
    order (only redeliveries may not). At most ``limit`` per consumer, as "who: a before b"."""
    ordered = sorted(seen, key=lambda s: s.at)
    out: list[str] = []
    for who in sorted({s.who for s in ordered}):
        first = [s.number for s in ordered if s.who == who and not s.redelivered]
        out += [f"{who}: {a} before {b}" for a, b in itertools.pairwise(first) if b <= a][:limit]
    return out
