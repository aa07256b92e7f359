"""The faults workload's clients: publishers with confirms and consumers with manual acks that
record what they saw and reconnect (bounded) through the cluster's nodes when a node fails."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pika
import pika.exceptions

from conformance.faults.checker import ACK, NACK, UNKNOWN, Delivery, Publish
from conformance.protocol.uri import pika_parameters
from conformance.protocol.wire import URL

#: pika's heartbeat (s): a paused node's connection is seen dead after about two of these
HEARTBEAT = 4
#: a connection attempt's socket and handshake deadline (s)
CONNECT_TIMEOUT = 5.0
#: wait after a failed connection attempt before trying the next node (s)
BACKOFF = 0.5


def params(url: URL) -> pika.ConnectionParameters:
    p = pika_parameters(url, CONNECT_TIMEOUT)
    p.heartbeat = HEARTBEAT
    p.socket_timeout = CONNECT_TIMEOUT
    p.stack_timeout = CONNECT_TIMEOUT * 2
    p.blocked_connection_timeout = 30
    p.connection_attempts = 1
    return p


@dataclass
class History:
    """What all clients saw, appended from their threads (list.append is atomic under the GIL)."""

    t0: float = field(default_factory=time.monotonic)
    publishes: list[Publish] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    client_events: list[dict[str, object]] = field(default_factory=list)  # reconnects, errors
    goal: int = 0  # broker-confirmed publishes after which ``reached`` is set (0: never)
    reached: threading.Event = field(default_factory=threading.Event)
    _acked: int = field(default=0, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def published(self, publish: Publish) -> None:
        """Record a publish's outcome; the ``goal``-th broker ack sets ``reached``."""
        self.publishes.append(publish)
        if publish.outcome == ACK and self.goal:
            with self._lock:
                self._acked += 1
                if self._acked >= self.goal:
                    self.reached.set()

    def note(self, who: str, node: int, what: str) -> None:
        self.client_events.append({"t": round(self.now(), 3), "client": who, "node": node, "event": what})


def next_node(failed: int, client: int, count: int, home: int) -> int:
    """The node a client tries after its connection to ``failed`` ended: back to its home node
    when it was elsewhere (so clients return where they started once a node is back), else one
    of the others chosen by the client's number (so the clients of a failed node spread over
    the survivors instead of all moving to one)."""
    if count == 1:
        return 0
    if failed != home:
        return home
    others = [i for i in range(count) if i != failed]
    return others[client % len(others)]


def _close(conn: pika.BlockingConnection | None) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()


class _Client(threading.Thread):
    """A workload client: works over one node's connection until it fails, then moves to the next node
    (:func:`next_node`) after :data:`BACKOFF`, until stopped. Subclasses set up the channel and work."""

    def __init__(self, name: str, number: int, urls: Sequence[URL], queue: str, history: History,
                 stop: threading.Event, first_node: int) -> None:
        super().__init__(name=name, daemon=True)
        self.number = number
        self.urls = list(urls)
        self.queue = queue
        self.history = history
        self.stop_event = stop
        self.first_node = first_node

    def _setup(self, ch: pika.adapters.blocking_connection.BlockingChannel) -> None:
        raise NotImplementedError

    def _work(self, ch: pika.adapters.blocking_connection.BlockingChannel, node: int) -> bool:
        """True when done; False to move on to the next node."""
        raise NotImplementedError

    def run(self) -> None:
        node = home = self.first_node
        while not self.stop_event.is_set():
            conn = None
            try:
                conn = pika.BlockingConnection(params(self.urls[node]))
                ch = conn.channel()
                self._setup(ch)
                self.history.note(self.name, node, "connected")
                if self._work(ch, node):
                    return
            except Exception as exc:  # noqa: BLE001 - any client failure means: try the next node
                self.history.note(self.name, node, f"{type(exc).__name__}: {exc}"[:200])
            finally:
                _close(conn)
            node = next_node(node, self.number, len(self.urls), home)
            self.stop_event.wait(BACKOFF)


