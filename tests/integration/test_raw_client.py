"""The raw client and the probe against a scripted peer (loopback sockets)."""

from __future__ import annotations

import time

import pytest
from pamqp import commands as spec

from conformance.model.verdicts import CaseTimeout, Mismatch
from conformance.protocol.raw import URL, RawConnection, UnexpectedClose, redact
from conformance.targets.base import free_port
from conformance.targets.probe import ProbeError, probe
from conformance.targets.spec import parse_url
from conformance.verify.expect import expect_channel_close, expect_connection_close
from tests.fakebroker import FakeBroker


def test_url_parsing_and_redaction() -> None:
    u = URL.parse("amqp://u%40x:p%2Fw@host:5673/v%2Fh")
    assert (u.user, u.password, u.host, u.port, u.vhost) == ("u@x", "p/w", "host", 5673, "v/h")
    assert URL.parse("amqp://h").vhost == "/"
    assert redact("amqp://guest:secret@h:1/") == "amqp://guest:***@h:1/"
    with pytest.raises(ValueError, match="scheme"):
        URL.parse("http://h/")


def test_handshake_content_assembly_and_history() -> None:
    with FakeBroker() as fb:
        conn = RawConnection.open(parse_url(fb.url), timeout=3)
        assert conn.server_properties["product"] == "fakebroker"
        ch = conn.channel()
        ev = ch.get("q1")
        assert ev is not None and ev.body == b"hello!"
        assert ev.properties is not None and ev.properties.content_type == "text/plain"
        assert [e.name for e in ch.history()] == ["channel.open-ok", "basic.get-ok"]
        conn.close()


def test_silent_method_times_out_within_the_deadline() -> None:
    with FakeBroker() as fb:
        conn = RawConnection.open(parse_url(fb.url), timeout=3)
        ch = conn.channel()
        t0 = time.monotonic()
        with pytest.raises(CaseTimeout) as exc:
            ch.declare_queue("silent-q", )
        assert 0.0 < time.monotonic() - t0 < 3.5
        assert "queue.declare-ok" in exc.value.waiting_for
        conn.close()


def test_channel_close_is_answered_and_reported() -> None:
    with FakeBroker() as fb:
        conn = RawConnection.open(parse_url(fb.url), timeout=3)
        ch = conn.channel()
        with pytest.raises(UnexpectedClose) as exc:
            ch.declare_queue("close406-q")
        assert exc.value.reply_code == 406
        deadline = time.monotonic() + 2
        while not any(isinstance(f, spec.Channel.CloseOk) for f in fb.received):
            assert time.monotonic() < deadline, "the client must answer channel.close with close-ok"
            time.sleep(0.01)
        conn.close()


def test_expect_channel_close_code_mismatch_and_still_open() -> None:
    with FakeBroker() as fb:
        conn = RawConnection.open(parse_url(fb.url), timeout=3)
        ch = conn.channel()
        ch.send(spec.Queue.Declare(queue="close406-x"))
        with pytest.raises(Mismatch) as exc:
            expect_channel_close(ch, 404)
        assert "406" in str(exc.value.observed)
        ch2 = conn.channel()
        ch2.send(spec.Queue.Declare(queue="fine"))
        with pytest.raises(Mismatch) as exc2:
            expect_channel_close(ch2, 406)
        assert "still open" in str(exc2.value.observed)
        ch3 = conn.channel()
        ch3.send(spec.Queue.Declare(queue="conn540"))
        ev = expect_connection_close(conn, 540, probe_channel=ch3)
        assert ev.method.reply_code == 540
        conn.close()


@pytest.mark.parametrize(("mode", "kind"), [
    ("refuse-login", "login"), ("refuse-vhost", "vhost"), ("wrong-header", "not-amqp"), ("http", "not-amqp"),
])
def test_probe_failures_say_which(mode: str, kind: str) -> None:
    with FakeBroker(mode) as fb:
        with pytest.raises(ProbeError) as exc:
            probe(parse_url(fb.url), timeout=3)
        assert exc.value.kind == kind, exc.value.message


def test_probe_silent_broker_times_out_quickly() -> None:
    with FakeBroker("silent") as fb:
        t0 = time.monotonic()
        with pytest.raises(ProbeError) as exc:
            probe(parse_url(fb.url), timeout=1.5)
        assert exc.value.kind == "timeout"
        assert time.monotonic() - t0 < 3


def test_probe_unreachable() -> None:
    with pytest.raises(ProbeError) as exc:
        probe(parse_url(f"amqp://guest:guest@127.0.0.1:{free_port()}/"), timeout=2)
    assert exc.value.kind == "unreachable"


def test_probe_reads_capabilities() -> None:
    with FakeBroker(capabilities={"basic.nack": True}) as fb:
        info = probe(parse_url(fb.url), timeout=3)
        assert (info.product, info.version) == ("fakebroker", "9.9")
        assert info.supports("basic.nack") and not info.supports("publisher_confirms")


@pytest.mark.parametrize(("mutant_id", "broken"), [
    (None, []),
    ("deliveries.deliver-tag-offset", ["wire.delivery-tags-consecutive"]),
    ("confirms.ack-duplicated", ["wire.confirms-settle-once"]),
])
def test_the_invariant_monitor_watches_every_raw_connection_of_a_case(mutant_id: str | None,
                                                                      broken: list[str]) -> None:
    """End to end: a real broker behind the mutation proxy; the case's monitor sees a broken
    invariant on the raw client's frames although no check of the scenario looks at them."""
    from conformance.broker import EmbeddedBroker
    from conformance.mutate.catalogue import CATALOGUE
    from conformance.protocol import invariants
    from conformance.protocol.proxy import Fault, FaultProxy

    fault = next(m for m in CATALOGUE if m.id == mutant_id).make() if mutant_id else Fault()
    broker = EmbeddedBroker()
    broker.start()
    monitor = invariants.begin()
    try:
        with FaultProxy("127.0.0.1", broker.port, fault) as proxy:
            conn = RawConnection.open(proxy.url(), timeout=3)
            ch = conn.channel()
            q = ch.declare_queue("", exclusive=True).queue
            ch.confirm_select()
            for body in (b"a", b"b"):
                ch.publish("", q, body)
            ch.wait(spec.Basic.Ack)
            ch.consume(q, no_ack=True)
            ch.deliveries(2)
            ch.barrier()
            conn.close()
    finally:
        invariants.end()
        broker.stop()
        broker.cleanup()
    assert sorted({v.invariant for v in monitor.violations}) == broken, monitor.violations
