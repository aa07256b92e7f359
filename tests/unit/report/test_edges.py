"""The edges: input resolution, the Java check, the input schema, the synthetic generator."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks import synth
from conformance.model.results import ResultRecord
from conformance.report import edges, tx_table
from conformance.report.cli import parse_selector
from conformance.report.schema import RESULT_SCHEMA
from conformance.report.session import EnvironmentProblem, check_java, local_cores, parse_java_major

ROOT = Path(__file__).resolve().parents[3]


def test_input_schema_mirrors_the_result_record() -> None:
    assert RESULT_SCHEMA.fieldNames() == [f.name for f in fields(ResultRecord)]


def test_tx_table_is_the_seed_document() -> None:
    assert tx_table.ROWS == (
        "publish", "ack", "reject", "declare-delete-bind", "consume-get", "atomicity-single-queue",
        "atomicity-multi-queue", "error-detection", "no-route-return", "effect-visibility",
    )
    assert tx_table.TX_TABLE["reject"] == {
        "amqp-0-9-1": "no",
        "rabbitmq<2.6": "no",
        "rabbitmq-2.6-2.7.1": "no",
        "rabbitmq>=2.8": "yes",
    }
    assert tx_table.TX_TABLE["no-route-return"] == {
        "amqp-0-9-1": "undefined",
        "rabbitmq<2.6": "immediate",
        "rabbitmq-2.6-2.7.1": "on commit",
        "rabbitmq>=2.8": "on commit",
    }
    assert tx_table.TX_TABLE["atomicity-single-queue"]["amqp-0-9-1"] == "yes"
    assert all(v in tx_table.VALUES for row in tx_table.TX_TABLE.values() for v in row.values())
    assert tx_table.matches("undefined", "immediate") and not tx_table.matches("no", "yes")


def test_resolve_inputs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "r1.jsonl").write_text("{}\n", encoding="utf-8")
    (tmp_path / "a" / "deep").mkdir()
    (tmp_path / "a" / "deep" / "r2.jsonl").write_text("{}\n", encoding="utf-8")
    (tmp_path / "a" / "notes.txt").write_text("x\n", encoding="utf-8")
    a1, a2 = str(tmp_path / "a" / "r1.jsonl"), str(tmp_path / "a" / "deep" / "r2.jsonl")
    assert edges.resolve_inputs([str(tmp_path / "a")]) == [a2, a1]
    assert edges.resolve_inputs([str(tmp_path / "a" / "*.jsonl"), a1]) == [a1]
    assert edges.resolve_inputs(["hdfs://nn/results/"]) == ["hdfs://nn/results/"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(edges.InputProblem, match="no results files"):
        edges.resolve_inputs([str(tmp_path / "empty")])
    with pytest.raises(edges.InputProblem, match=r"^no such results file or folder: .*missing\.jsonl$"):
        edges.resolve_inputs([str(tmp_path / "missing.jsonl")])
    with pytest.raises(edges.InputProblem, match="no results file matches"):
        edges.resolve_inputs([str(tmp_path / "*.nothing")])
    with pytest.raises(edges.InputProblem, match="no results inputs given"):
        edges.resolve_inputs([])


def test_selectors() -> None:
    assert parse_selector("run:abc").kind == "run"
    b = parse_selector("broker:RabbitMQ@3.13.0")
    assert (b.kind, b.product, b.value) == ("broker", "RabbitMQ", "3.13.0")
    assert parse_selector("fixtures/baseline.jsonl").kind == "path"
    assert parse_selector("C:/x.jsonl").kind == "path"
    with pytest.raises(ValueError, match="names no version"):
        parse_selector("version:")


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_402"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ('openjdk version "11.0.2" 2019-01-15', 11),
        ("garbage", None),
    ],
)
def test_parse_java_major(text: str, major: int | None) -> None:
    assert parse_java_major(text) == major


def _fake_java(tmp_path: Path, version: str) -> str:
    java = tmp_path / "java"
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2019-01-15\' >&2\n', encoding="utf-8")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return str(java)


def test_check_java_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a passed check is remembered in the cache (session._checked_mark): a temporary one, not the user's
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert check_java(_fake_java(tmp_path, "17.0.1")) == 17
    assert [p.suffix for p in (tmp_path / "cache" / "amqp-conformance").iterdir()] == [".ok"]
    with pytest.raises(
        EnvironmentProblem, match=r"^Spark needs Java 17\+ but .* is Java 11; install a Java 17\+ runtime"
    ):
        check_java(_fake_java(tmp_path, "11.0.2"))
    with pytest.raises(EnvironmentProblem, match="cannot run"):
        check_java(str(tmp_path / "nope"))


def test_local_cores() -> None:
    assert local_cores("local[2]") == 2
    assert local_cores("local") == 1
    assert local_cores("local[*]") == (os.cpu_count() or 2)


def test_missing_java_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # python, but no java
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.report",
            "report",
            str(ROOT / "fixtures" / "results"),
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "amqp-conformance report: Spark needs Java 17+ but no java on PATH was found; install a "
        "Java 17+ runtime"
    )


def test_synthetic_results_parse_and_hold_flaky_cases_and_regressions(
    spark: SparkSession, tmp_path: Path
) -> None:
    cases = synth.builtin_cases()
    assert 140 <= len(cases) <= 170
    assert {c.area for c in cases} == {
        "confirms",
        "tx",
        "ordering",
        "reject",
        "nack",
        "recover",
        "exclusive",
        "acks",
        "returns",
        "qos",
        "errors",
        "durability",
    }
    assert {c.tx_row for c in cases if c.tx_row} == set(tx_table.ROWS)
    synth.write_jsonl(synth.generate(spark, 6000, cases=cases, malformed=2), tmp_path / "r", files=2)
    loaded = edges.load_results(spark, edges.resolve_inputs([str(tmp_path / "r")]))
    try:
        assert (loaded.n_valid, loaded.n_malformed) == (5998, 2)
        row = loaded.results.agg(
            F.count(F.when(F.col("tx_row").isNotNull() & F.col("tx_observed").isNull(), 1)).alias(
                "tx_without_value"
            ),
            F.count_distinct("broker").alias("brokers"),
            F.collect_set("verdict").alias("verdicts"),
        ).first()
        assert row is not None
        assert (row["tx_without_value"], row["brokers"]) == (0, 25)
        assert set(row["verdicts"]) >= {"PASS", "FAIL", "NON_STRICT", "UNSUPPORTED", "INFORMATIONAL"}
    finally:
        loaded.close()
