"""The result record's JSON Schema: shipped with the package, made from the dataclass, and it holds
for the records the suite writes and refuses what no writer writes."""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from conformance.model.record_schema import DESCRIPTIONS, record_schema, render, shipped_schema
from conformance.model.results import ResultRecord

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "conformance" / "data" / "result-record.schema.json"
REGENERATE = "python -m conformance.model.record_schema > conformance/data/result-record.schema.json"


def validator() -> Draft202012Validator:
    return Draft202012Validator(shipped_schema())


def record(**changes: Any) -> dict[str, Any]:
    rec = ResultRecord(
        run_id="r1", time="2026-11-25T11:40:20.342Z", target="reference", broker_product="RabbitMQ",
        broker_version="3.10.8", broker_platform="Erlang/OTP", client="raw", client_version="pamqp 4.0.0",
        case_id="acks.double-ack-406", area="acks", rules=["basic.ack/01"], level="MUST", profile="rabbitmq",
        verdict="FAIL", expected="channel.close 406", observed="nothing", duration_s=0.5, message="m",
        extra={"trace": [{"dir": "in", "frame": "basic.ack"}]}, queue_type="classic",
    )
    return {**asdict(rec), **changes}


def test_the_shipped_schema_is_the_one_the_dataclass_gives() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == render(), f"regenerate it: {REGENERATE}"
    assert shipped_schema() == record_schema()


def test_every_field_is_described_and_nothing_else() -> None:
    names = [f.name for f in fields(ResultRecord)]
    assert list(record_schema()["properties"]) == names
    assert set(DESCRIPTIONS) == set(names)


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(shipped_schema())


def test_what_the_writer_writes_is_valid() -> None:
    v = validator()
    assert not list(v.iter_errors(json.loads(ResultRecord(**record()).to_json())))  # type: ignore[arg-type]
    assert not list(v.iter_errors(record(queue_type=None, extra={})))


@pytest.mark.parametrize("path", ["fixtures/baselines/garagemq.jsonl",
                                  "fixtures/results/rabbitmq-3.12.0.jsonl",
                                  "fixtures/results/rabbitmq-3.13.0.jsonl"])
def test_committed_results_are_valid(path: str) -> None:
    v = validator()
    lines = [ln for ln in (ROOT / path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    bad = [(i, e.message) for i, ln in enumerate(lines, 1) for e in v.iter_errors(json.loads(ln))]
    assert lines and not bad


@pytest.mark.parametrize(("changes", "drop", "word"), [
    ({"verdict": "MAYBE"}, None, "MAYBE"),
    ({"level": "MUSTN'T"}, None, "MUSTN'T"),
    ({"duration_s": "fast"}, None, "fast"),
    ({"duration_s": -1}, None, "minimum"),
    ({"rules": "basic.ack/01"}, None, "array"),
    ({"schema": 2}, None, "1"),
    ({"verdct": "PASS"}, None, "verdct"),
    ({}, "case_id", "case_id"),
])
def test_what_no_writer_writes_is_refused(changes: dict[str, Any], drop: str | None, word: str) -> None:
    rec = record(**changes)
    if drop:
        del rec[drop]
    errors = [e.message for e in validator().iter_errors(rec)]
    assert errors and any(word in e for e in errors), errors


def test_the_schema_ships_with_the_package_and_jsonschema_is_a_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "data/*.json" in project["tool"]["setuptools"]["package-data"]["conformance"]
    assert any(dep.startswith("jsonschema") for dep in project["project"]["dependencies"])


def test_readers_name_the_field_the_schema_refuses() -> None:
    from conformance.model.record_schema import schema_problem

    assert schema_problem(record()) is None
    assert schema_problem(record(verdict="MAYBE")) == "unknown verdict 'MAYBE'"
    assert schema_problem(record(duration_s="slow")) == "missing or mistyped duration_s"
    rec = record()
    del rec["case_id"]
    assert schema_problem(rec) == "missing or mistyped case_id"
    assert schema_problem(record(surprise=1)) is not None  # no field a writer never writes
