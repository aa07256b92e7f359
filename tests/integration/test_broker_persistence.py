"""Durability: clean restarts, kill -9 of a broker process, torn-tail recovery, and the
CLI contract (LISTENING line, SIGTERM exit 0, --users file)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pika
import pika.exceptions
import pytest

from conformance.broker import EmbeddedBroker

from .broker_process import BrokerProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def procs() -> Iterator[list[BrokerProcess]]:
    started: list[BrokerProcess] = []
    yield started
    for p in started:
        p.cleanup()


def start(procs: list[BrokerProcess], data_dir: Path, *extra: str, port: int = 0) -> BrokerProcess:
    p = BrokerProcess(data_dir, *extra, port=port)
    procs.append(p)
    return p


def setup_durable(conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    ch.exchange_declare("dur-x", "topic", durable=True)
    ch.queue_declare("dur-q", durable=True)
    ch.queue_declare("trans-q")
    ch.queue_bind("dur-q", "dur-x", "k.#")
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("dur-x", "k.a", b"p%d" % i, pika.BasicProperties(delivery_mode=2))
    ch.basic_publish("dur-x", "k.a", b"transient", pika.BasicProperties(delivery_mode=1))
    ch.basic_publish("", "trans-q", b"gone", pika.BasicProperties(delivery_mode=2))


def check_durable(conn: pika.BlockingConnection, *, first_redelivered: bool) -> None:
    ch = conn.channel()
    ch.exchange_declare("dur-x", passive=True)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker):
        ch.queue_declare("trans-q", passive=True)
    ch = conn.channel()
    bodies = []
    for i in range(5):
        m, _, body = ch.basic_get("dur-q", auto_ack=True)
        assert m is not None, f"message {i} lost"
        bodies.append(body)
        if i == 0:
            assert m.redelivered is first_redelivered
    assert bodies == [b"p%d" % i for i in range(5)]
    assert ch.basic_get("dur-q")[0] is None  # the transient message did not survive


def test_cli_sigterm_and_clean_restart(procs: list[BrokerProcess], tmp_path: Path) -> None:
    p = start(procs, tmp_path)
    conn = p.connect()
    setup_durable(conn)
    conn.close()
    assert p.terminate() == 0
    p2 = start(procs, tmp_path)
    conn = p2.connect()
    check_durable(conn, first_redelivered=False)
    conn.close()
    assert p2.terminate() == 0


def test_kill9_keeps_confirmed_and_redelivers_unacked(procs: list[BrokerProcess], tmp_path: Path) -> None:
    p = start(procs, tmp_path)
    conn = p.connect()
    setup_durable(conn)
    ch = conn.channel()
    _m, _, body = ch.basic_get("dur-q", auto_ack=False)  # delivered, never acked
    assert body == b"p0"
    p.kill9()
    p2 = start(procs, tmp_path)
    conn = p2.connect()
    check_durable(conn, first_redelivered=True)
    conn.close()


def test_torn_tail_after_kill9(procs: list[BrokerProcess], tmp_path: Path) -> None:
    p = start(procs, tmp_path)
    conn = p.connect()
    setup_durable(conn)
    conn.close()
    p.kill9()
    log = tmp_path / "broker.log"
    good = log.stat().st_size
    with open(log, "ab") as f:  # a record header promising more bytes than were written
        f.write(b"\x00\x00\x01\x00\xde\xad\xbe\xefpartial")
    p2 = start(procs, tmp_path)
    assert log.stat().st_size == good
    conn = p2.connect()
    check_durable(conn, first_redelivered=False)
    conn.close()


def test_users_file_and_unknown_vhost(procs: list[BrokerProcess], tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"users": {"alice": "s3cret"}, "vhosts": ["/", "team"]}))
    p = start(procs, tmp_path / "data", "--users", str(users), "--log-level", "info")
    c = pika.BlockingConnection(pika.URLParameters(f"amqp://alice:s3cret@127.0.0.1:{p.port}/team"))
    c.close()
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{p.port}/"))
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as ei:
        pika.BlockingConnection(pika.URLParameters(f"amqp://alice:s3cret@127.0.0.1:{p.port}/other"))
    assert "(530)" in str(ei.value)
    assert p.terminate() == 0


def test_cli_without_data_dir(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance.broker", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("LISTENING 127.0.0.1 ")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()


def test_embedded_restart_same_port(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path) as b:
        port = b.port
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        setup_durable(c)
        ch = c.channel()
        ch.basic_get("dur-q", auto_ack=False)
        b.restart()  # clean stop with an unacked delivery: requeued, redelivered after
        assert b.port == port
        c2 = pika.BlockingConnection(pika.URLParameters(b.url))
        check_durable(c2, first_redelivered=True)
        c2.close()


def test_embedded_group_commit_confirm_latency(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path) as b:
        c = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = c.channel()
        ch.queue_declare("gc", durable=True)
        ch.confirm_delivery()
        for i in range(200):
            ch.basic_publish("", "gc", b"%d" % i, pika.BasicProperties(delivery_mode=2))
        store = b.broker.store
        assert store.synced_lsn >= 201  # every confirmed message is on disk
        c.close()
    assert os.path.getsize(tmp_path / "broker.log") > 0
