"""Sensitivity: the core MUST-level case of each area fails against a broker that violates it.

The broken broker is the reference broker behind a fault-injecting proxy (tests/faultproxy.py):
the product is never changed. Each row runs one case twice through the proxy — without the
fault (the case must PASS, so the broker and the path are fine) and with it (the case must
FAIL) — via a real pytest run of the scenario module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.broker import EmbeddedBroker
from tests.faultproxy import (
    DoubleConfirm,
    ExclusiveIgnored,
    Fault,
    FaultProxy,
    NackMultipleIgnored,
    NoRedeliveredFlag,
    RejectRequeueDropped,
    RollbackCommits,
    SwapDeliveries,
)

# area, case id, the fault that violates its expectation, the verdict the fault must produce
ROWS = [
    ("confirms", "confirms.invariant-never-acked-and-nacked", DoubleConfirm, "FAIL"),
    ("tx", "tx.publish.rollback", RollbackCommits, "FAIL"),
    ("ordering", "ordering.single-path-1000", SwapDeliveries, "FAIL"),
    ("reject", "reject.requeue-true-requeues", RejectRequeueDropped, "FAIL"),
    ("nack", "nack.multiple-with-gaps", NackMultipleIgnored, "FAIL"),
    ("recover", "recover.requeue-redelivers-consumer", NoRedeliveredFlag, "FAIL"),
    ("exclusive", "exclusive.other-connection-declare-405", ExclusiveIgnored, "FAIL"),
]


@pytest.fixture(scope="module")
def broker() -> EmbeddedBroker:
    b = EmbeddedBroker()
    b.start()
    yield b
    b.stop()
    b.cleanup()


def run_case(url: str, module: str, case_id: str, out: Path) -> str:
    res = subprocess.run(
        # -o addopts=: not this checkout's pytest options (its -n 4 started four xdist workers for
        # the one case), as `amqp-conformance run` does
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "--pyargs",
         f"conformance.scenarios.test_{module}", "--broker-url", url, "--case", case_id,
         "--case-timeout", "5", "--results", str(out), "--fail-on", "none"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    files = list(out.glob("*.jsonl"))
    assert len(files) == 1, res.stdout[-3000:] + res.stderr[-2000:]
    recs = [json.loads(line) for line in files[0].read_text().splitlines()]
    verdicts = {r["case_id"]: r["verdict"] for r in recs}
    assert case_id in verdicts, f"{case_id} did not run: {res.stdout[-2000:]}"
    return verdicts[case_id]


@pytest.mark.parametrize(("area", "case_id", "fault", "verdict"), ROWS, ids=[r[0] for r in ROWS])
def test_core_case_fails_against_a_broken_broker(broker: EmbeddedBroker, tmp_path: Path, area: str,
                                                 case_id: str, fault: type[Fault], verdict: str) -> None:
    module = "ordering" if area == "ordering" else area
    with FaultProxy("127.0.0.1", broker.port, Fault()) as clean:
        assert run_case(str(clean.url()), module, case_id, tmp_path / "clean") == "PASS"
    with FaultProxy("127.0.0.1", broker.port, fault()) as broken:
        assert run_case(str(broken.url()), module, case_id, tmp_path / "broken") == verdict
