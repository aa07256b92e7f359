"""Expectations keyed by RabbitMQ release, and the upgrade comparison built on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.model.upgrade import compare_paths, normalise
from conformance.profiles import releases


def test_a_rabbitmq_version_selects_the_release_and_other_products_get_the_default() -> None:
    assert releases.applied_release("RabbitMQ", "4.0.5") == ("4.0.5", "server-properties")
    assert releases.applied_release("garagemq", "0.1") == ("3.10.8", "default")
    assert releases.applied_release("amqp-conformance reference broker", "3.10.8") == ("3.10.8", "default")
    assert releases.applied_release("RabbitMQ", "4.0.5", "3.10") == ("3.10", "named")


def test_a_change_applies_from_its_release_on_and_the_old_value_before() -> None:
    case = "exchange.unknown-type-503"
    assert releases.expectation(case, None, "3.13.2").value == "connection.close 503"
    assert releases.expectation(case, None, "3.13.3").value == "channel.close 406"
    assert releases.expectation(case, None, "4.0").value == "channel.close 406"
    assert releases.expectation("exchange.direct-routing", None, "4.0.5") is None


def test_a_queue_type_row_holds_only_for_that_type() -> None:
    case = "queue_types.requeue-position-reject"
    assert releases.expectation(case, "quorum", "4.0.5").value == ["m1", "m2", "m3", "m4"]
    assert releases.expectation(case, "classic", "4.0.5") is None


def test_a_release_before_several_changes_takes_the_nearest_before() -> None:
    # 3.10.0 moved a returned quorum message to the back, 4.0.0 near the head again (delivery limit)
    case = "queue_types.requeue-position-nack"
    assert releases.expectation(case, "quorum", "3.8.9").value == ["m1", "m2", "m3", "m4"]
    assert releases.expectation(case, "quorum", "3.10.8").value == ["m2", "m3", "m4", "m1"]
    assert releases.expectation(case, "quorum", "4.3.6").value == ["m1", "m2", "m3", "m4"]
    # the consumer-timeout text of 3.8.9; 4.0.5 the case's own; 4.3 classic queues: not evaluated
    timeout = "consumer_timeout.unacked-delivery-closes-channel"
    assert "consumer ack timed out" in releases.expectation(timeout, None, "3.8.9").value
    assert releases.expectation(timeout, None, "4.0.5") is None
    assert releases.expectation(timeout, None, "4.3.6").value.startswith("no channel.close")


def test_a_feature_a_release_introduced_is_unsupported_before_it() -> None:
    row = releases.expectation("queue_types.reject-publish-overflow-nack", "quorum", "3.8.9")
    assert row is not None and "3.8.10" in str(row.unsupported) and row.value is None
    assert releases.expectation("queue_types.reject-publish-overflow-nack", "quorum", "3.8.10") is None
    assert releases.expectation("queue_types.reject-publish-overflow-nack", "classic", "3.8.9") is None
    assert releases.expectation("consumer_priority.higher-first-until-blocked", "quorum", "3.8.9").unsupported


def test_mirrored_cases_are_unsupported_from_4_0_with_one_reason() -> None:
    reasons = {releases.expectation(c, None, "4.0.5").unsupported
               for c in ("cluster.confirm-survives-leader-loss.mirrored", "cluster.exclusive-not-mirrored")}
    assert len(reasons) == 1 and "removed in RabbitMQ 4.0" in next(iter(reasons))
    assert releases.expectation("cluster.confirm-survives-leader-loss.mirrored", None, "3.10.8") is None


def test_every_change_names_a_source_and_a_known_documentation_state() -> None:
    for change in releases.changes():
        assert change.source.startswith("https://") and change.quote
        assert change.documented in ("yes", "code", "no")


@pytest.mark.parametrize("text,ok", [("rabbitmq", True), ("spec", True), ("rabbitmq@3.10", True),
                                     ("rabbitmq@", False), ("spec@4.0", False), ("rabbitmq@x", False)])
def test_profile_names(text: str, ok: bool) -> None:
    if ok:
        assert releases.check_profile(text) == text
    else:
        with pytest.raises(ValueError):
            releases.check_profile(text)


def test_normalise_drops_generated_names_ports_and_ids() -> None:
    a = normalise("queue 'amqpc-x-gw0-1a2b3c4d-q' at 127.0.0.1:5672 on amqpc61234@localhost, amq.gen-AbC")
    b = normalise("queue 'amqpc-x-gw1-9f8e7d6c-q' at 127.0.0.1:40001 on amqpc50011@localhost, amq.gen-XyZ")
    assert a == b


def _run(tmp_path: Path, name: str, version: str, rows: dict[str, tuple[str, str]]) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({
        "case_id": c, "verdict": v, "observed": o, "broker_product": "RabbitMQ", "broker_version": version,
    }) + "\n" for c, (v, o) in rows.items()))
    return str(path)


def test_the_upgrade_comparison_marks_documented_and_undocumented_changes(tmp_path: Path) -> None:
    old = _run(tmp_path, "old", "3.10.8", {
        "exchange.unknown-type-503": ("PASS", "connection.close 503"),
        "access.get-without-read": ("PASS", "access to queue 'amqpc-a-gw0-11111111-q' refused"),
        "replies.some-text": ("PASS", "text one of queue 'amqpc-a-gw0-11111111-q'"),
        "basic.same": ("PASS", "x on 127.0.0.1:1111"),
    })
    new = _run(tmp_path, "new", "4.0.5", {
        "exchange.unknown-type-503": ("PASS", "channel.close 406"),
        "access.get-without-read": ("PASS", "read access to queue 'amqpc-a-gw1-22222222-q' refused"),
        "replies.some-text": ("PASS", "text two of queue 'amqpc-a-gw1-22222222-q'"),
        "basic.same": ("PASS", "x on 127.0.0.1:2222"),
    })
    cmp = compare_paths(old, new)
    by_case = {r.case_id: r for r in cmp.rows}
    assert set(by_case) == {"exchange.unknown-type-503", "access.get-without-read", "replies.some-text"}
    assert by_case["exchange.unknown-type-503"].status == "documented"
    assert "3.13.3" in by_case["exchange.unknown-type-503"].sources
    # the ACCESS_REFUSED text that names the permission: an observed-only row (3.12.0, no note)
    assert by_case["access.get-without-read"].status == "documented"
    assert "3.12.0" in by_case["access.get-without-read"].sources
    assert by_case["replies.some-text"].status == "UNDOCUMENTED"


def test_a_new_failure_is_undocumented_even_where_a_change_lists_the_case(tmp_path: Path) -> None:
    # 4.0.5 judged by its own release: the x-last-death change lists the case and its expectation
    # already follows it, so the FAIL (a kept CC header) is something no source explains.
    old = _run(tmp_path, "old", "3.10.8", {"dead_letter.routing-key-replaces-keys": ("PASS", "no CC")})
    kept = ("FAIL", "'CC': ['k-cc']")
    new = _run(tmp_path, "new", "4.0.5", {"dead_letter.routing-key-replaces-keys": kept})
    (row,) = compare_paths(old, new).rows
    assert row.changes and row.new_failure and row.status == "UNDOCUMENTED"
    # Judged by a release named on purpose, documented changes are failures by design: still documented.
    named = tmp_path / "named.jsonl"
    named.write_text(json.dumps({"case_id": "exchange.unknown-type-503", "verdict": "FAIL",
                                 "observed": "channel.close 406", "broker_product": "RabbitMQ",
                                 "broker_version": "4.0.5", "release": "3.10",
                                 "release_basis": "named"}) + "\n")
    old2 = _run(tmp_path, "old2", "3.10.8", {"exchange.unknown-type-503": ("PASS", "connection.close 503")})
    (row2,) = compare_paths(old2, str(named)).rows
    assert row2.status == "documented" and not row2.new_failure
