"""CI subset of mutation testing: a representative handful of mutants, each killed against the
reference broker by the cases named here (and an equivalent mutant that must survive).

Each row runs only the cases that should kill it (the runner's ``--case`` narrowing), through
the same proxy and judgement as ``amqp-conformance mutate``; the baseline is every row's cases
through a fault-free proxy (one run), which must all PASS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from conformance.broker import EmbeddedBroker
from conformance.mutate.catalogue import CATALOGUE
from conformance.mutate.runner import Session, Upstream, judge, run_areas
from conformance.protocol.proxy import Fault

# mutant id, area, cases run, the case that must kill it
ROWS = [
    (
        "deliveries.deliver-exchange-rewritten",
        "replies",
        "replies.first-delivery-*",
        "replies.first-delivery-not-redelivered",
    ),
    ("counts.delete-ok-message-count", "replies", "replies.delete-ok-count", "replies.delete-ok-count"),
    ("returns.after-ack", "replies", "replies.mandatory-return-*", "replies.mandatory-return-whole-reply"),
    (
        "errors.channel-error-escalated",
        "errors",
        "errors.soft-error-keeps-other-channels",
        "errors.soft-error-keeps-other-channels",
    ),
    ("errors.channel-error-then-connection-close", "acks", "acks.double-ack-406", "acks.double-ack-406"),
    (
        "errors.channel-close-method-zeroed",
        "errors",
        "errors.soft-error-keeps-other-channels",
        "errors.soft-error-keeps-other-channels",
    ),
    ("tx.commit-rolls-back", "tx", "tx.publish.commit", "tx.publish.commit"),
    ("confirms.first-ack-lost", "confirms", "confirms.seq-starts-at-1", "confirms.seq-starts-at-1"),
    ("timing.deliveries-swapped", "ordering", "ordering.single-path-1000", "ordering.single-path-1000"),
    ("tags.server-tags-renamed-consistently", "acks", "acks.cancel-stops-deliveries", None),
    (
        "routing.topic-hash-as-star",
        "routing",
        "routing.topic-hash-zero-words",
        "routing.topic-hash-zero-words",
    ),
    (
        "limits.max-length-ignored",
        "limits",
        "limits.overflow-*",
        "limits.overflow-reject-publish-not-dead-lettered",
    ),
]
BY_ID = {m.id: m for m in CATALOGUE}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    broker = EmbeddedBroker()
    broker.start()
    try:
        yield Session(upstream=Upstream("127.0.0.1", broker.port, "guest", "guest", "/"),
                      results=tmp_path_factory.mktemp("mutate"), session_id="ci-mutate", workers="0",
                      case_timeout="3", run_timeout=120.0)
    finally:
        broker.stop()
        broker.cleanup()


@pytest.fixture(scope="module")
def baseline(session: Session) -> dict[str, str]:
    """Every row's cases through a fault-free proxy, in one run (a pytest session each costs
    seconds of start-up): all must PASS."""
    areas = sorted({r[1] for r in ROWS})
    base = run_areas(session, areas, Fault(), "none", ",".join(sorted({r[2] for r in ROWS})))
    assert not base.problem and base.verdicts and set(base.verdicts.values()) == {"PASS"}, base
    return base.verdicts


@pytest.mark.parametrize(("mutant_id", "area", "cases", "killer"), ROWS, ids=[r[0] for r in ROWS])
def test_mutant_is_killed(
    session: Session, baseline: dict[str, str], mutant_id: str, area: str, cases: str, killer: str | None
) -> None:
    mutant = BY_ID[mutant_id]
    assert area in mutant.areas
    run = run_areas(session, [area], mutant.make(), mutant.id, cases)
    assert not run.problem, run.problem
    assert run.verdicts and set(run.verdicts) <= set(baseline), (run.verdicts, baseline)
    result = judge(mutant, run, baseline)
    if killer is None:
        assert mutant.equivalent and result.outcome == "EQUIVALENT", result
    else:
        assert killer in {k.case_id for k in result.kills}, result
        assert result.outcome == "KILLED"
    records = [json.loads(line) for line in session.out_file.read_text().splitlines()]
    assert {r["extra"]["mutant"] for r in records if r["case_id"] in run.verdicts} >= {"none", mutant_id}
