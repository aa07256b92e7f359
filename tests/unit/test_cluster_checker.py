"""The faults checker on hand-made histories: every class, and a missing confirm is never a loss."""

from __future__ import annotations

import math

import pytest

from conformance.faults.checker import ACK, NACK, UNKNOWN, Delivery, Publish, buckets, check, percentile
from conformance.faults.records import records, render
from conformance.faults.run import FaultsConfig, FaultsResult, _active
from conformance.faults.workload import History, next_node


def pub(i: str, outcome: str = ACK, t: float = 0.0, lat: float = 0.01) -> Publish:
    return Publish(i, t, outcome, None if outcome == UNKNOWN else t + lat)


def test_every_class_once() -> None:
    publishes = [
        pub("ok"),
        pub("lost"),
        pub("nacked-consumed", NACK),
        pub("unknown-consumed", UNKNOWN),
        pub("unknown-gone", UNKNOWN),
        pub("nacked-gone", NACK),
        pub("dup"),
        pub("dup-unflagged"),
    ]
    deliveries = [
        Delivery("ok", 1),
        Delivery("nacked-consumed", 1),
        Delivery("unknown-consumed", 1),
        Delivery("ghost", 1),
        Delivery("dup", 1),
        Delivery("dup", 2, redelivered=True),
        Delivery("dup-unflagged", 1),
        Delivery("dup-unflagged", 2, redelivered=False),
    ]
    v = check(publishes, deliveries)
    assert v.counts == {
        "ok": 3,  # ok, dup, dup-unflagged
        "lost": 1,
        "recovered": 2,
        "unconfirmed": 2,
        "unexpected": 1,
        "duplicated": 2,
        "duplicated_unflagged": 1,
        "recovered_after_nack": 1,
    }
    assert v.lost_ids == ("lost",)
    assert v.unexpected_ids == ("ghost",)
    assert v.published == 8 and v.confirmed == 4
    assert v.outcomes == {ACK: 4, NACK: 2, UNKNOWN: 2}
    assert v.fraction("lost") == pytest.approx(1 / 8)


def test_missing_confirm_is_never_a_loss() -> None:
    # nothing consumed at all: only the acked one is lost; unknown and nacked are "unconfirmed"
    v = check([pub("a", UNKNOWN), pub("b", NACK), pub("c", ACK)], [])
    assert v.counts["lost"] == 1 and v.lost_ids == ("c",)
    assert v.counts["unconfirmed"] == 2
    v = check([pub(str(i), UNKNOWN) for i in range(100)], [])
    assert v.counts["lost"] == 0 and v.counts["unconfirmed"] == 100


def test_clean_history_is_all_ok() -> None:
    v = check(
        [pub(str(i), lat=i / 1000) for i in range(1, 101)], [Delivery(str(i), 1) for i in range(1, 101)]
    )
    assert v.counts["ok"] == 100
    assert sum(v.counts[k] for k in ("lost", "recovered", "unconfirmed", "unexpected", "duplicated")) == 0
    assert v.latency_ms["p50"] == pytest.approx(50.0)
    assert v.latency_ms["p99"] == pytest.approx(99.0)
    assert v.latency_ms["max"] == pytest.approx(100.0)


def test_a_republished_id_keeps_its_best_outcome() -> None:
    v = check([pub("x", UNKNOWN), pub("x", ACK)], [])
    assert v.counts["lost"] == 1 and v.published == 1


def test_percentile_nearest_rank() -> None:
    assert math.isnan(percentile([], 50))
    assert percentile([3.0], 99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_buckets_count_by_time() -> None:
    rows = buckets(
        [pub("a", t=0.5, lat=5.0), pub("b", t=6.0)], [Delivery("a", 7.0)], width=5.0, end=10.0, lost=["b"]
    )
    assert rows == [
        {"t": 0.0, "published": 1, "confirmed": 0, "consumed": 0, "lost": 0},
        {"t": 5.0, "published": 1, "confirmed": 2, "consumed": 1, "lost": 1},
    ]


def test_clients_of_a_failed_node_spread_over_the_others_and_come_home() -> None:
    assert {next_node(0, c, 3, home=0) for c in range(4)} == {1, 2}
    assert all(next_node(2, c, 3, home=2) != 2 for c in range(4))
    assert next_node(1, 0, 3, home=0) == 0  # away from home: back home next
    assert next_node(0, 5, 1, home=0) == 0


def test_the_goal_is_reached_on_the_goal_th_broker_ack() -> None:
    h = History(goal=2)
    h.published(Publish("a", 0.0, ACK, 0.1, 0))
    h.published(Publish("b", 0.0, NACK, 0.1, 0))
    h.published(Publish("c", 0.0, UNKNOWN, None, 0))
    assert not h.reached.is_set()  # a nack or a missing answer is no confirm
    h.published(Publish("d", 0.0, ACK, 0.1, 0))
    assert h.reached.is_set() and len(h.publishes) == 4
    endless = History()
    for i in range(50):
        endless.published(Publish(str(i), 0.0, ACK, 0.1, 0))
    assert not endless.reached.is_set()  # goal 0: the duration ends the workload


def test_active_faults_per_bucket() -> None:
    events = [
        {"t": 1.0, "action": "kill", "node": 1, "ok": True},
        {"t": 4.0, "action": "start", "node": 1, "ok": True},
        {"t": 12.0, "action": "partition", "node": 0, "ok": True},
    ]
    assert _active(events, 0.0, 5.0) == ["kill n1"]
    assert _active(events, 5.0, 10.0) == []
    assert _active(events, 10.0, 15.0) == ["partition n0"]


def test_records_and_verdict() -> None:
    v = check([pub("a"), pub("b")], [Delivery("a", 1)])
    cfg = FaultsConfig(queue_type="quorum", nemesis=("kill",))
    result = FaultsResult(
        "r1",
        cfg,
        v,
        [{"t": 1.0, "action": "kill", "node": 0, "node_name": "n0", "ok": True, "detail": ""}],
        [{"t": 0.0, "published": 2, "confirmed": 2, "consumed": 1, "faults": []}],
        "queue empty",
        10.0,
    )
    assert result.failed
    rows = records(result)
    kinds = [r["record"] for r in rows]
    assert kinds == ["faults.summary", "faults.bucket", "faults.event"]
    summary = rows[0]
    assert summary["verdict"] == "FAIL" and summary["counts"]["lost"] == 1 and summary["lost_ids"] == ["b"]
    assert summary["promise"] == "no-loss" and summary["faults"] == 1
    assert "FAIL: 1 confirmed message(s) lost" in render(result)
