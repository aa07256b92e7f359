"""outcome() and expect_connection_close() against a broker that resets a connection it closes
while client data is unread (RabbitMQ 3.10 under some errors): the probe must not go out before
the broker's answer, or the client loses the connection.close and reports a socket reset."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pamqp import commands as spec

from conformance.model.verdicts import Mismatch
from conformance.protocol.raw import RawChannel, RawConnection, UnexpectedClose
from conformance.targets.spec import parse_url
from conformance.verify.expect import expect_channel_close, expect_connection_close, reply_or_probe
from conformance.verify.outcomes import outcome
from tests.fakebroker import FakeBroker


def _declare(name: str) -> spec.Queue.Declare:
    return spec.Queue.Declare(queue=name)


@pytest.fixture
def fake() -> Iterator[tuple[FakeBroker, RawChannel]]:
    """The fake broker and a channel on a connection to it."""
    with FakeBroker() as fb:
        conn = RawConnection.open(parse_url(fb.url), timeout=5)
        yield fb, conn.channel()
        conn.close()


def test_a_close_is_seen_because_the_probe_waits_for_it(fake) -> None:
    _fb, ch = fake
    got = outcome(ch, _declare("rst540-q"), spec.Queue.DeclareOk)
    assert got[0] == "connection.close 540", got


def test_the_fake_resets_when_a_probe_was_pipelined(fake) -> None:
    """The fake's reset is real: a probe sent at once loses the close (what outcome() avoids)."""
    _fb, ch = fake
    ch.send(_declare("rst540-q"))
    ch.conn.send_if_open(ch.id, spec.Exchange.Declare(exchange="amq.direct", passive=True))
    ev = ch.conn.wait_connection_close(timeout=5, what="the close")
    assert ch.conn.closed_by_broker is None and "connection.close" not in ev.describe(), ev.describe()


def test_a_dropped_method_is_still_found_by_the_probe_after_the_settle_window(fake) -> None:
    _fb, ch = fake
    got = outcome(ch, _declare("silent-q"), spec.Queue.DeclareOk)
    assert got[0] == "no reply (probe answered)", got


def test_a_reply_is_followed_by_the_probe_that_shows_the_channel_carries_on(fake) -> None:
    fb, ch = fake
    assert outcome(ch, _declare("plain-q"), spec.Queue.DeclareOk)[0] == "queue.declare-ok"
    probes = [f for f in fb.received if isinstance(f, spec.Exchange.Declare)]
    assert len(probes) == 1  # sent after the reply, and answered (taken by outcome)


def test_expect_connection_close_waits_before_probing(fake) -> None:
    _fb, ch = fake
    ch.send(_declare("rst540-q"))
    ev = expect_connection_close(ch.conn, 540, what="declare", probe_channel=ch)
    assert ev.method.reply_code == 540


def test_expect_channel_close_sees_an_escalation_before_it_probes(fake) -> None:
    """A broker answering a channel error with connection.close (and a reset if a probe waits
    unread) is reported as the escalation it is, not as a lost socket."""
    _fb, ch = fake
    ch.send(_declare("rst540-q"))
    with pytest.raises(Mismatch) as exc:
        expect_channel_close(ch, 406, what="declare")
    assert "connection closed instead" in str(exc.value) and "540" in str(exc.value), str(exc.value)


# -- reply_or_probe: the same rule for the helpers that wait for one reply --------------------


def test_reply_or_probe_sees_the_close_instead_of_losing_it_to_a_reset(fake) -> None:
    _fb, ch = fake
    ch.send(_declare("rst540-q"))
    with pytest.raises(UnexpectedClose) as exc:
        reply_or_probe(ch, (spec.Queue.DeclareOk,), "queue.declare-ok")
    assert exc.value.reply_code == 540, exc.value.event.describe()


def test_reply_or_probe_sends_no_probe_when_the_reply_comes(fake) -> None:
    fb, ch = fake
    ch.send(_declare("plain-q"))
    ev = reply_or_probe(ch, (spec.Queue.DeclareOk,), "queue.declare-ok")
    assert isinstance(ev.method, spec.Queue.DeclareOk)
    assert not [f for f in fb.received if isinstance(f, spec.Exchange.Declare)]


def test_reply_or_probe_answers_with_the_probe_when_the_method_is_ignored(fake) -> None:
    fb, ch = fake
    ch.send(_declare("silent-q"))
    ev = reply_or_probe(ch, (spec.Queue.DeclareOk,), "queue.declare-ok", timeout=2.0)
    assert isinstance(ev.method, spec.Exchange.DeclareOk)
    assert len([f for f in fb.received if isinstance(f, spec.Exchange.Declare)]) == 1


def test_a_send_the_closed_socket_refuses_reports_the_brokers_connection_close(fake) -> None:
    """After the broker's connection.close and the end of its socket, a send that fails is that
    close (what the broker did), not a bare socket reset."""
    _fb, ch = fake
    ch.send(_declare("rst540-q"))
    assert ch.conn.wait_connection_close(timeout=5).method.reply_code == 540
    refused = None
    for _ in range(100):  # the first sends may still be buffered; a later one meets the reset
        try:
            ch.conn.send_frame(ch.id, spec.Basic.Qos(prefetch_count=1))
        except UnexpectedClose as exc:
            refused = exc
            break
        time.sleep(0.02)
    assert refused is not None, "the closed socket kept accepting data"
    assert refused.reply_code == 540, refused.event.describe()
