"""The report's routing table section: which rows each broker breaks, read from the view's routing
cells (every routing.* cell of the matrix's brokers, not the page's bounded matrix)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pyspark.sql import SparkSession

from conformance.model.routing_table import rows
from conformance.report import page, tables
from conformance.report.routing_table import routing_context

from .conftest import record


def _cell(case_id: str, broker: str, verdict: str, observed: str = "") -> dict[str, object]:
    return {"case_id": case_id, "broker": broker, "verdict": verdict, "observed": observed, "expected": "x",
            "message": ""}


def test_broken_rows_per_broker_with_expected_and_observed() -> None:
    view = {"matrix_brokers": ["rabbitmq@3.10.8", "garagemq@0.1"], "matrix": [], "routing_cells": [
        _cell("routing.direct-two-queues-same-key", "rabbitmq@3.10.8", "PASS"),
        _cell("routing.direct-two-queues-same-key", "garagemq@0.1", "FAIL", "{'q1': 1, 'q2': 0}"),
        _cell("routing.oracle-direct", "garagemq@0.1", "FAIL", "910 differences"),
        _cell("routing.local-random-one-of-two", "garagemq@0.1", "UNSUPPORTED"),
        _cell("queue.delete-if-empty-406", "garagemq@0.1", "FAIL"),  # not a routing case
    ]}
    ctx = routing_context({}, view)
    by = {b["broker"]: b for b in ctx["by_broker"]}
    assert by["rabbitmq@3.10.8"]["broken"] == [] and by["rabbitmq@3.10.8"]["passed"] == 1
    broken = by["garagemq@0.1"]["broken"]
    assert [r["case_id"] for r in broken] == ["routing.direct-two-queues-same-key", "routing.oracle-direct"]
    assert broken[0]["family"] == "direct" and "q2 get one copy each" in broken[0]["expected"]
    assert broken[0]["observed"] == "{'q1': 1, 'q2': 0}" and broken[1]["family"] == "oracle"
    assert by["garagemq@0.1"]["unsupported"] == 1 and by["garagemq@0.1"]["oracle_seen"] == 1
    html = page.render_section("routing", {}, view)
    assert "Routing table per broker" in html and "routing.direct-two-queues-same-key" in html


def test_no_routing_case_no_section() -> None:
    assert page.render_section("routing", {}, {"matrix_brokers": ["b"], "matrix": [],
                                                "routing_cells": []}).strip() == ""


def test_a_report_past_the_matrix_bound_shows_every_routing_row(spark: SparkSession, tmp_path: Path) -> None:
    """More non-PASS cases than the page's matrix keeps (MAX_MATRIX_CASES, worst first): every PASS
    routing row is out of the matrix, and the routing section still counts each of them, of each
    broker, as the report builds it."""
    from conformance.report.pipeline import run_report

    routing = [r.case_id for r in rows()]
    extra = tables.MAX_MATRIX_CASES + 10
    lines = []
    for run, (product, version) in enumerate([("RabbitMQ", "3.10.8"), ("garagemq", "0.1")]):
        common = {"run_id": f"r{run}", "broker_product": product, "broker_version": version}
        lines += [record(case_id=f"queue.filler-{i:03d}", verdict="FAIL", **common) for i in range(extra)]
        lines += [record(case_id=c, verdict="PASS", **common) for c in routing]
    lines.append(record(case_id=routing[0], verdict="FAIL", observed="{'q1': 0}", run_id="r1",
                        broker_product="garagemq", broker_version="0.1", time="2024-05-01T00:01:00.000Z"))
    src = tmp_path / "results.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    run_report(spark, [str(src)], tmp_path / "out", progress=lambda _: None)
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    matrix = html[html.index('id="matrix"'):]
    matrix = matrix[:matrix.index("</section>")]
    assert "routing." not in matrix.replace(routing[0], "")  # the cap is in force: PASS rows left out
    section = html[html.index('id="routing"'):]
    section = section[:section.index("</section>")]
    counts = re.findall(r"(\d+) broken · (\d+) PASS · \d+ UNSUPPORTED · (\d+) of the table's (\d+) rows",
                        section)
    n = len(routing)
    assert sorted(counts) == sorted([("0", str(n), str(n), str(n)), ("1", str(n - 1), str(n), str(n))])
    assert routing[0] in section and "{&#39;q1&#39;: 0}" in section
