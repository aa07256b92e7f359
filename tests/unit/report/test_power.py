"""The suite-power stages (mutation runs) on synthetic records, and their separation from
compliance: the same judgement as ``amqp-conformance mutate`` (conformance.mutate.runner.judge)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from conformance.mutate.catalogue import CATALOGUE
from conformance.mutate.runner import Kill, RunOutcome, judge, summarise
from conformance.report import compliance, edges, history, page, parsing, power
from conformance.report.schema import RESULTS_STRUCT

from .conftest import lines_frame, record, results_frame

S1, S2 = "20260101T000000Z-mutate-1", "20260102T000000Z-mutate-2"
MUST = next(m for m in CATALOGUE if not m.should and not m.equivalent)
SHOULD = next(m for m in CATALOGUE if m.should and not m.equivalent)
EQUIV = next(m for m in CATALOGUE if m.equivalent)


def mrec(mutant: str, case_id: str, verdict: str, session: str = S1, t: str = "2026-01-01T00:00:01.000Z",
         **extra: Any) -> dict[str, Any]:
    return record(case_id=case_id, verdict=verdict, time=t, run_id=f"{session}-{mutant}",
                  broker_product="amqp-conformance reference broker", broker_version="0.1.0",
                  extra={"mutant": mutant, "mutate_session": session, "url": "amqp://g:***@h:1/", **extra})


# one session: baseline, a MUST mutant killed by FAIL and TIMEOUT (not by ERROR nor by a case that
# already failed without the fault), a SHOULD mutant killed by NON_STRICT only, a MUST mutant that
# NON_STRICT does not kill, an equivalent mutant, a tainted run, a run stopped at its deadline
RECORDS = [
    mrec("none", "a.one", "PASS"),
    mrec("none", "a.two", "PASS"),
    mrec("none", "a.bad", "FAIL"),
    mrec("none", "a.ns", "NON_STRICT"),
    mrec("none", "a.err", "PASS"),
    mrec(MUST.id, "a.one", "FAIL"),
    mrec(MUST.id, "a.two", "TIMEOUT"),
    mrec(MUST.id, "a.bad", "FAIL"),
    mrec(MUST.id, "a.err", "ERROR"),
    mrec(MUST.id, "a.new", "FAIL"),
    mrec(SHOULD.id, "a.one", "NON_STRICT"),
    mrec(SHOULD.id, "a.ns", "NON_STRICT"),
    mrec(SHOULD.id, "a.two", "PASS"),
    mrec("x.must-ns", "a.one", "NON_STRICT"),
    mrec("x.must-ns", "a.two", "PASS"),
    mrec(EQUIV.id, "a.one", "PASS"),
    mrec(
        "x.tainted",
        "a.one",
        "FAIL",
        mutant_tainted="true",
        mutant_problem="the proxy's fault failed 1 time(s): boom",
    ),
    mrec(
        "x.deadline",
        "a.one",
        "PASS",
        mutant_problem="the run passed its 150s deadline and was stopped; hung in t",
    ),
]


def runner_view(records: list[dict[str, Any]], session: str = S1) -> dict[str, Any]:
    """What the mutate command itself concludes from the same records (its judge and summarise)."""
    by_mutant: dict[str, dict[str, str]] = {}
    for r in records:
        if r["extra"]["mutate_session"] == session:
            by_mutant.setdefault(r["extra"]["mutant"], {})[r["case_id"]] = r["verdict"]
    base = by_mutant.pop("none")
    known = {m.id: m for m in CATALOGUE}
    out = {}
    for mid, verdicts in by_mutant.items():
        extra = next(
            r["extra"]
            for r in records
            if r["extra"]["mutant"] == mid and r["extra"]["mutate_session"] == session
        )
        m = known.get(mid) or type(MUST)(mid, "", "", ("a",), MUST.make)
        run = RunOutcome(
            verdicts, extra.get("mutant_problem", ""), 1.0, extra.get("mutant_tainted") == "true"
        )
        out[mid] = judge(m, run, base)
    return out


def test_mutation_tables_judge_each_mutant_as_the_mutate_command_does(spark: SparkSession) -> None:
    results = results_frame(spark, RECORDS)
    cases = power.mutation_cases(power.mutation_runs(results), edges.mutants_frame(spark)).cache()
    outcomes = power.mutant_outcomes(cases).cache()
    got = {r["mutant"]: r for r in outcomes.collect()}
    expected = runner_view(RECORDS)
    assert set(got) == set(expected)
    for mid, res in expected.items():
        row = got[mid]
        assert row["outcome"] == res.outcome, mid
        assert [Kill(k["case_id"], k["verdict"], k["baseline"]) for k in row["kills"]] == list(res.kills), mid
        assert row["n_cases"] == res.cases and tuple(row["errors"]) == res.errors, mid
        assert row["latest"] and row["mutate_session"] == S1
    # spelled out, so the test does not only agree with the runner
    assert got[MUST.id]["outcome"] == "KILLED"
    assert [(k["case_id"], k["verdict"], k["baseline"]) for k in got[MUST.id]["kills"]] == [
        ("a.new", "FAIL", "-"), ("a.one", "FAIL", "PASS"), ("a.two", "TIMEOUT", "PASS")]
    assert list(got[MUST.id]["errors"]) == ["a.err"]
    assert [k["case_id"] for k in got[SHOULD.id]["kills"]] == ["a.one"]
    assert got["x.must-ns"]["outcome"] == "SURVIVED" and got["x.must-ns"]["category"] == "x"
    assert got[EQUIV.id]["outcome"] == "EQUIVALENT"
    assert got["x.tainted"]["outcome"] == "NO-RESULT" and got["x.tainted"]["n_cases"] == 0
    assert got["x.deadline"]["outcome"] == "NO-RESULT" and "deadline" in got["x.deadline"]["problem"]
    assert cases.where(F.col("mutant") == "none").count() == 0  # the baseline is no mutant

    scores = {r["category"]: r.asDict() for r in power.mutation_scores(outcomes).collect()}
    want = summarise(list(expected.values()), 0.0)["categories"]
    for cat, c in want.items():  # type: ignore[attr-defined]
        s = scores[cat]
        assert (s["n_mutants"], s["n_killed"], s["n_survived"], s["n_equivalent"], s["n_no_result"]) == (
            c["mutants"], c["killed"], c["survived"], c["equivalent"], c["no_result"]), cat
        counted = c["mutants"] - c["equivalent"]
        assert s["score"] == (round(c["killed"] / counted, 4) if counted else None)
    assert scores["x"]["score"] == 0.0  # x.must-ns survived; tainted and deadline runs killed nothing


def test_the_latest_session_of_a_mutant_is_the_one_scored(spark: SparkSession) -> None:
    later = [mrec("none", "a.one", "PASS", S2, "2026-01-02T00:00:01.000Z"),
             mrec(MUST.id, "a.one", "PASS", S2, "2026-01-02T00:00:02.000Z")]
    results = results_frame(spark, RECORDS + later)
    outcomes = power.mutant_outcomes(
        power.mutation_cases(power.mutation_runs(results), edges.mutants_frame(spark))
    )
    rows = {
        (r["mutant"], r["mutate_session"]): r for r in outcomes.where(F.col("mutant") == MUST.id).collect()
    }
    assert rows[(MUST.id, S1)]["outcome"] == "KILLED" and not rows[(MUST.id, S1)]["latest"]
    assert rows[(MUST.id, S2)]["outcome"] == "SURVIVED" and rows[(MUST.id, S2)]["latest"]
    score = power.mutation_scores(outcomes).where(F.col("category") == MUST.category).first()
    assert score is not None and score["n_survived"] >= 1


def test_mutation_records_stay_out_of_compliance(spark: SparkSession) -> None:
    normal = [
        record(case_id="a.one", verdict="PASS", run_id="r1"),
        record(case_id="a.two", verdict="FAIL", run_id="r1"),
    ]
    results = results_frame(spark, normal + RECORDS)
    assert results.count() == len(normal) + len(RECORDS)
    kept = parsing.normal_runs(results)
    assert sorted(r["case_id"] for r in kept.collect()) == ["a.one", "a.two"]
    assert power.mutation_runs(results).count() == len(RECORDS)
    latest = compliance.latest_verdicts(kept)
    assert {r["broker"] for r in compliance.broker_summary(kept, latest).collect()} == {"RabbitMQ@3.13.0"}
    # the same case id through a mutant does not make the case flaky
    assert history.flaky_cases(history.case_history(kept)).count() == 0


def test_parsed_rows_have_the_store_schema(spark: SparkSession) -> None:
    parsed = parsing.valid_results(
        parsing.parse_lines(lines_frame(spark, [json.dumps(r) for r in RECORDS[:2]]))
    )
    assert [(f.name, f.dataType) for f in parsed.schema.fields] == [
        (f.name, f.dataType) for f in RESULTS_STRUCT.fields
    ]
    row = parsed.first()
    assert (
        row is not None
        and row["mutant"] == "none"
        and row["mutate_session"] == S1
        and row["mutant_tainted"] is None
    )


def test_power_section_renders_outcomes_kills_and_the_chart(spark: SparkSession) -> None:
    from conformance.report.pipeline import collect_all, mutation_summary
    from conformance.report.tables import BY_NAME, Frames

    results = results_frame(spark, RECORDS)
    loaded = edges.Loaded(parsed=results, results=results, files=[], n_valid=len(RECORDS), n_malformed=0,
                          malformed=results.limit(0))
    frames = Frames(spark, loaded)
    collects: dict[str, Any] = {}
    for name in ("mutation_cases", "mutants", "mutation_scores"):
        view_of = BY_NAME[name].view
        assert view_of is not None
        collects.update(view_of(frames[name], frames))
    view = collect_all(collects)
    html = page.section_power(view)
    assert 'id="power"' in html and "<svg" in html and "mutation score per area" in html
    assert (
        f"<code>{MUST.id}</code>" in html
        and ">KILLED<" in html
        and ">SURVIVED<" in html
        and ">NO-RESULT<" in html
    )
    assert "<code>a.two</code>" in html and ">TIMEOUT<" in html and "ERROR (not a kill): a.err" in html
    # the catalogue's rules cite documents by title, never by internal file name
    assert re.search(r"\b\d{3}_[0-9a-f]{16}\.txt", html) is None and "RabbitMQ" in html
    summary = mutation_summary(view)
    (b,) = summary["brokers"]
    assert b["broker"] == "amqp-conformance reference broker@0.1.0"
    assert b["not_killed"] == sorted(["x.must-ns", "x.tainted", "x.deadline"])
    assert b["n_mutants"] == 6 and b["n_equivalent"] == 1 and b["n_killed"] == 2
    assert b["score"] == round(2 / 5, 4)
    assert page.section_power({"mutation_brokers": []}).count("No mutation runs") == 1


def test_a_mutate_summary_names_its_results_and_folders_skip_summaries(tmp_path: Path) -> None:
    (tmp_path / "s.jsonl").write_text(json.dumps(RECORDS[0]) + "\n")
    (tmp_path / "s.summary.json").write_text("{}\n")
    assert edges.resolve_inputs([str(tmp_path / "s.summary.json")]) == [str((tmp_path / "s.jsonl").resolve())]
    assert edges.resolve_inputs([str(tmp_path)]) == [str((tmp_path / "s.jsonl").resolve())]
    assert edges.resolve_inputs([str(tmp_path / "s.*")]) == [str((tmp_path / "s.jsonl").resolve())]
    (tmp_path / "s.jsonl").unlink()
    with pytest.raises(edges.InputProblem, match=r"results file s\.jsonl is not beside it"):
        edges.resolve_inputs([str(tmp_path / "s.summary.json")])
