"""outcome() and expect_connection_close() against a broker that resets a connection it closes
while client data is unread (RabbitMQ 3.10 under some errors): the probe must not go out before
the broker's answer, or the client loses the connection.close and reports a socket reset."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pamqp import commands as spec

from conformance.clients.expect import expect_channel_close, expect_connection_close
from conformance.clients.outcome import outcome
from conformance.clients.raw import RawChannel, RawConnection
from conformance.verdicts import Mismatch
from tests.fakebroker import FakeBroker


def _declare(name: str) -> spec.Queue.Declare:
    return spec.Queue.Declare(queue=name)


@pytest.fixture
def fake() -> Iterator[tuple[FakeBroker, RawChannel]]:
    """The fake broker and a channel on a connection to it."""
    with FakeBroker() as fb:
        conn = RawConnection.open(fb.url, timeout=5)
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
