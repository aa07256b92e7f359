"""The reference broker's limits over sockets: the asyncio shell stops reading from a blocked
publisher and resumes when the memory alarm clears (watermark crossed and drained, and a
forced alarm), and the command's SIGUSR1 / SIGUSR2 raise and clear the alarm."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from pamqp import commands as spec

from conformance.broker import EmbeddedBroker
from conformance.broker.limits import Limits
from conformance.model.verdicts import CaseTimeout
from conformance.protocol.raw import RawConnection
from conformance.targets.spec import parse_url


def _wait_blocked(conn: RawConnection, ch_publish, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    n = 0
    while time.monotonic() < deadline:
        n += 1
        ch_publish(n)
        try:
            conn.wait_event(
                0, lambda e: isinstance(e.method, spec.Connection.Blocked), "blocked", timeout=0.2
            )
            return n
        except CaseTimeout:
            continue
    raise AssertionError("never blocked")


def test_watermark_blocks_the_publisher_until_a_consumer_drains() -> None:
    with EmbeddedBroker(limits=Limits(memory_watermark=100_000)) as b:
        pub = RawConnection.open(parse_url(b.url), timeout=5)
        ch = pub.channel()
        ch.declare_queue("w")
        ch.confirm_select()
        n = _wait_blocked(pub, lambda i: ch.publish("", "w", bytes(30_000)))
        assert n >= 4  # 4 x 30 000 octets pass the 100 000 watermark
        assert any(p.core is not None and p.core.blocked and p._reading_paused for p in b.server.protocols)
        ch.publish("", "w", b"held")  # not read while blocked
        # a non-publishing connection is served
        other = RawConnection.open(parse_url(b.url), timeout=5).channel()
        got = [other.get("w", no_ack=True) for _ in range(n)]
        assert all(g is not None for g in got)
        pub.wait_event(0, lambda e: isinstance(e.method, spec.Connection.Unblocked), "unblocked", timeout=5)
        assert other.get("w", no_ack=True).body == b"held"  # read and routed once unblocked
        pub.close()
        other.conn.close()


def test_signals_raise_and_clear_the_alarm(tmp_path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance.broker", "--port", "0", "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[2])
        conn = RawConnection.open(parse_url(f"amqp://guest:guest@127.0.0.1:{port}/"), timeout=5)
        ch = conn.channel()
        ch.declare_queue("s", exclusive=True)
        os.kill(proc.pid, signal.SIGUSR1)
        _wait_blocked(conn, lambda i: ch.publish("", "s", b"m"))
        os.kill(proc.pid, signal.SIGUSR2)
        conn.wait_event(0, lambda e: isinstance(e.method, spec.Connection.Unblocked), "unblocked", timeout=5)
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
