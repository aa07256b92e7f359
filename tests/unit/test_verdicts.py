"""The verdict mapping: each way a case can end → exactly one verdict."""

from __future__ import annotations

import pytest

from conformance.model.cases import Case, Level
from conformance.model.verdicts import (
    CaseOutcome,
    CaseTimeout,
    HarnessError,
    InvariantViolation,
    Mismatch,
    Strictness,
    Verdict,
    decide,
    parse_fail_on,
    verdict_of,
)
from conformance.plugin.context import CaseContext
from conformance.verify.unsupported import Unsupported, case_ending


def mk(level: Level = Level.MUST, **kw: object) -> Case:
    return Case(id="area.slug", description="d", expectation="e", level=level, sources=("doc",), **kw)  # type: ignore[arg-type]


def info(exc: BaseException) -> BaseException | None:
    """The case ending as the plugin hands it to decide (from pytest's ExceptionInfo)."""
    try:
        raise exc
    except BaseException as e:  # noqa: BLE001 - capturing for ExceptionInfo
        return case_ending(pytest.ExceptionInfo.from_exception(e))


def test_parse_fail_on() -> None:
    assert parse_fail_on("FAIL,TIMEOUT,ERROR") == {Verdict.FAIL, Verdict.TIMEOUT, Verdict.ERROR}
    assert parse_fail_on(" fail , non-strict ") == {Verdict.FAIL, Verdict.NON_STRICT}
    assert parse_fail_on("none") == frozenset()
    with pytest.raises(ValueError, match="unknown verdict 'BOGUS'"):
        parse_fail_on("FAIL,BOGUS")


def test_pass_and_informational() -> None:
    assert decide(mk(), None, None).verdict is Verdict.PASS
    assert decide(mk(Level.INFO), None, None).verdict is Verdict.INFORMATIONAL
    ctx = CaseContext(mk(), "rabbitmq", 1.0, "main")
    ctx.informational("redelivered to the same consumer")
    d = decide(mk(), None, ctx)
    assert d.verdict is Verdict.INFORMATIONAL and "same consumer" in d.observed


@pytest.mark.parametrize(("level", "verdict"), [
    (Level.MUST, Verdict.FAIL), (Level.EXTENSION, Verdict.FAIL),
    (Level.SHOULD, Verdict.NON_STRICT), (Level.MAY, Verdict.NON_STRICT), (Level.INFO, Verdict.INFORMATIONAL),
])
def test_mismatch_by_level(level: Level, verdict: Verdict) -> None:
    d = decide(mk(level), info(Mismatch("code", expected=406, observed=404)), None)
    assert d.verdict is verdict
    assert (d.expected, d.observed) == ("406", "404")


def test_profile_mismatch_is_fail_even_for_should() -> None:
    binding = Mismatch("x", expected=1, observed=2, strictness=Strictness.BINDING)
    d = decide(mk(Level.SHOULD), info(binding), None)
    assert d.verdict is Verdict.FAIL


def test_plain_assert_is_a_mismatch() -> None:
    d = decide(mk(), info(AssertionError("assert 1 == 2")), None)
    assert d.verdict is Verdict.FAIL and "assert 1 == 2" in d.observed


def test_timeout_unsupported_error() -> None:
    d = decide(mk(), info(CaseTimeout("basic.ack", 2.0)), None)
    assert d.verdict is Verdict.TIMEOUT and "basic.ack" in d.expected and "2.0s" in d.observed
    assert decide(mk(), info(Unsupported("no nack")), None).verdict is Verdict.UNSUPPORTED
    # a bare pytest skip (a marker, a fixture) is UNSUPPORTED too, with pytest's reason
    d = decide(mk(), info(pytest.skip.Exception("no cluster")), None)
    assert (d.verdict, d.expected, d.observed, d.message) == (Verdict.UNSUPPORTED, "e", "-", "no cluster")
    assert decide(mk(), info(HarnessError("socket")), None).verdict is Verdict.ERROR
    d = decide(mk(), info(KeyError("bug")), None)
    assert d.verdict is Verdict.ERROR and "KeyError" in d.message


def test_failure_in_setup_is_error_not_fail() -> None:
    d = decide(mk(), info(AssertionError("fixture broke")), None, phase="setup")
    assert d.verdict is Verdict.ERROR


