from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.model.results import (
    FIELD_NAMES,
    REQUIRED_FIELDS,
    ResultRecord,
    ResultsWriter,
    merge_parts,
    part_path,
    read_records,
)


def rec(case_id: str, verdict: str = "PASS", worker: str = "gw0") -> ResultRecord:
    return ResultRecord(run_id="r1", time="2026-01-01T00:00:00.000Z", target="reference", broker_product="p",
                        broker_version="1", broker_platform="x", client="raw", client_version="v",
                        case_id=case_id, area=case_id.split(".")[0], rules=["basic.ack/exists"], level="MUST",
                        profile="rabbitmq", verdict=verdict, expected="406", observed="406", duration_s=0.1,
                        message="", worker=worker)


def test_parts_merge_into_one_file_per_run(tmp_path: Path) -> None:
    w0 = ResultsWriter(part_path(tmp_path, "r1", "gw0"))
    w1 = ResultsWriter(part_path(tmp_path, "r1", "gw1"))
    w0.write(rec("acks.a"))
    w1.write(rec("acks.b", "FAIL", "gw1"))
    w0.write(rec("acks.c"))
    w0.close()
    w1.close()
    out = merge_parts(tmp_path, "r1")
    assert out == tmp_path / "r1.jsonl"
    assert not list(tmp_path.glob("*.part.jsonl"))
    rows = list(read_records([out]))
    assert sorted(r["case_id"] for r in rows) == ["acks.a", "acks.b", "acks.c"]
    assert {r["verdict"] for r in rows} == {"PASS", "FAIL"}
    assert set(rows[0]) == set(FIELD_NAMES)
    assert set(REQUIRED_FIELDS) <= set(FIELD_NAMES)


def test_each_line_is_flushed_as_written(tmp_path: Path) -> None:
    w = ResultsWriter(tmp_path / "x.jsonl")
    w.write(rec("acks.a"))
    assert json.loads((tmp_path / "x.jsonl").read_text())["case_id"] == "acks.a"
    w.close()


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(rec("acks.a").to_json() + "\n{not json\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        list(read_records([p]))
