"""The results store: ingest once per run id, malformed lines kept aside, a report from it equal
to the report from the files, and a half-written ingest invisible."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from conformance.report import store
from conformance.report.pipeline import run_report

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "fixtures" / "results"
RUNS = ("20240501T020000Z-r1", "20240502T020000Z-r2", "20240503T020000Z-r3", "20240504T030000Z-g1")


@pytest.fixture(scope="module")
def golden_store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("store")
    # Two ingests: 3.12 first, then everything (3.12's runs must not be stored twice).
    first = store.ingest(spark, [str(GOLDEN / "rabbitmq-3.12.0.jsonl")], base / "st")
    assert (first.rows_added, first.runs_added, first.runs_skipped) == (22, RUNS[:2], ())
    second = store.ingest(spark, [str(GOLDEN)], base / "st")
    assert (second.rows_added, second.runs_added, second.runs_skipped) == (23, RUNS[2:], RUNS[:2])
    assert second.malformed_added == 1
    return base / "st"


def test_manifest_lists_each_run_once(golden_store: Path) -> None:
    manifest = json.loads((golden_store / "store.json").read_text())
    runs = [r for ing in manifest["ingests"] for r in ing["runs"]]
    assert sorted(runs) == list(RUNS)
    assert [ing["rows"] for ing in manifest["ingests"]] == [22, 23]
    assert store.is_store(golden_store) and not store.is_store(GOLDEN)


def test_ingesting_the_same_files_again_adds_nothing(spark: SparkSession, golden_store: Path) -> None:
    before = (golden_store / "store.json").read_text()
    again = store.ingest(spark, [str(GOLDEN)], golden_store)
    assert again.ingest_id is None and again.rows_added == 0 and again.malformed_added == 0
    assert sorted(again.runs_skipped) == list(RUNS)
    assert (golden_store / "store.json").read_text() == before


def test_store_rows_and_malformed_lines(spark: SparkSession, golden_store: Path) -> None:
    loaded = store.load_store(spark, golden_store)
    assert (loaded.n_valid, loaded.n_malformed) == (45, 1)
    assert loaded.results.count() == 45
    assert loaded.results.select("run_id").distinct().count() == 4
    assert [(e["file"], e["line"], e["reason"]) for e in loaded.examples] == [
        (str(GOLDEN / "garagemq-0.1.0.jsonl"), 5, "not a valid JSON object")]


def _comparable(summary: dict[str, Any]) -> dict[str, Any]:
    keep = ("n_brokers", "n_cases", "brokers", "flaky", "regressions", "rule_coverage", "malformed")
    out = {k: summary[k] for k in keep}
    out["tables"] = {k: v["rows"] for k, v in summary["tables"].items()}
    out["n_rows"] = summary["inputs"]["n_rows"]
    out["n_malformed"] = summary["inputs"]["n_malformed"]
    return out


def test_report_from_the_store_equals_the_report_from_the_files(
        spark: SparkSession, golden_store: Path, tmp_path: Path) -> None:
    from_files = run_report(spark, [str(GOLDEN)], tmp_path / "files")
    lines: list[str] = []
    from_store = run_report(spark, [str(golden_store)], tmp_path / "store", progress=lines.append)
    assert _comparable(from_store) == _comparable(from_files)
    assert "report: 0 input file(s), 1 store(s)" in lines


def test_a_store_and_a_file_together(spark: SparkSession, golden_store: Path, tmp_path: Path) -> None:
    extra = tmp_path / "new.jsonl"
    rec = json.loads((GOLDEN / "rabbitmq-3.13.0.jsonl").read_text().splitlines()[0])
    extra.write_text(json.dumps({**rec, "run_id": "new-run"}) + "\n")
    summary = run_report(spark, [str(golden_store), str(extra)], tmp_path / "both")
    assert summary["inputs"]["n_rows"] == 46 and summary["inputs"]["n_malformed"] == 1


def test_an_ingest_that_died_before_its_commit_is_invisible_and_cleaned(
        spark: SparkSession, golden_store: Path, tmp_path: Path) -> None:
    st = tmp_path / "st"
    shutil.copytree(golden_store, st)
    committed = next((st / "results").glob("ingest=*"))
    ghost = st / "results" / "ingest=never-committed"
    shutil.copytree(committed, ghost)
    assert store.load_store(spark, st).results.count() == 45
    other = tmp_path / "other.jsonl"
    rec = json.loads((GOLDEN / "rabbitmq-3.13.0.jsonl").read_text().splitlines()[0])
    other.write_text(json.dumps({**rec, "run_id": "other-run"}) + "\n")
    done = store.ingest(spark, [str(other)], st)
    assert done.rows_added == 1 and not ghost.exists()
    assert store.load_store(spark, st).results.count() == 46


def test_a_store_of_another_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / "store.json").write_text(json.dumps({"format": 99, "ingests": []}))
    with pytest.raises(store.StoreProblem, match="store format 99"):
        store.read_manifest(tmp_path)


def test_ingest_and_report_commands(golden_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.report.cli import report_main

    assert store.ingest_main([str(tmp_path / "missing.jsonl"), "--store", str(tmp_path / "s")]) == 2
    assert "no such results file" in capsys.readouterr().err
    assert report_main(["--store", str(GOLDEN), "--out", str(tmp_path / "r")]) == 2
    assert "is not a results store" in capsys.readouterr().err
    assert store.ingest_main([str(GOLDEN), "--store", str(golden_store), "--quiet"]) == 0
    assert "(nothing new)" in capsys.readouterr().out
    assert report_main(["--store", str(golden_store), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert "45 executions" in capsys.readouterr().out


def test_bench_report_through_the_store(spark: SparkSession, tmp_path: Path) -> None:
    from conformance.report.bench import run_bench

    figures = run_bench(3000, work=tmp_path, store=True)
    assert figures["ingest_s"] is not None and figures["ingest_s"] > 0
    manifest = json.loads((tmp_path / "store" / "store.json").read_text())
    stored = sum(ing["rows"] for ing in manifest["ingests"])
    # Every valid generated row went through the store into the report.
    assert figures["rows"] == stored > 0
    assert figures["summary"]["inputs"]["n_malformed"] == sum(ing["malformed"] for ing in manifest["ingests"])
