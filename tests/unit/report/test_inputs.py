"""Inputs checked before Spark: missing, empty and record-less files fail at once, without pyspark."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.report.inputs import InputProblem, check_contents, record_problem, resolve_inputs

GOOD = {"run_id": "r", "time": "2024-05-01T00:00:00Z", "target": "url", "broker_product": "B",
        "broker_version": "1", "case_id": "a.b", "area": "a", "level": "MUST", "profile": "spec",
        "verdict": "PASS"}


def test_record_problem_names_what_is_wrong() -> None:
    assert record_problem(json.dumps(GOOD)) is None
    assert record_problem("hello") == "not a valid JSON object"
    assert record_problem("[1]") == "not a valid JSON object"
    assert record_problem('{"x": 1}') == "JSON without any result field"
    assert record_problem(json.dumps({**GOOD, "verdict": None})) == "missing or mistyped field(s): verdict"
    assert record_problem(json.dumps({**GOOD, "verdict": "MEH"})) == "unknown verdict MEH"
    # the rest by the shipped JSON Schema (jsonschema): a field's type, a field no writer writes
    assert record_problem(json.dumps({**GOOD, "duration_s": "slow"})) == "missing or mistyped duration_s"
    assert record_problem(json.dumps({**GOOD, "surprise": 1})) is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"is empty: no result records"),
        ("\n  \n", r"is empty: no result records"),
        ('hello\n{"a": 1}\n',
         r"not a results file: none of its 2 lines is a result record \(line 1: not a valid"),
    ],
)
def test_unusable_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text(text)
    with pytest.raises(InputProblem, match=message):
        check_contents(resolve_inputs([str(f)]))


def test_a_file_with_one_record_passes_and_spark_judges_the_rest(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl.gz"
    with gzip.open(f, "wt") as fh:
        fh.write("garbage\n" + json.dumps(GOOD) + "\n")
    check_contents([str(f)])
    check_contents(["hdfs://nn/x.jsonl"])  # not local: Spark reads it


def test_report_of_an_empty_file_exits_2_without_pyspark(tmp_path: Path) -> None:
    empty = tmp_path / "r.jsonl"
    empty.write_text("")
    code = (
        "import sys; from conformance.report.cli import report_main; rc = report_main(sys.argv[1:]); "
        "assert 'pyspark' not in sys.modules, 'pyspark imported'; sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(empty), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    want = f"amqp-conformance report: {empty} is empty: no result records"
    assert proc.stderr.strip().splitlines() == [want]


def test_faults_records_are_not_malformed(tmp_path: Path) -> None:
    line = json.dumps({"record": "faults.summary", "run_id": "f1", "queue_type": "quorum"})
    assert record_problem(line) is None
    only = tmp_path / "faults-f1-quorum.jsonl"
    only.write_text(line + "\n")
    check_contents([str(only)])  # a folder of suite results and faults runs is read as it is
    assert record_problem(json.dumps({"record": "other", "run_id": "f1"})) is not None


def test_are_small_decides_the_jvm_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import conformance.report.inputs as inputs

    run = tmp_path / "run.jsonl"
    run.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    assert inputs.are_small([str(run)]) and inputs.are_small([str(tmp_path)])
    store = tmp_path / "store"
    (store / "results").mkdir(parents=True)
    (store / inputs.MANIFEST).write_text("{}", encoding="utf-8")
    (store / "results" / "part-0.parquet").write_bytes(b"x" * 1000)
    assert inputs.are_small([str(store)]) and inputs.are_small([str(run), str(store)])
    monkeypatch.setattr(inputs, "SMALL_INPUT_BYTES", 7999)  # a store counts 8× its bytes on disk
    assert not inputs.are_small([str(store)]) and inputs.are_small([str(run)])
    monkeypatch.setattr(inputs, "SMALL_INPUT_BYTES", run.stat().st_size - 1)
    assert not inputs.are_small([str(run)])
    assert not inputs.are_small([str(tmp_path / "missing.jsonl")])  # the report says why, not this
