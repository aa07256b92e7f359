"""The spec XML's rules: count, id scheme, attributes."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.model.cases import RULE_RE
from conformance.model.spec import load_rules, parse_rules, rule_ids


def test_all_115_rules_load_each_with_its_own_id() -> None:
    rules = load_rules()
    assert len(rules) == 115
    assert len(set(rule_ids())) == 115


def test_every_id_is_citable_by_a_case() -> None:
    assert [r.id for r in load_rules() if not RULE_RE.match(r.id)] == []


def test_method_field_class_and_domain_rules() -> None:
    by_id = {r.id: r for r in load_rules()}
    ack = by_id["basic.ack/exists"]  # on field "multiple" of basic.ack
    assert (ack.class_name, ack.method, ack.field, ack.on_failure) == (
        "basic",
        "ack",
        "multiple",
        "precondition-failed",
    )
    assert "MUST validate that a non-zero delivery-tag" in ack.doc
    assert ack.scenario == "TODO."  # the XML leaves this scenario unwritten
    assert by_id["tx.commit/transacted"].scenario.startswith("The client opens a channel")
    assert ack.level == "MUST"
    cls = by_id["exchange/required-types"]
    assert (cls.class_name, cls.method, cls.field) == ("exchange", None, None)
    dom = by_id["delivery-tag/channel-local"]
    assert (dom.class_name, dom.method, dom.domain) == (None, None, "delivery-tag")
    assert by_id["queue.declare/exclusive"].on_failure == "resource-locked"
    assert by_id["tx/not-multiple-queues"].name == "not multiple queues"
    assert by_id["tx.commit/transacted"].method == "commit"


def test_reused_names_are_qualified_with_their_field() -> None:
    consume = [
        r for r in load_rules() if r.class_name == "basic" and r.method == "consume" and r.name == "01"
    ]
    assert [(r.id, r.field) for r in consume] == [
        ("basic.consume/01", None),
        ("basic.consume.consumer-tag/01", "consumer-tag"),
        ("basic.consume.exclusive/01", "exclusive"),
    ]
    ids = {r.id for r in load_rules()}
    assert {"queue.declare.durable/types", "queue.declare.exclusive/types", "basic.qos.prefetch-count/01",
            "connection.tune-ok.frame-max/upper-limit", "queue.declare/exclusive"} <= ids
    assert "queue.declare/types" not in ids


def test_parse_rules_rejects_broken_xml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<amqp><class name='x'>", encoding="utf-8")
    with pytest.raises(ValueError, match="does not parse"):
        load_rules(bad)
    assert (
        parse_rules(
            "<amqp><class name='c'><method name='m'><rule name='r 1'><doc>x MAY "
            "y</doc></rule></method></class></amqp>"
        )[0].id
        == "c.m/r-1"
    )
