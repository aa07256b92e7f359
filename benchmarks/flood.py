"""``amqp-conformance bench flood``: the reference broker's memory high watermark under a
publisher flood.

A reference broker process is started with ``--memory-watermark``; ``--publishers``
connections (announcing the ``connection.blocked`` capability, in confirm mode) push
``--total`` octets of transient messages into one queue nobody consumes. Once every publisher
has been told ``connection.blocked`` (or publishing has stalled), a consumer starts draining
the queue with manual acks: the alarm clears, publishers are unblocked and resume, and the
cycle repeats until everything is published. The broker's resident memory (VmRSS of its
process) is sampled throughout.

Printed: octets published, confirmed, nacked, delivered to the consumer, messages lost
(confirmed but never delivered: must be 0), blocked/unblocked notifications per publisher,
peak RSS against watermark + margin, wall time. Exit status 0 when RSS stayed within the bound,
every publisher was blocked and resumed and nothing confirmed was lost; 1 otherwise; 2 bad
input or a broker that cannot be started. A safety stop aborts the run (exit 1) when RSS passes
four times the watermark, so a broker without flow control cannot exhaust the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pamqp import commands as spec

from conformance.argparsing import OneLineErrors, command_parser
from conformance.bench.wire import BenchConnection, BenchError, encode, encode_publish
from conformance.broker.limits import parse_size
from conformance.protocol.raw import URL

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
QUEUE = "amqpc-flood"
SAMPLE_EVERY = 0.05


def _err(message: str) -> None:
    print(f"amqp-conformance bench flood: {message}", file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "bench flood",
        "Publisher flood against the reference broker's memory high watermark: resident memory, "
        "connection.blocked / unblocked, nothing confirmed lost.",
        cls=OneLineErrors,
    )
    p.add_argument("--total", default="2GB", help="octets of message bodies to publish in all (default 2GB)")
    p.add_argument("--publishers", type=int, default=3, help="publishing connections (default 3)")
    p.add_argument("--body-size", default="64KiB", help="body of each message (default 64KiB)")
    p.add_argument("--watermark", default="200MB", help="the broker's --memory-watermark (default 200MB)")
    p.add_argument(
        "--margin",
        default="128MB",
        help="allowed RSS above the watermark: the interpreter (~30 MB), publishers' in-flight windows, "
        "the consumer's prefetch window being written, allocator slack (default 128MB)",
    )
    p.add_argument("--window", type=int, default=64, help="unconfirmed messages per publisher (default 64)")
    p.add_argument("--prefetch", type=int, default=256, help="consumer prefetch-count (default 256)")
    p.add_argument(
        "--timeout", type=float, default=600.0, help="deadline of the whole run in seconds (default 600)"
    )
    return p


@dataclass
class Publisher:
    conn: BenchConnection
    count: int
    payload: bytes
    window: int
    sent: int = 0
    settled: bytearray = field(default_factory=bytearray)  # per seq: 0 open, 1 acked, 2 nacked
    low: int = 1  # lowest seq not yet settled
    acked: int = 0
    nacked: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.settled = bytearray(self.count + 2)
        self.conn.on_ack = self.on_ack
        self.conn.on_writable = self.pump

    @property
    def outstanding(self) -> int:
        return self.sent - self.acked - self.nacked

    def pump(self) -> None:
        conn = self.conn
        while (
            self.sent < self.count
            and self.outstanding < self.window
            and not conn.paused
            and conn.closed is None
        ):
            conn.write(self.payload)
            self.sent += 1

    def _settle(self, seq: int, nack: bool) -> None:
        if 1 <= seq <= self.count and not self.settled[seq]:
            self.settled[seq] = 2 if nack else 1
            if nack:
                self.nacked += 1
            else:
                self.acked += 1

    def on_ack(self, tag: int, multiple: bool, nack: bool) -> None:
        if multiple:
            for seq in range(self.low, tag + 1):
                self._settle(seq, nack)
        else:
            self._settle(tag, nack)
        while self.low <= self.count and self.settled[self.low]:
            self.low += 1
        if self.acked + self.nacked >= self.count:
            self.done.set()
        else:
            self.pump()


@dataclass
class Consumer:
    conn: BenchConnection
    delivered: int = 0
    last_tag: int = 0
    acked_upto: int = 0  # a tag acked twice is a 406: ack each tag once

    def on_deliver(self, tag: int) -> None:
        self.delivered += 1
        self.last_tag = tag
        if self.delivered % 32 == 0:
            self.flush()

    def flush(self) -> None:
        if self.last_tag > self.acked_upto and self.conn.closed is None:
            self.acked_upto = self.last_tag
            self.conn.write(
                encode(spec.Basic.Ack(delivery_tag=self.last_tag, multiple=True), BenchConnection.CHANNEL)
            )


def rss(pid: int) -> int:
    """Resident set size of ``pid`` in octets (Linux /proc); 0 when unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def start_broker(watermark: int, timeout: float = 30.0) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen([sys.executable, "-m", "conformance.broker", "--host", "127.0.0.1", "--port", "0",
                             "--memory-watermark", str(watermark), "--log-level", "error"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    os.set_blocking(proc.stdout.fileno(), False)
    buf = b""
    while time.monotonic() < deadline and proc.poll() is None:
        buf += proc.stdout.read() or b""
        if b"\n" in buf:
            parts = buf.split(b"\n", 1)[0].split()
            if len(parts) == 3 and parts[0] == b"LISTENING":
                return proc, int(parts[2])
        time.sleep(0.05)  # a pipe line with no event to wait on
    stop_broker(proc)
    raise BenchError("the reference broker did not start listening")


def stop_broker(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@dataclass
class Figures:
    published: int = 0
    confirmed: int = 0
    nacked: int = 0
    delivered: int = 0
    blocked: list[int] = field(default_factory=list)
    unblocked: list[int] = field(default_factory=list)
    rss_start: int = 0
    rss_peak: int = 0
    rss_end: int = 0
    seconds: float = 0.0
    problem: str = ""


async def flood(port: int, pid: int, *, total: int, publishers: int, body: int, window: int, prefetch: int,
                timeout: float, safety: int) -> Figures:
    url = URL(host="127.0.0.1", port=port)
    fig = Figures(rss_start=rss(pid))
    started = time.monotonic()
    setup = await BenchConnection.open(url, 10.0)
    await setup.rpc(spec.Queue.Declare(queue=QUEUE), spec.Queue.DeclareOk, 10.0)
    count = max(1, total // (body * publishers))
    pubs = [await _open_publisher(url, i, count, body, window) for i in range(publishers)]
    consumer: Consumer | None = None
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            now = rss(pid)
            fig.rss_peak = max(fig.rss_peak, now)
            if now > safety:
                fig.problem = f"safety stop: broker RSS {now / 1e6:.0f} MB passed {safety / 1e6:.0f} MB"
                stop.set()
            await asyncio.sleep(SAMPLE_EVERY)

    sampler = asyncio.create_task(sample())
    for p in pubs:
        p.pump()
    last_progress, last_settled = time.monotonic(), 0
    try:
        while not stop.is_set():
            settled = sum(p.acked + p.nacked for p in pubs)
            if settled != last_settled:
                last_settled, last_progress = settled, time.monotonic()
            closed = _closed(pubs, consumer)
            if closed:
                fig.problem = f"a connection was closed: {closed}"
                break
            if consumer is None and _time_to_drain(pubs, last_progress):
                consumer = await _start_consumer(url, prefetch)
            if _drained(pubs, consumer):
                break
            if time.monotonic() - started > timeout:
                fig.problem = f"not finished within --timeout {timeout:.0f}s"
                break
            if consumer is not None:
                consumer.flush()
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await sampler
        fig.seconds = time.monotonic() - started
        await _finish(fig, pubs, consumer, setup, body)
        fig.rss_end = rss(pid)
    return fig


async def _open_publisher(url: URL, i: int, count: int, body: int, window: int) -> Publisher:
    """A confirming publisher that announces the connection.blocked capability."""
    conn = await BenchConnection.open(url, 10.0, capabilities={"connection.blocked": True})
    await conn.rpc(spec.Confirm.Select(), spec.Confirm.SelectOk, 10.0)
    payload = encode_publish(BenchConnection.CHANNEL, QUEUE, bytes([65 + i % 26]) * body, persistent=False)
    return Publisher(conn, count, payload, window)


def _closed(pubs: list[Publisher], consumer: Consumer | None) -> str | None:
    """Why the first closed connection of the flood was closed, or None."""
    conns = [p.conn for p in pubs] + ([consumer.conn] if consumer is not None else [])
    return next((c.closed for c in conns if c.closed), None)


def _drained(pubs: list[Publisher], consumer: Consumer | None) -> bool:
    """Every publisher finished and the consumer has every confirmed message."""
    confirmed = sum(p.acked for p in pubs)
    return all(p.done.is_set() for p in pubs) and consumer is not None and consumer.delivered >= confirmed


def _time_to_drain(pubs: list[Publisher], last_progress: float) -> bool:
    """Every publisher is blocked, publishing stalled or finished: start draining."""
    return (all(p.conn.blocked_count for p in pubs) or time.monotonic() - last_progress > 5.0
            or all(p.done.is_set() for p in pubs))


async def _start_consumer(url: URL, prefetch: int) -> Consumer:
    cconn = await BenchConnection.open(url, 10.0)
    await cconn.rpc(spec.Basic.Qos(prefetch_count=prefetch), spec.Basic.QosOk, 10.0)
    consumer = Consumer(cconn)
    cconn.on_deliver = consumer.on_deliver
    await cconn.rpc(spec.Basic.Consume(queue=QUEUE, consumer_tag="flood"), spec.Basic.ConsumeOk, 10.0)
    return consumer


async def _finish(fig: Figures, pubs: list[Publisher], consumer: Consumer | None, setup: BenchConnection,
                  body: int) -> None:
    """The figures the publishers and the consumer counted; every connection closed."""
    fig.published = sum(p.sent for p in pubs) * body
    fig.confirmed = sum(p.acked for p in pubs)
    fig.nacked = sum(p.nacked for p in pubs)
    fig.delivered = consumer.delivered if consumer else 0
    fig.blocked = [p.conn.blocked_count for p in pubs]
    fig.unblocked = [p.conn.unblocked_count for p in pubs]
    if consumer is not None:
        consumer.flush()
    for c in [*(p.conn for p in pubs), *([consumer.conn] if consumer else []), setup]:
        await c.close(2.0)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        total, body = parse_size(args.total), parse_size(args.body_size)
        watermark, margin = parse_size(args.watermark), parse_size(args.margin)
    except ValueError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    if (
        args.publishers < 1
        or args.window < 1
        or args.prefetch < 1
        or body < 1
        or total < body
        or watermark < 1
    ):
        _err(
            "--publishers, --window, --prefetch, --body-size and --watermark must be positive, "
            "--total >= --body-size"
        )
        return EXIT_BAD_INPUT
    if not os.path.exists("/proc/self/status"):
        _err("needs Linux /proc to read the broker's resident memory")
        return EXIT_BAD_INPUT
    try:
        proc, port = start_broker(watermark)
    except (BenchError, OSError) as exc:
        _err(f"cannot start the reference broker: {exc}")
        return EXIT_BAD_INPUT
    try:
        fig = asyncio.run(flood(port, proc.pid, total=total, publishers=args.publishers, body=body,
                                window=args.window, prefetch=args.prefetch, timeout=args.timeout,
                                safety=4 * watermark + margin))
    except BenchError as exc:
        _err(str(exc))
        return EXIT_FAILED
    finally:
        stop_broker(proc)
    return report(fig, watermark=watermark, margin=margin, body=body)


def report(fig: Figures, *, watermark: int, margin: int, body: int) -> int:
    lost = max(0, fig.confirmed - fig.delivered)
    bound = watermark + margin
    blocked_ok = all(fig.blocked) and all(fig.unblocked)
    rss_ok = 0 < fig.rss_peak <= bound
    mb = 1e6
    print(f"published     {fig.published / mb:,.0f} MB ({fig.published // body} messages of {body} octets)")
    print(f"confirmed     {fig.confirmed} acked, {fig.nacked} nacked")
    print(f"delivered     {fig.delivered} to the consumer; lost (confirmed, never delivered) {lost}")
    print(
        f"blocked       connection.blocked per publisher {fig.blocked}, connection.unblocked {fig.unblocked}"
    )
    print(
        f"broker RSS    start {fig.rss_start / mb:.0f} MB, peak {fig.rss_peak / mb:.0f} MB, end "
        f"{fig.rss_end / mb:.0f} MB; "
        f"bound watermark {watermark / mb:.0f} MB + margin {margin / mb:.0f} MB = {bound / mb:.0f} MB: "
        f"{'within' if rss_ok else 'EXCEEDED'}"
    )
    print(
        f"wall time     {fig.seconds:.1f}s ({fig.published / mb / max(fig.seconds, 1e-9):.0f} MB/s published)"
    )
    if fig.problem:
        print(f"problem       {fig.problem}")
    ok = rss_ok and blocked_ok and lost == 0 and not fig.problem
    print("result        " + ("PASS" if ok else "FAIL"))
    return EXIT_OK if ok else EXIT_FAILED
