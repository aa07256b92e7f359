from __future__ import annotations

import pytest

from conformance.model.cases import MISSING, REGISTRY, Case, Level, param, register
from conformance.model.coverage import rule_coverage, unknown_rule_refs
from conformance.model.spec import load_rules


def test_case_id_and_rules_are_validated() -> None:
    with pytest.raises(ValueError, match=r"area\.slug"):
        Case(id="NoDot", description="d", expectation="e", sources=("x",))
    with pytest.raises(ValueError, match=r"class\.method/rule-name"):
        Case(id="a.b", description="d", expectation="e", rules=("not a rule",))
    with pytest.raises(ValueError, match="unknown profile"):
        Case(id="a.b", description="d", expectation="e", sources=("x",), expected={"qpid": 1})
    with pytest.raises(ValueError, match="cite"):
        Case(id="a.b", description="d", expectation="e")


def test_expected_for_falls_back_to_default() -> None:
    c = Case(id="a.b", description="d", expectation="e", sources=("x",), expected={"rabbitmq": 1}, default=2)
    assert c.expected_for("rabbitmq") == 1
    assert c.expected_for("spec") == 2
    assert Case(id="a.c", description="d", expectation="e", sources=("x",)).expected_for("spec") is MISSING
    assert c.area == "a"


def test_register_rejects_a_different_case_under_the_same_id() -> None:
    c = Case(id="unitarea.dup", description="d", expectation="e", sources=("x",))
    register(c)
    register(c)  # same case again (module imported twice): fine
    with pytest.raises(ValueError, match="duplicate"):
        register(Case(id="unitarea.dup", description="other", expectation="e", sources=("x",)))
    del REGISTRY["unitarea.dup"]


def test_param_carries_its_case() -> None:
    c = Case(id="unitarea.param", description="d", expectation="e", sources=("x",), level=Level.SHOULD)
    p = param(c, 1)
    assert p.id == "unitarea.param"
    assert p.values == (1,)
    assert p.marks[0].args[0] is c and REGISTRY["unitarea.param"] is c
    del REGISTRY["unitarea.param"]


def test_every_suite_case_cites_existing_rules() -> None:
    from conformance.scenarios import all_cases

    cases = all_cases()
    assert len(cases) >= 250
    assert unknown_rule_refs(cases) == {}


def test_rule_ids_are_unique_and_complete() -> None:
    rules = load_rules()
    assert len(rules) == 115
    assert len({r.id for r in rules}) == 115
    ids = {r.id for r in rules}
    assert {"queue.declare/exclusive", "basic.ack/exists", "tx.commit/transacted",
            "basic.consume.exclusive/01", "basic.consume.consumer-tag/01"} <= ids


def test_coverage_counts_cases_and_unknown_refs() -> None:
    a = Case(id="cov.a", description="d", expectation="e", rules=("basic.ack/exists",))
    b = Case(id="cov.b", description="d", expectation="e", rules=("basic.ack/exists", "basic/nonexistent"))
    rows = {r.rule.id: r for r in rule_coverage([a, b])}
    assert rows["basic.ack/exists"].cases == ("cov.a", "cov.b")
    assert unknown_rule_refs([a, b]) == {"cov.b": ["basic/nonexistent"]}
