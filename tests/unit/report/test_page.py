"""Page pieces rendered without Spark: trace, title, drill-down, rule status of a subset run."""

from __future__ import annotations

import json

from conformance.report import page, tables


def test_trace_lines_keep_the_last_frames_and_escape() -> None:
    frames = [{"t": f"0.{i:03d}", "dir": "<-" if i % 2 else "->", "channel": 1, "frame": f"basic.ack tag={i}"}
              for i in range(250)]
    html = page.render_trace(json.dumps(frames))
    assert html.startswith('<pre class="trace">(50 earlier frames not shown)')
    assert "t=0.249  &lt;-  channel=1  basic.ack tag=249" in html and "tag=49<" not in html
    assert page.render_trace(json.dumps(["C->S connection.start-ok", "S->C <b>"])) == (
        '<pre class="trace">C-&gt;S connection.start-ok\nS-&gt;C &lt;b&gt;</pre>')
    assert page.render_trace("not json\nsecond") == '<pre class="trace">not json\nsecond</pre>'
    assert page.render_trace(None) == ""


def test_title_names_the_brokers() -> None:
    view = {"brokers": [{"broker": f"b@{i}"} for i in range(6)], "n_brokers": 9}
    assert page.broker_title(view) == "b@0, b@1, b@2, b@3 and 5 more"
    assert (
        page.broker_title({"brokers": [{"broker": "RabbitMQ@3.10.8"}], "n_brokers": 1}) == "RabbitMQ@3.10.8"
    )


def test_drilldown_has_description_expectation_rule_text_and_source_links() -> None:
    case = next(c for c in page.case_catalogue().values() if c["rules"] and any(
        s.startswith("001_27f7ea2622bbc99f.txt#tx") for s in c["sources"]))
    html = page.case_drilldown(case["id"])
    assert page.e(case["expectation"]) in html
    rule = page.spec_rules()[case["rules"][0]][0]
    assert page.e(rule.doc) in html
    assert '<a class="src" href="https://www.rabbitmq.com/docs/semantics#tx"' in html
    assert "001_27f7ea2622bbc99f" not in html
    assert "Not a case of this version" in page.case_drilldown("no.such-case")


def test_a_subset_run_marks_unrun_rules_not_run_rather_than_not_covered() -> None:
    cited = sorted({r for c in page.case_catalogue().values() for r in c["rules"]})
    rules = [
        {"rule_id": cited[0], "in_spec": True, "rule_level": "MUST", "n_elements": 1, "n_brokers": 0,
         "worst_verdict": None, "n_pass": 0, "n_other": 0, "cases": ""},
        {"rule_id": "zzz/never-cited", "in_spec": True, "rule_level": "MUST", "n_elements": 1, "n_brokers": 0,
         "worst_verdict": None, "n_pass": 0, "n_other": 0, "cases": ""},
    ]
    summary = {"rule_coverage": {"covered": 0, "rule_ids": 2, "rule_elements": 2}}
    html = page.section_rules(summary, {"rules": rules})
    assert html.count(">not run here<") == 1 and html.count(">not covered<") == 1
    assert "1 rule id(s) are checked by cases of the suite that these inputs did not run" in html


def test_every_section_a_table_names_is_declared_once() -> None:
    keys = [s.key for s in page.SECTIONS]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(tables.sections()) | {"routing"}  # routing: read from the matrix
    templates = set(page.environment().list_templates())
    assert {f"sections/{k}.html.j2" for k in keys} <= templates
