"""Blame follows cause at the handshake: a broker refusing what a connection negotiated or sent is
the broker's verdict (HandshakeRefused, a Mismatch: FAIL/NON_STRICT), never a harness ERROR; the
run's own handshake ending without a cause stays the harness's (HandshakeError: ERROR)."""

from __future__ import annotations

import pytest

from conformance.model.cases import Case, Level
from conformance.model.verdicts import Verdict, decide
from conformance.protocol.handshake import HandshakeError, HandshakeRefused
from conformance.protocol.raw import RawConnection
from conformance.protocol.wire import URL
from conformance.targets.probe import ProbeError, probe
from tests.fakebroker import FakeBroker

RULE = ("connection.tune-ok/minimum",)
MUST = Case(id="connection.x", description="d", expectation="e", level=Level.MUST, rules=RULE)
SHOULD = Case(id="connection.y", description="d", expectation="e", level=Level.SHOULD, rules=RULE)


def test_frame_max_below_the_brokers_minimum_is_a_refusal_with_the_reset_as_evidence():
    with FakeBroker(mode="min-frame-8192") as fb:
        with pytest.raises(HandshakeRefused) as info:
            RawConnection.open(URL.parse(fb.url), timeout=3, frame_max=4096)
    refused = info.value
    assert refused.stage == "tune"
    assert "reset" in refused.detail or "closed" in refused.detail
    assert "frame_max=4096" in refused.observed and refused.expected == "connection.open-ok"
    assert decide(MUST, refused, None).verdict is Verdict.FAIL
    assert decide(SHOULD, refused, None).verdict is Verdict.NON_STRICT
    assert "refused the connection at tune" in decide(MUST, refused, None).message


def test_a_frame_max_the_broker_accepts_opens():
    with FakeBroker(mode="min-frame-8192") as fb:
        conn = RawConnection.open(URL.parse(fb.url), timeout=3, frame_max=8192)
        try:
            assert conn.frame_max == 8192
        finally:
            conn.close(timeout=1)


def test_the_runs_own_handshake_reset_stays_a_harness_error():
    """Nothing chosen (the probe's handshake): a socket end names no cause of the case's."""
    with FakeBroker(mode="min-frame-8192") as fb:
        url = URL.parse(fb.url + "?frame_max=4096")
        with pytest.raises(HandshakeError) as info:
            RawConnection.open(url, timeout=3)
    assert not isinstance(info.value, HandshakeRefused)
    assert decide(MUST, info.value, None).verdict is Verdict.ERROR


@pytest.mark.parametrize(("mode", "stage", "code"),
                         [("refuse-login", "login", "403"), ("refuse-vhost", "vhost", "530")])
def test_a_connection_close_in_the_handshake_is_the_brokers(mode, stage, code):
    with FakeBroker(mode=mode) as fb:
        with pytest.raises(HandshakeRefused) as info:
            RawConnection.open(URL.parse(fb.url), timeout=3)
    assert info.value.stage == stage and code in info.value.detail
    assert decide(MUST, info.value, None).verdict is Verdict.FAIL


@pytest.mark.parametrize(("mode", "kind"), [("refuse-login", "login"), ("refuse-vhost", "vhost")])
def test_the_probe_still_names_the_refused_step(mode, kind):
    with FakeBroker(mode=mode) as fb:
        with pytest.raises(ProbeError) as info:
            probe(URL.parse(fb.url), timeout=3)
    assert info.value.kind == kind


def test_a_refusal_in_a_fixtures_setup_stays_an_error():
    """Set-up is the harness's (decide's rule for any mismatch outside the case body)."""
    refused = HandshakeRefused("tune", "socket reset", expected="connection.open-ok", sent="frame_max=4096")
    assert decide(MUST, refused, None, phase="setup").verdict is Verdict.ERROR


def test_pika_refused_at_tune_is_the_brokers_mismatch():
    """pika's handshake refused (the socket reset after its tune-ok): the library reacted to the
    broker, so the case sees a Mismatch, not a harness fault."""
    import pika

    from conformance.protocol.errors import Mismatch
    from conformance.verify.libs import pika_bound

    with FakeBroker(mode="min-frame-8192") as fb:
        url = URL.parse(fb.url)
        params = pika.ConnectionParameters(host=url.host, port=url.port, frame_max=4096,
                                           socket_timeout=3, blocked_connection_timeout=3)
        with pytest.raises(Mismatch) as info:
            with pika_bound(url, 5, "pika connect with frame_max 4096") as pb:
                pb.connect(params=params)
    assert decide(MUST, info.value, None).verdict is Verdict.FAIL