def test_profile_expectation_recorded_as_expected() -> None:
    c = mk(expected={"rabbitmq": 540, "spec": "redeliver"})
    ctx = CaseContext(c, "spec", 1.0, "main")
    assert ctx.expected == "redeliver"
    assert decide(c, None, ctx).expected == "redeliver"
    with pytest.raises(Mismatch) as exc:
        ctx.check_profile(540, "recover(requeue=false)")
    assert exc.value.strictness is Strictness.BINDING
    assert decide(mk(Level.SHOULD), info(exc.value), ctx).verdict is Verdict.FAIL


class BrokerHungUp(CaseTimeout):
    """A library's own exception for a broker that went silent (carries its verdict)."""


class BrokerNacked(Mismatch):
    """A library exception caused by what the broker sent: the broker's verdict, by level."""


class Informational(CaseOutcome):
    verdict = Verdict.INFORMATIONAL


def test_decide_reads_the_exceptions_own_verdict() -> None:
    assert decide(mk(), info(BrokerHungUp("basic.consume-ok", 1.0)), None).verdict is Verdict.TIMEOUT
    assert (
        decide(mk(), info(BrokerNacked("nack", expected="ack", observed="nack")), None).verdict
        is Verdict.FAIL
    )
    assert decide(mk(Level.SHOULD), info(BrokerNacked("nack")), None).verdict is Verdict.NON_STRICT
    d = decide(mk(), info(Informational("seen", observed="x")), None)
    assert d.verdict is Verdict.INFORMATIONAL and d.observed == "x"
    # The verdict comes from the exception, not from the class ladder: a new subclass needs no edit.
    assert verdict_of(BrokerNacked("x", strictness=Strictness.ADVISORY), Level.MUST) is Verdict.NON_STRICT


def test_plugin_package_reexports() -> None:
    from conformance import plugin

    assert plugin.decide is decide and plugin.CaseContext is CaseContext
    assert {"Cleanup", "Connections", "area_table", "results_file"} <= set(plugin.__all__)


def test_a_broken_wire_invariant_makes_any_ending_fail() -> None:
    v = InvariantViolation(
        "wire.body-size", "bodies add up", "§ 4.2.6", "raw#1 channel 1: 4 bytes, header said 3"
    )
    for excinfo, level in (
        (None, Level.MUST),
        (None, Level.INFO),
        (info(Mismatch("x", expected=1, observed=2)), Level.SHOULD),
        (info(CaseTimeout("basic.deliver", 1.0)), Level.MUST),
    ):
        d = decide(mk(level), excinfo, None, "call", [v])
        assert d.verdict is Verdict.FAIL
        assert d.message.startswith("wire invariant wire.body-size broken: raw#1 channel 1")
        assert "wire.body-size" in d.expected and "4 bytes" in d.observed
    assert decide(mk(), None, None, "call", []).verdict is Verdict.PASS


def test_slowest_cases_lists_ten_slowest_first() -> None:
    from conformance.plugin.records import slowest_cases

    node_case = {
        f"t::n{i}": (f"area.case-{i:02d}", Verdict.FAIL if i % 3 == 0 else Verdict.PASS) for i in range(14)
    }
    seconds = {f"t::n{i}": float(i) for i in range(14)} | {"t::not-a-case": 99.0}
    lines = slowest_cases(node_case, seconds)
    assert lines[0] == "slowest 10 case(s) (setup + call + teardown):"
    assert [ln.split() for ln in lines[1:3]] == [
        ["13.00s", "PASS", "area.case-13"],
        ["12.00s", "FAIL", "area.case-12"],
    ]
    assert len(lines) == 11 and lines[-1].split()[-1] == "area.case-04"
    assert slowest_cases({}, seconds) == []
    # a case whose phases were never timed counts 0 s; ties go by case id
    tie = slowest_cases(
        {"a": ("x.b", Verdict.PASS), "b": ("x.a", Verdict.PASS), "c": ("x.c", Verdict.TIMEOUT)}, {}
    )
    assert [ln.split()[-1] for ln in tie[1:]] == ["x.a", "x.b", "x.c"]
