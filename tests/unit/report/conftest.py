"""One local[1] SparkSession for the whole report test session, plus builders of input frames."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from conformance.report.schema import LINES_SCHEMA  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from conformance.report.session import EnvironmentProblem, build_session, check_java

    try:
        check_java()
    except EnvironmentProblem as exc:
        pytest.skip(f"Spark tests need Java 17+: {exc}")
    session = build_session("local[1]", app_name="amqp-conformance-tests", small_input=True)
    # Tiny frames: one shuffle partition and no adaptive re-planning keep each job short; no
    # whole-stage code generation either (Spark's own fallback, the same results): compiling a
    # class per stage costs more than the few rows it then runs over (the Spark modules of
    # test_stages, test_power and test_cluster 74-82 s with it off, 99-109 s on; load 6-8).
    session.conf.set("spark.sql.shuffle.partitions", "1")
    session.conf.set("spark.sql.adaptive.enabled", "false")
    session.conf.set("spark.sql.codegen.wholeStage", "false")
    yield session
    session.stop()


GOLDEN = Path(__file__).resolve().parents[3] / "fixtures" / "results"


@pytest.fixture(scope="session")
def golden_report(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any], list[str]]:
    """The report over the golden result sets (fixtures/results/) as ``report`` builds it: its
    folder, summary and progress lines. Built once: test_golden reads it, test_store compares the
    report from a store of the same files with it (tests/conftest.py keeps both on one worker)."""
    from conformance.report.pipeline import run_report

    out = tmp_path_factory.mktemp("golden") / "golden"
    lines: list[str] = []
    summary = run_report(spark, [str(GOLDEN)], out, progress=lines.append)
    return out, summary, lines


BASE: dict[str, Any] = {
    "run_id": "run-1",
    "time": "2024-05-01T00:00:00.000Z",
    "target": "url",
    "broker_product": "RabbitMQ",
    "broker_version": "3.13.0",
    "broker_platform": "Erlang/OTP 26",
    "client": "raw",
    "client_version": "0.1",
    "case_id": "acks.double-ack-406",
    "area": "acks",
    "rules": ["basic.ack/exists"],
    "level": "MUST",
    "profile": "rabbitmq",
    "verdict": "PASS",
    "expected": "406",
    "observed": "406",
    "duration_s": 0.1,
    "message": "",
    "nodeid": "n",
    "worker": "main",
    "schema": 1,
    "extra": {},
}


def record(**over: Any) -> dict[str, Any]:
    """A result record: BASE with ``over`` applied; ``area`` follows ``case_id`` unless given."""
    rec = {**BASE, **over}
    if "area" not in over:
        rec["area"] = rec["case_id"].split(".", 1)[0]
    return rec


def tx(case_id: str, observed: str, **over: Any) -> dict[str, Any]:
    row = case_id.split(".")[1]
    return record(case_id=case_id, extra={"tx_row": row, "tx_observed": observed}, **over)


def lines_frame(spark: SparkSession, lines: list[str], file: str = "file:///r/a.jsonl") -> DataFrame:
    return spark.createDataFrame([(v, file, 0, i) for i, v in enumerate(lines)], LINES_SCHEMA)


def results_frame(spark: SparkSession, records: list[dict[str, Any]]) -> DataFrame:
    """Valid result rows built the way the pipeline builds them (JSON text → parse)."""
    from conformance.report import parsing

    parsed = parsing.parse_lines(lines_frame(spark, [json.dumps(r) for r in records]))
    return parsing.valid_results(parsed)


def chromium() -> str | None:
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else shutil.which("chromium")
