"""conformance.verify.libs without sockets: who is blamed for a library exception, and the evidence."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time

import aio_pika.exceptions as apex
import pytest
from aiormq import exceptions as aex
from pamqp import commands as spec
from pamqp import frame as pframe
from pika import exceptions as pex

from conformance.model.verdicts import CaseTimeout, HarnessError, Mismatch
from conformance.targets.spec import parse_url
from conformance.verify.libs import CLOSE_GRACE, Bound, FrameTap, pika_bound, run_async


def raised_in_pika() -> AssertionError:
    """An AssertionError whose innermost frame is pika's own code (as on a duplicate confirm)."""
    from pika.adapters.blocking_connection import _CallbackResult

    result = _CallbackResult(tuple)
    result.set_value_once()
    try:
        result.set_value_once()
    except AssertionError as exc:
        return exc
    raise RuntimeError("pika no longer asserts on a second value")


@pytest.mark.parametrize("exc", [
    pex.NackError([]),
    pex.UnroutableError([]),
    pex.ChannelClosedByBroker(404, "NOT_FOUND"),
    pex.ConnectionClosedByBroker(320, "CONNECTION_FORCED"),
    pex.StreamLostError("Transport indicated EOF"),
    aex.DeliveryError(None, spec.Basic.Nack(delivery_tag=1)),
    aex.ChannelClosed(406, "PRECONDITION_FAILED"),
    aex.ConnectionClosed(320, "CONNECTION_FORCED"),
    aex.ChannelInvalidStateError("closed"),
    aex.InvalidFrameError("unexpected Basic.Cancel"),
], ids=lambda e: type(e).__name__)
def test_broker_caused_library_exceptions_are_the_brokers_verdict(exc: Exception) -> None:
    bound = Bound("the scenario", 2.0)
    bound.tap("pika#1").feed(pframe.marshal(spec.Basic.ConsumeOk(consumer_tag="renamed"), 1))
    out = bound.translate(exc)
    assert isinstance(out, Mismatch)
    assert type(exc).__name__ in out.observed and "Basic.ConsumeOk(consumer_tag='renamed')" in out.observed


def test_pikas_own_assertion_is_blamed_on_the_broker_but_ours_is_not() -> None:
    bound = Bound("the scenario", 2.0)
    assert isinstance(bound.translate(raised_in_pika()), Mismatch)
    try:
        raise AssertionError("our own invariant")
    except AssertionError as ours:
        assert bound.translate(ours) is ours


@pytest.mark.parametrize("exc", [ValueError("bug"), TypeError("bug"), KeyError("x"),
                                 apex.MessageProcessError("Message already processed", None)],
                         ids=lambda e: type(e).__name__)
def test_harness_faults_stay_errors(exc: Exception) -> None:
    assert Bound("the scenario", 2.0).translate(exc) is exc


def test_refused_tcp_connection_is_the_network_not_the_broker() -> None:
    exc = pex.AMQPConnectionError(ConnectionRefusedError(111, "Connection refused"))
    assert isinstance(Bound("connect", 2.0).translate(exc), HarnessError)


def test_tls_failures_are_the_harness_not_the_broker() -> None:
    verify = ssl.SSLCertVerificationError(
        1, "certificate verify failed: unable to get local issuer certificate"
    )
    # pika lets the ssl error itself through; aiormq wraps what connecting raised
    for exc in (
        verify,
        aex.AMQPConnectionError(verify),
        pex.AMQPConnectionError(ssl.SSLError(1, "WRONG_VERSION_NUMBER")),
    ):
        out = Bound("connect", 2.0).translate(exc)
        assert isinstance(out, HarnessError) and "TLS with the broker failed" in out.message, exc
        assert "\n" not in out.message
    # once AMQP frames were exchanged, a TLS stream the broker cut is the broker's behaviour
    bound = Bound("consume", 2.0)
    bound.tap("pika#1").feed(pframe.marshal(spec.Connection.Start(), 0))
    assert isinstance(bound.translate(pex.StreamLostError(ssl.SSLEOFError(8, "EOF"))), Mismatch)


def test_library_timeout_and_cut_connection_are_timeouts() -> None:
    bound = Bound("consume-ok", 2.0)
    assert isinstance(bound.translate(TimeoutError()), CaseTimeout)
    bound.expired.set()  # after the deadline, whatever the cut made the library raise
    out = bound.translate(pex.StreamLostError("Transport indicated EOF"))
    assert isinstance(out, CaseTimeout) and "consume-ok" in out.message


def test_the_deadline_runs_every_sever_once_and_late_ones_at_once() -> None:
    cut: list[str] = []
    done = threading.Event()
    bound = Bound("x", 0.05)
    bound.on_expiry(lambda: cut.append("a"))
    bound.on_expiry(done.set)
    bound.start()
    assert done.wait(5.0)
    bound.on_expiry(lambda: cut.append("late"))
    assert cut == ["a", "late"] and bound.expired.is_set()


def test_frame_tap_decodes_split_input_and_skips_content() -> None:
    tap = FrameTap("t")
    data = pframe.marshal(
        spec.Basic.Deliver(consumer_tag="c", delivery_tag=7, exchange="", routing_key="q"), 2
    ) + pframe.marshal(spec.Basic.Ack(delivery_tag=3), 1)
    for i in range(0, len(data), 5):
        tap.feed(data[i:i + 5])
    assert [f.split("(")[0] for f in tap.frames] == ["ch2 Basic.Deliver", "ch1 Basic.Ack"]
    tap.feed(b"\x01\x00\x01\x00\x00\x00\x01\x00\x00")  # a frame pamqp cannot decode
    assert "undecodable" in tap.frames[-1]


def test_a_scenario_that_swallows_its_cancellation_still_times_out() -> None:
    async def swallowing() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "carried on as if answered"
        return "answered"

    t0 = time.monotonic()
    with pytest.raises(CaseTimeout):
        run_async(swallowing(), 0.2, "an answer")
    assert time.monotonic() - t0 < 2.0


def test_a_scenario_that_ignores_every_cancellation_is_stopped() -> None:
    async def stubborn() -> str:
        while True:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(30)

    t0 = time.monotonic()
    with pytest.raises(CaseTimeout):
        run_async(stubborn(), 0.2, "an answer")
    assert time.monotonic() - t0 < 0.2 + 2 * CLOSE_GRACE + 1.0  # the stop, then the bounded close


def test_pika_bound_reports_timeout_when_the_scenario_outlived_its_deadline() -> None:
    with pytest.raises(CaseTimeout), pika_bound(parse_url("amqp://127.0.0.1:1/"), 0.1, "an answer") as pb:
        pb.bound.expired.wait(5.0)  # a scenario that caught what the cut raised and returned
