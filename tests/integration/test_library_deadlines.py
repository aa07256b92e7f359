"""The pika and aio-pika cases stay bounded and blame the broker, whatever the broker sends.

Each fault below makes the reference broker, seen through the fault proxy (tests/faultproxy.py),
answer oddly in one way. Every case whose client is pika or aio-pika (taken from the case
metadata, so a new library case is covered without editing this file) is run through it with a
short case timeout; each must end within its ceiling, never in ERROR (a broker's oddity is the
broker's verdict, never a harness error), and the faults that break a promise the cases check
(nacks, duplicate confirms) must give broker verdicts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pamqp import commands as spec

from conformance.broker import EmbeddedBroker
from conformance.model.cases import Case
from conformance.scenarios import all_cases
from tests.faultproxy import Fault, FaultProxy, Frame

CASE_TIMEOUT = 2.0
# A library case runs at most three bounded interactions of up to 3 x the case timeout, plus the
# bounded closes; the ceiling is what "the worker is free again" means here.
CEILING = 12 * CASE_TIMEOUT
BROKER_VERDICTS = {"FAIL", "NON_STRICT", "TIMEOUT"}


class RenameConsumerTag(Fault):
    """consume-ok names a consumer tag other than the one the client asked for (and the broker
    goes on using its own name for deliveries and cancels)."""

    name = "rename-consumer-tag"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        names = st.setdefault("renamed", {})
        if isinstance(frm, spec.Basic.ConsumeOk):
            names[(channel, f"renamed.{frm.consumer_tag}")] = frm.consumer_tag
            return [(channel, spec.Basic.ConsumeOk(consumer_tag=f"renamed.{frm.consumer_tag}"))]
        if isinstance(frm, spec.Basic.Deliver):
            return [(channel, spec.Basic.Deliver(consumer_tag=f"renamed.{frm.consumer_tag}",
                                                 delivery_tag=frm.delivery_tag, redelivered=frm.redelivered,
                                                 exchange=frm.exchange, routing_key=frm.routing_key))]
        if isinstance(frm, spec.Basic.CancelOk):
            return [(channel, spec.Basic.CancelOk(consumer_tag=f"renamed.{frm.consumer_tag}"))]
        return [(channel, frm)]

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Cancel):
            original = st.get("renamed", {}).get((channel, frm.consumer_tag), frm.consumer_tag)
            return [(channel, spec.Basic.Cancel(consumer_tag=original, nowait=frm.nowait))]
        return [(channel, frm)]


class NeverAnswerConsume(Fault):
    """basic.consume is never answered (it never reaches the broker: no consume-ok, no delivery)."""

    name = "never-answer-consume"

    def to_broker(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        return [] if isinstance(frm, spec.Basic.Consume) else [(channel, frm)]


class DuplicateReplies(Fault):
    """Each publisher confirm (basic.ack) and each consume-ok is sent twice."""

    name = "duplicate-replies"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, (spec.Basic.Ack, spec.Basic.ConsumeOk)):
            return [(channel, frm), (channel, frm)]
        return [(channel, frm)]


class NackEveryPublish(Fault):
    """Every publisher confirm is a basic.nack instead of a basic.ack."""

    name = "nack-every-publish"

    def to_client(self, st: dict[str, Any], channel: int, frm: Any) -> list[Frame]:
        if isinstance(frm, spec.Basic.Ack):
            return [
                (
                    channel,
                    spec.Basic.Nack(delivery_tag=frm.delivery_tag, multiple=frm.multiple, requeue=False),
                )
            ]
        return [(channel, frm)]


def library_cases() -> list[Case]:
    return [c for c in all_cases() if c.client in ("pika", "aio-pika")]


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker()
    b.start()
    yield b
    b.stop()
    b.cleanup()


def run_through(broker: EmbeddedBroker, fault: Fault, out: Path) -> tuple[dict[str, dict[str, Any]], float]:
    """All library cases, through the proxy with ``fault``: their records by case id, and wall time."""
    ids = [c.id for c in library_cases()]
    with FaultProxy("127.0.0.1", broker.port, fault) as proxy:
        t0 = time.monotonic()
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                # not this checkout's pytest options (its -n 4 started four xdist workers per run),
                # as `amqp-conformance run` does
                "-o",
                "addopts=",
                "-q",
                "--pyargs",
                "conformance.scenarios",
                "--broker-url",
                str(proxy.url()),
                "--case",
                ",".join(ids),
                "--case-timeout",
                str(CASE_TIMEOUT),
                "--results",
                str(out),
                "--fail-on",
                "none",
            ],
            capture_output=True,
            text=True,
            timeout=CEILING * len(ids) / 2,
            stdin=subprocess.DEVNULL,
        )
        wall = time.monotonic() - t0
    files = list(out.glob("*.jsonl"))
    assert len(files) == 1, res.stdout[-3000:] + res.stderr[-2000:]
    recs = [json.loads(line) for line in files[0].read_text().splitlines()]
    return {r["case_id"]: r for r in recs}, wall


FAULTS = [RenameConsumerTag, NeverAnswerConsume, DuplicateReplies, NackEveryPublish]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_library_cases_end_within_their_ceiling(
    broker: EmbeddedBroker, tmp_path: Path, fault: type[Fault]
) -> None:
    records, wall = run_through(broker, fault(), tmp_path)
    ids = [c.id for c in library_cases()]
    assert sorted(records) == ids, f"cases without a verdict: {sorted(set(ids) - set(records))}"
    errors = {i: r["observed"] for i, r in records.items() if r["verdict"] == "ERROR"}
    assert not errors, f"ERROR is the harness's verdict, these were the broker's: {errors}"
    slow = {i: r["duration_s"] for i, r in records.items() if r["duration_s"] > CEILING}
    assert not slow, f"cases over their {CEILING}s ceiling: {slow}"
    assert wall < CEILING * len(ids) / 2, f"the run took {wall:.0f}s"
    verdicts = {i: r["verdict"] for i, r in records.items()}
    if fault is NackEveryPublish:  # a nacked publish is a broker fault every confirms case sees
        confirms = {i: v for i, v in verdicts.items() if i.startswith("confirms.")}
        assert confirms and set(confirms.values()) == {"FAIL"}, confirms
    if fault is DuplicateReplies:  # pika's own assertion on the second ack is blamed on the broker
        assert verdicts["confirms.pika-publish-returns"] == "FAIL", records["confirms.pika-publish-returns"]
        assert "_CallbackResult was already set" in records["confirms.pika-publish-returns"]["observed"]
    if fault in (RenameConsumerTag, NeverAnswerConsume):  # the waits that hung the run for 9 minutes
        assert verdicts["acks.pika-consume-ack-loop"] == "TIMEOUT", records["acks.pika-consume-ack-loop"]
        assert verdicts["acks.aio-pika-iterator-ack"] == "TIMEOUT", records["acks.aio-pika-iterator-ack"]
        assert verdicts["ordering.pika-consume-200"] in BROKER_VERDICTS, records["ordering.pika-consume-200"]