class Publisher(_Client):
    """Publishes persistent messages with unique ids, one at a time, each waiting for its confirm."""

    def __init__(self, number: int, urls: Sequence[URL], queue: str, history: History, stop: threading.Event,
                 run_id: str, rate: float) -> None:
        super().__init__(f"faults-pub-{number}", number, urls, queue, history, stop, number % len(urls))
        self.run_id = run_id
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.seq = 0

    def _setup(self, ch: pika.adapters.blocking_connection.BlockingChannel) -> None:
        ch.confirm_delivery()

    def _work(self, ch: pika.adapters.blocking_connection.BlockingChannel, node: int) -> bool:
        self._publish_loop(ch, node)
        return True  # it returns only once stopped

    def _publish_loop(self, ch: pika.adapters.blocking_connection.BlockingChannel, node: int) -> None:
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            if self.interval:
                delay = next_at - time.monotonic()
                if delay > 0 and self.stop_event.wait(delay):
                    return
                next_at = max(next_at + self.interval, time.monotonic() - 1.0)
            self.seq += 1
            msg_id = f"{self.run_id}-p{self.number}-{self.seq}"
            sent = self.history.now()
            props = pika.BasicProperties(message_id=msg_id, delivery_mode=2)
            try:
                # mandatory: a message routed to no queue is returned before its confirm (RabbitMQ's
                # confirms guide), and pika raises UnroutableError instead of reporting an ack
                ch.basic_publish("", self.queue, msg_id.encode(), props, mandatory=True)
            except (pika.exceptions.NackError, pika.exceptions.UnroutableError):
                # nacked, or returned unroutable (then acked): either way no queue took it, nothing
                # was promised; counted with the nacks
                self.history.published(Publish(msg_id, sent, NACK, self.history.now(), node))
                continue
            except BaseException:
                # no answer: the broker may or may not have the message, it promised nothing
                self.history.published(Publish(msg_id, sent, UNKNOWN, None, node))
                raise
            self.history.published(Publish(msg_id, sent, ACK, self.history.now(), node))


class Consumer(_Client):
    """Consumes with manual acks; records each delivery before acking it."""

    def __init__(
        self, number: int, urls: Sequence[URL], queue: str, history: History, stop: threading.Event,
        prefetch: int = 100,
        first_node: int | None = None,
        on_idle: Callable[[pika.adapters.blocking_connection.BlockingChannel], bool] | None = None,
    ) -> None:
        first = (number + 1) % len(urls) if first_node is None else first_node
        super().__init__(f"faults-con-{number}", number, urls, queue, history, stop, first)
        self.prefetch = prefetch
        self.on_idle = on_idle  # returns True to end (the final drain)

    def _setup(self, ch: pika.adapters.blocking_connection.BlockingChannel) -> None:
        ch.basic_qos(prefetch_count=self.prefetch)

    def _work(self, ch: pika.adapters.blocking_connection.BlockingChannel, node: int) -> bool:
        if self._consume(ch, node):
            return True
        self.history.note(self.name, node, "consumer cancelled by the broker")
        return False

    def _consume(self, ch: pika.adapters.blocking_connection.BlockingChannel, node: int) -> bool:
        """True when done (stopped, or the drain found the queue empty); False when cancelled."""
        for method, props, _body in ch.consume(self.queue, auto_ack=False, inactivity_timeout=1.0):
            if self.stop_event.is_set():
                return True
            if method is None:
                if self.on_idle is not None and self.on_idle(ch):
                    return True
                continue
            msg_id = props.message_id or f"<no message-id, body {_body[:40]!r}>"
            self.history.deliveries.append(
                Delivery(msg_id, self.history.now(), bool(method.redelivered), node)
            )
            ch.basic_ack(method.delivery_tag)
        return False


def drain(urls: Sequence[URL], queue: str, history: History, deadline: float, quiet: float = 3.0) -> str:
    """Consume what is left until the queue reports no ready message after ``quiet`` seconds
    without a delivery (or the deadline). Returns how it ended, for the summary."""
    stop = threading.Event()
    state: dict[str, Any] = {"last": time.monotonic(), "count": len(history.deliveries), "why": "deadline"}

    def idle(ch: pika.adapters.blocking_connection.BlockingChannel) -> bool:
        now = time.monotonic()
        if len(history.deliveries) != state["count"]:
            state["count"], state["last"] = len(history.deliveries), now
        if now > deadline:
            state["why"] = "deadline"
            return True
        if now - float(state["last"]) < quiet:
            return False
        ready = ch.queue_declare(queue, passive=True).method.message_count
        if ready == 0:
            state["why"] = "queue empty"
            return True
        return False

    c = Consumer(99, urls, queue, history, stop, prefetch=500, first_node=0, on_idle=idle)
    c.start()
    c.join(max(0.0, deadline - time.monotonic()) + 10)
    stop.set()
    c.join(10)
    return str(state["why"])


class Activity(Protocol):
    """What the progress line shows of the nemesis."""

    events: list[dict[str, Any]]
    active: str | None


class Progress:
    """A progress line every few seconds: to ``status`` (a live line on a terminal) if given, else
    as a plain line to ``log`` (it also goes to logs and pipes)."""

    def __init__(
        self,
        history: History,
        nemesis: Activity,
        log: Callable[[str], None],
        every: float = 5.0,
        status: Callable[[str], None] | None = None,
    ) -> None:
        self.history, self.nemesis, self.log, self.every = history, nemesis, log, every
        self.status = status
        if status is not None:
            self.every = 1.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faults-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            h = self.history
            confirmed = sum(1 for p in list(h.publishes) if p.outcome == "ack")
            line = (
                f"[{h.now():6.0f}s] sent {len(h.publishes)} confirmed {confirmed} consumed "
                f"{len(h.deliveries)} | nemesis events {len(self.nemesis.events)} | "
                f"now: {self.nemesis.active or '-'}"
            )
            (self.status or self.log)(line)
