"""The reference broker survives what a client sends (issue 12): a connection that sends
garbage ends alone, other connections are served, SIGTERM always stops the process."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pamqp import commands as spec

from conformance.protocol.wire import PROTOCOL_HEADER, pack_frame

from .broker_process import ROOT, BrokerProcess
from .broker_rawclient import RawClient

pytestmark = pytest.mark.integration

SIGTERM_LIMIT = 5.0


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[BrokerProcess]:
    p = BrokerProcess(tmp_path / "data")
    yield p
    p.cleanup()


def _served(port: int) -> bool:
    client = RawClient("127.0.0.1", port, timeout=5.0)
    try:
        got = client.handshake()
        return got is not None and isinstance(got[1], spec.Connection.OpenOk)
    finally:
        client.close()


def _close_without_close_ok(client: RawClient, timeout: float = 5.0) -> spec.Connection.Close:
    """Read up to the broker's connection.close without answering it (``frame``, not
    ``next``, which would send close-ok)."""
    deadline = time.monotonic() + timeout
    while True:
        got = client.frame(deadline)
        assert got is not None, "no connection.close within the deadline"
        if isinstance(got[1], spec.Connection.Close):
            return got[1]


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(struct.pack(">BHI", 9, 0, 1) + b"x\x00", id="bad-type-bad-end"),
        pytest.param(struct.pack(">BHI", 9, 0, 10_000_000), id="bad-type-too-large"),
    ],
)
def test_issue12_reproduction(proc: BrokerProcess, garbage: bytes) -> None:
    attacker = RawClient("127.0.0.1", proc.port, timeout=5.0)
    try:
        attacker.handshake()
        attacker.send_method(spec.Queue.Declare(queue="q"), 5)  # channel 5 was never opened
        assert _close_without_close_ok(attacker).reply_code == 504
        attacker.send(garbage)
        assert _served(proc.port), "a second connection was not served after the garbage"
    finally:
        attacker.close()
    rc, took = proc.terminate_timed(SIGTERM_LIMIT)
    assert rc == 0, f"SIGTERM did not stop the broker within {SIGTERM_LIMIT} s (took {took:.1f} s)"


def test_sigterm_with_connections_in_every_state(proc: BrokerProcess) -> None:
    """Half-done handshakes, an open connection mid-publish and a closing one: SIGTERM still
    stops the process in time."""
    clients = [RawClient("127.0.0.1", proc.port, timeout=5.0) for _ in range(4)]
    try:
        clients[0].send(b"AMQP\x00")  # half a protocol header
        clients[1].send(PROTOCOL_HEADER)  # waiting for start-ok
        clients[2].handshake()
        clients[2].open_channel(1)
        # a publish whose content never completes
        clients[2].send_method(spec.Basic.Publish(exchange="", routing_key="x"), 1)
        clients[2].send(pack_frame(2, 1, struct.pack(">HHQH", 60, 0, 1000, 0)))  # header: 1000 bytes
        clients[3].handshake()
        clients[3].send_method(spec.Channel.Open(), 0)  # channel.open on channel 0: connection error
        _close_without_close_ok(clients[3])
        assert _served(proc.port)
        rc, took = proc.terminate_timed(SIGTERM_LIMIT)
        assert rc == 0, f"SIGTERM did not stop the broker within {SIGTERM_LIMIT} s (took {took:.1f} s)"
    finally:
        for c in clients:
            c.close()


def _broker_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conformance.broker", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "cannot read --users"),
        ('{"users": ', "is not a JSON users file"),
        ('["guest"]', "is not a JSON users file"),
    ],
    ids=["missing", "not-json", "not-an-object"],
)
def test_cli_bad_users_file_is_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    users = tmp_path / "users.json"
    if content is not None:
        users.write_text(content)
    r = _broker_cli("--port", "0", "--data-dir", str(tmp_path / "d"), "--users", str(users))
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_cli_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        r = _broker_cli("--port", str(port), "--data-dir", str(tmp_path / "d"))
    assert r.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
