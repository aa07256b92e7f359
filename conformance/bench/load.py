"""Load scenarios over :class:`~conformance.bench.wire.BenchConnection`s.

Each scenario runs on ``connections`` connections at once, each with its own queue (one queue
per connection, so a broker that runs queues in parallel can show it), for a bounded time, and
returns a :class:`Measured`. Throughput counts only what the broker confirmed (publish), delivered
(consume) or committed (tx); the clock stops at the last such event.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass

from pamqp import commands as spec

from conformance.bench.wire import BenchConnection, BenchError, encode, encode_publish, now

BODY = b"x" * 64


@dataclass(frozen=True)
class LoadSettings:
    seconds: float = 5.0
    connections: int = 4
    window: int = 1000  # outstanding confirms per connection (streaming confirms)
    batch: int = 100  # messages per write
    prefetch: int = 1000  # manual-ack consume: basic.qos prefetch-count
    ack_every: int = 100  # manual-ack consume: one multiple=true ack per this many deliveries
    body: bytes = BODY
    rpc_timeout: float = 10.0
    drain_timeout: float = 30.0  # after --seconds: wait this long for outstanding confirms/commits


@dataclass(frozen=True)
class Measured:
    messages: int
    seconds: float
    latencies: tuple[tuple[float, int], ...] = ()  # (seconds, how many messages had it)
    nacked: int = 0
    note: str = ""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


def percentile(latencies: tuple[tuple[float, int], ...], q: float) -> float | None:
    """The ``q`` quantile (0..1) of weighted latencies, by the nearest-rank method."""
    total = sum(w for _lat, w in latencies)
    if total == 0:
        return None
    rank = max(1, int(q * total + 0.999999))
    seen = 0
    for lat, w in sorted(latencies):
        seen += w
        if seen >= rank:
            return lat
    return sorted(latencies)[-1][0]


# -- confirmed publish ---------------------------------------------------------------------


class _ConfirmPump:
    """Streaming confirms on one connection: keep ``window`` messages unconfirmed until ``end``."""

    def __init__(self, conn: BenchConnection, message: bytes, settings: LoadSettings, end: float) -> None:
        self.conn = conn
        self.batch = max(1, min(settings.batch, settings.window))
        self.data = message * self.batch
        self.window = max(settings.window, self.batch)
        self.end = end
        self.published = 0
        self.floor = 0  # every tag <= floor is confirmed
        self.singles: set[int] = set()  # tags above floor confirmed one by one
        self.confirmed = 0
        self.nacked = 0
        self.sent_at: list[float] = []  # per batch: perf_counter() when written
        self.latencies: list[tuple[float, int]] = []
        self.last_event = 0.0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn.on_ack = self._ack
        conn.on_writable = self.pump
        conn.on_close = self._closed

    def pump(self) -> None:
        conn = self.conn
        while not conn.paused and self.published - self.confirmed - self.nacked + self.batch <= self.window:
            t = now()
            if t >= self.end:
                self._check_done()
                return
            conn.write(self.data)
            self.sent_at.append(t)
            self.published += self.batch

    def _ack(self, tag: int, multiple: bool, nack: bool) -> None:
        t = now()
        self.last_event = t
        if tag > self.published or tag <= self.floor:
            self.conn.on_close = None
            self._fail(f"broker {'n' if nack else ''}acked unknown delivery tag {tag} "
                       f"(published {self.published}, confirmed up to {self.floor})")
            return
        if multiple:
            covered = [s for s in self.singles if s <= tag] if self.singles else []
            for s in covered:
                self.singles.discard(s)
            count = tag - self.floor - len(covered)
            self._record(t, self.floor + 1, tag, covered)
            self.floor = tag
        elif tag in self.singles:
            return  # a repeated confirm must not count twice
        else:
            count = 1
            self._record(t, tag, tag, [])
            if tag == self.floor + 1:
                self.floor = tag
                while self.floor + 1 in self.singles:
                    self.singles.discard(self.floor + 1)
                    self.floor += 1
            else:
                self.singles.add(tag)
        if nack:
            self.nacked += count
        else:
            self.confirmed += count
        self.pump()

    def _record(self, t: float, first: int, last: int, skip: list[int]) -> None:
        b = self.batch
        for i in range((first - 1) // b, (last - 1) // b + 1):
            lo, hi = max(first, i * b + 1), min(last, (i + 1) * b)
            n = hi - lo + 1 - sum(1 for s in skip if lo <= s <= hi)
            if n > 0:
                self.latencies.append((t - self.sent_at[i], n))

    def _check_done(self) -> None:
        if not self.done.done() and self.confirmed + self.nacked >= self.published:
            self.done.set_result(None)

    def _closed(self, reason: str) -> None:
        self._fail(reason)

    def _fail(self, reason: str) -> None:
        if not self.done.done():
            self.done.set_exception(BenchError(reason))


async def confirm_publish(conns: list[BenchConnection], queues: list[str], settings: LoadSettings,
                          *, persistent: bool, exchange: str = "", keys: list[str] | None = None) -> Measured:
    """Streaming confirmed publish, connection i to queue i through the default exchange, or with
    ``exchange`` and ``keys`` to that exchange with routing key i."""
    for conn in conns:
        await conn.rpc(spec.Confirm.Select(), spec.Confirm.SelectOk, settings.rpc_timeout)
    start = now()
    end = start + settings.seconds
    pumps = [
        _ConfirmPump(c, encode_publish(c.CHANNEL, keys[i] if keys else q, settings.body,
                                       persistent=persistent, exchange=exchange), settings, end)
        for i, (c, q) in enumerate(zip(conns, queues, strict=True))
    ]
    for p in pumps:
        p.pump()
    await _wait_all(
        [p.done for p in pumps],
        settings.seconds + settings.drain_timeout,
        lambda: f"{sum(p.published - p.confirmed - p.nacked for p in pumps)} confirms outstanding",
    )
    last = max((p.last_event for p in pumps), default=start)
    lat = tuple(x for p in pumps for x in p.latencies)
    return Measured(
        sum(p.confirmed for p in pumps), max(last - start, 1e-9), lat, sum(p.nacked for p in pumps)
    )


#: the topic-routing scenario: bindings on one topic exchange, each message matching one of them
TOPIC_BINDINGS = 1000


def topic_binding(i: int) -> str:
    """Binding i of the topic scenario: r<i>.*.x, and every tenth a leading-# pattern that never
    matches (#.z<i>), so matching each binding in turn costs a broker what a trie saves."""
    return f"#.z{i}" if i % 10 == 9 else f"r{i}.*.x"


def topic_exchange(queues: list[str]) -> str:
    return f"{queues[0]}-topic"


async def topic_publish(conns: list[BenchConnection], queues: list[str], settings: LoadSettings) -> Measured:
    """Confirmed publish through the topic exchange the runner bound: connection i's key r<i>.a.x
    matches binding r<i>.*.x only (its queue), among TOPIC_BINDINGS."""
    return await confirm_publish(conns, queues, settings, persistent=False, exchange=topic_exchange(queues),
                                 keys=[f"r{i * 10}.a.x" for i in range(len(queues))])


# -- consume -------------------------------------------------------------------------------


class _Consumer:
    def __init__(self, conn: BenchConnection, expected: int, ack_every: int, end: float,
                 manual: bool) -> None:
        self.conn = conn
        self.expected = expected
        self.ack_every = ack_every if manual else 0
        self.end = end
        self.received = 0
        self.unacked = 0
        self.last_event = 0.0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn.on_deliver = self._deliver
        conn.on_close = self._closed
        if expected == 0:
            self.done.set_result(None)

    def _deliver(self, tag: int) -> None:
        if self.done.done():
            return
        t = now()
        self.received += 1
        self.last_event = t
        if self.ack_every:
            self.unacked += 1
            if self.unacked >= self.ack_every or self.received >= self.expected:
                self.conn.write(encode(spec.Basic.Ack(delivery_tag=tag, multiple=True), self.conn.CHANNEL))
                self.unacked = 0
        if self.received >= self.expected or t >= self.end:
            self.done.set_result(None)

    def expire(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def _closed(self, reason: str) -> None:
        if not self.done.done():
            self.done.set_exception(BenchError(reason))


async def consume(conns: list[BenchConnection], queues: list[str], settings: LoadSettings,
                  *, manual: bool) -> Measured:
    depths = []
    for conn, q in zip(conns, queues, strict=True):
        ok = await conn.rpc(
            spec.Queue.Declare(queue=q, passive=True), spec.Queue.DeclareOk, settings.rpc_timeout
        )
        depths.append(int(ok.message_count))
        if manual:
            await conn.rpc(
                spec.Basic.Qos(prefetch_count=settings.prefetch), spec.Basic.QosOk, settings.rpc_timeout
            )
    start = now()
    end = start + settings.seconds
    consumers = [_Consumer(c, d, max(1, min(settings.ack_every, settings.prefetch)), end, manual)
                 for c, d in zip(conns, depths, strict=True)]
    for i, (c, q) in enumerate(zip(conns, queues, strict=True)):
        c.write(encode(spec.Basic.Consume(queue=q, consumer_tag=f"bench{i}", no_ack=not manual), c.CHANNEL))
    loop = asyncio.get_running_loop()
    # A queue that stops delivering before it is empty still ends at --seconds.
    timers = [loop.call_at(loop.time() + settings.seconds, c.expire) for c in consumers]
    try:
        await _wait_all([c.done for c in consumers], settings.seconds + settings.drain_timeout,
                        lambda: "deliveries stopped")
    finally:
        for tm in timers:
            tm.cancel()
    for c in conns:
        c.on_deliver = None
    got = sum(c.received for c in consumers)
    if got >= sum(depths):
        # Drained before the deadline: the clock stops at the last delivery.
        return Measured(got, max(max(c.last_event for c in consumers) - start, 1e-9))
    # Per-connection counts show whether the broker served its consumers evenly.
    per = "/".join(f"{c.received:,}" for c in consumers)
    return Measured(
        got,
        settings.seconds,
        note=f"{got:,} of {sum(depths):,} queued messages in {settings.seconds:g}s (per connection {per})",
    )


# -- tx: one commit per message ------------------------------------------------------------


class _TxLoop:
    def __init__(self, conn: BenchConnection, message: bytes, end: float) -> None:
        self.conn = conn
        self.data = message + encode(spec.Tx.Commit(), conn.CHANNEL)
        self.end = end
        self.commits = 0
        self.sent_at = 0.0
        self.last_event = 0.0
        self.latencies: list[tuple[float, int]] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn.on_commit_ok = self._commit_ok
        conn.on_close = self._closed

    def send(self) -> None:
        self.sent_at = now()
        self.conn.write(self.data)

    def _commit_ok(self) -> None:
        t = now()
        self.commits += 1
        self.last_event = t
        self.latencies.append((t - self.sent_at, 1))
        if t >= self.end:
            if not self.done.done():
                self.done.set_result(None)
        else:
            self.send()

    def _closed(self, reason: str) -> None:
        if not self.done.done():
            self.done.set_exception(BenchError(reason))


class NoTx(BenchError):
    """The broker does not do transactions (tx.select refused or unanswered)."""


async def tx_publish(conns: list[BenchConnection], queues: list[str], settings: LoadSettings,
                     *, persistent: bool) -> Measured:
    for conn in conns:
        try:
            await conn.rpc(spec.Tx.Select(), spec.Tx.SelectOk, min(settings.rpc_timeout, 5.0))
        except BenchError as exc:
            raise NoTx(f"no tx: {exc}") from exc
    start = now()
    end = start + settings.seconds
    loops = [_TxLoop(c, encode_publish(c.CHANNEL, q, settings.body, persistent=persistent), end)
             for c, q in zip(conns, queues, strict=True)]
    for lp in loops:
        lp.send()
    await _wait_all([lp.done for lp in loops], settings.seconds + settings.drain_timeout,
                    lambda: "a tx.commit-ok did not arrive")
    last = max((lp.last_event for lp in loops), default=start)
    lat = tuple(x for lp in loops for x in lp.latencies)
    return Measured(sum(lp.commits for lp in loops), max(last - start, 1e-9), lat)


async def _wait_all(futures: list[asyncio.Future[None]], timeout: float, what: Callable[[], str]) -> None:
    try:
        await asyncio.wait_for(asyncio.gather(*futures), timeout)
    except TimeoutError as exc:
        raise BenchError(f"timed out after {timeout:.0f}s: {what()}") from exc


# -- CPU accounting --------------------------------------------------------------------------


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def group_cpu(pgid: int) -> float | None:
    """CPU seconds used so far by every live process in process group ``pgid`` (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    found = False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # the process ended while we looked
        fields = stat[stat.rindex(b")") + 2:].split()
        if int(fields[2]) == pgid:
            found = True
            total += int(fields[11]) + int(fields[12])
    return total / ticks if found else None

