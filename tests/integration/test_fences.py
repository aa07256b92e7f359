"""Silence proven by the protocol holds on a slow broker: every case whose silence window became a
fence (conformance/verify/fences.py, docs/waits.md) still FAILs (NON_STRICT for a SHOULD) when the
reference broker is made slower and breaks what the silence guarded.

The broker is the reference broker behind the fault proxy (tests/faultproxy.py), made slower in
the order it keeps: every basic.deliver reaches the client ``DELAY`` seconds late, and what the
fault adds (a duplicate confirm, a basic.return) is held back and sent ``DELAY`` seconds late,
just before the broker's next frame on that channel, so it never overtakes a reply the broker
sent after it. ``DELAY`` is twice the silence window the cases had (``quiet_window`` of the 5 s
case timeout): a window would have ended before it and passed the broken broker. Each fault also
runs slowed alone (no violation): the case must PASS, so its FAIL is the violation, not the
delay.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from conformance.broker import EmbeddedBroker
from conformance.model.cases import Level
from conformance.scenarios import all_cases
from conformance.verify.expect import quiet_window
from tests.faultproxy import TO_CLIENT, Fault, FaultProxy, Frame, Pause, replace

CASE_TIMEOUT = 5.0
CASES = {c.id: c for c in all_cases()}
DEVIATION = {Level.MUST: "FAIL", Level.EXTENSION: "FAIL", Level.SHOULD: "NON_STRICT"}
DELAY = 2 * quiet_window(CASE_TIMEOUT)


class Slowed(Fault):
    """``inner`` on a broker made slower, its frame order kept (see the module doc)."""

    def __init__(self, inner: Fault) -> None:
        self.inner = inner
        self.name = f"slowed-{inner.name}"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        return self.inner.to_broker(st, channel, frm)

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        held: dict[int, list[Frame]] = st.setdefault("late", {})
        slept: set[int] = st.setdefault("slept", set())
        out: list[Frame | Pause] = []
        if held.get(channel):
            if channel not in slept:  # the first late frame of a channel: once, or thousands of confirms wait
                slept.add(channel)
                out.append(Pause(DELAY))
            out += held.pop(channel)
        frames = self.inner.to_client(st, channel, frm)
        if isinstance(frm, spec.Basic.Deliver):
            out.append(Pause(DELAY))  # every later frame waits behind it
        out.append(frames[0])
        if frames[1:]:
            held.setdefault(channel, []).extend(frames[1:])
        return out  # type: ignore[return-value]


class Reconfirmed(Fault):
    """Every confirm is followed by its opposite for the same tag (ack then nack, nack then ack)."""

    name = "reconfirmed"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Ack):
            return [(channel, frm), (channel, spec.Basic.Nack(delivery_tag=frm.delivery_tag,
                                                              multiple=frm.multiple, requeue=False))]
        if isinstance(frm, spec.Basic.Nack):
            return [(channel, frm), (channel, spec.Basic.Ack(delivery_tag=frm.delivery_tag,
                                                             multiple=frm.multiple))]
        return [(channel, frm)]


class PrefetchIgnored(Fault):
    """basic.qos reaches the broker with prefetch-count 0 (no limit)."""

    name = "prefetch-ignored"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Qos):
            return [(channel, replace(frm, prefetch_count=0))]
        return [(channel, frm)]


class CancelIgnored(Fault):
    """basic.cancel never reaches the broker; the client is answered cancel-ok in its name."""

    name = "cancel-ignored"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Cancel):
            st.setdefault(TO_CLIENT, []).append((channel, spec.Basic.CancelOk(consumer_tag=frm.consumer_tag)))
            return []
        return [(channel, frm)]


class ReturnEveryPublish(Fault):
    """Every basic.publish is answered with a basic.return (312 NO_ROUTE), routed or not."""

    name = "return-every-publish"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Publish):
            st.setdefault("returns", []).append((channel, frm))
        return [(channel, frm)]

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        out: list[Frame] = [(channel, frm)]
        pending = st.get("returns", [])
        for ch, pub in [p for p in pending if p[0] == channel]:
            pending.remove((ch, pub))
            body = b"returned"
            out += [(ch, spec.Basic.Return(reply_code=312, reply_text="NO_ROUTE", exchange=pub.exchange,
                                           routing_key=pub.routing_key)),
                    (ch, ContentHeader(0, len(body), spec.Basic.Properties())), (ch, ContentBody(body))]
        return out


# the fault that breaks what each case's silence guarded, and the cases whose silence became a fence
ROWS: list[tuple[type[Fault], tuple[str, ...]]] = [
    (Reconfirmed, ("confirms.seq-counts-every-publish", "confirms.fanout-three-queues-one-ack",
                   "confirms.queue-deleted-while-outstanding", "confirms.queue-purged-while-outstanding",
                   "confirms.invariant-settled-exactly-once", "confirms.invariant-never-acked-and-nacked",
                   "limits.overflow-reject-publish-not-dead-lettered",
                   "limits.overflow-reject-publish-dlx-nacks-and-dead-letters",
                   "limits.overflow-drop-head-dead-letters-head", "limits.max-length-bytes-reject-publish")),
    (PrefetchIgnored, ("qos.prefetch-count-bounds-unacked", "qos.ack-frees-one-slot")),
    (CancelIgnored, ("acks.cancel-stops-deliveries",)),
    (ReturnEveryPublish, ("returns.mandatory-routable-no-return",
                          "returns.non-mandatory-unroutable-dropped")),
]


@pytest.fixture(scope="module")
def broker() -> Any:
    b = EmbeddedBroker()
    b.start()
    yield b
    b.stop()
    b.cleanup()


def run_cases(url: str, cases: tuple[str, ...], out: Path) -> dict[str, str]:
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "--pyargs",
         "conformance.scenarios", "--broker-url", url, "--case", ",".join(cases),
         "--case-timeout", str(CASE_TIMEOUT), "--results", str(out), "--fail-on", "none"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    files = list(out.glob("*.jsonl"))
    assert len(files) == 1, res.stdout[-3000:] + res.stderr[-2000:]
    recs = [json.loads(line) for line in files[0].read_text().splitlines()]
    return {r["case_id"]: r["verdict"] for r in recs}


@pytest.mark.parametrize(("fault", "cases"), ROWS, ids=[r[0].name for r in ROWS])
def test_fenced_cases_fail_on_a_slow_broken_broker(broker: Any, tmp_path: Path, fault: type[Fault],
                                                   cases: tuple[str, ...]) -> None:
    with FaultProxy("127.0.0.1", broker.port, Slowed(Fault())) as slow:
        assert run_cases(str(slow.url()), cases, tmp_path / "slow") == dict.fromkeys(cases, "PASS")
    with FaultProxy("127.0.0.1", broker.port, Slowed(fault())) as broken:
        verdicts = run_cases(str(broken.url()), cases, tmp_path / "broken")
        # a deviation: FAIL for a MUST, NON_STRICT for a SHOULD (the returns cases)
        assert verdicts == {c: DEVIATION[CASES[c].level] for c in cases}
        assert broken.errors == []
