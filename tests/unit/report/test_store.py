"""The results store: ingest once per run id, malformed lines kept aside, a report from it equal
to the report from the files, and a half-written ingest invisible."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from conformance.report import store
from conformance.report.pipeline import run_report
from conformance.report.tables import Frames

from .test_gather import assert_same_tables

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


def test_the_aggregates_read_an_ingest_in_tasks_of_a_bounded_number_of_rows(tmp_path: Path) -> None:
    part = tmp_path / "ingest=x"
    part.mkdir()
    (part / "a.parquet").write_bytes(b"\0" * 600_000)
    (part / "b.parquet").write_bytes(b"\0" * 400_000)
    (part / "_SUCCESS").write_bytes(b"\0" * 10_000_000)  # not data: not counted
    # 1,000,000 bytes of 100,000 rows: 10 bytes a row, so 2M rows are 20 MB (within 1 to 128 MB).
    assert store.split_bytes(part, 100_000) == 1_000_000 * store.ROWS_PER_TASK // 100_000 == 20_000_000
    assert store.split_bytes(part, 10) == 128 << 20  # never above Spark's default
    assert store.split_bytes(part, 10**12) == 1 << 20  # nor below 1 MB
    assert store.split_bytes(tmp_path / "none", 0) == 1 << 20


def test_an_ingest_leaves_the_sessions_split_size_as_it_found_it(
    spark: SparkSession, golden_store: Path, tmp_path: Path
) -> None:
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    shutil.copytree(golden_store, tmp_path / "st")
    (tmp_path / "extra.jsonl").write_text(
        (GOLDEN / "rabbitmq-3.12.0.jsonl").read_text().replace("20240501T020000Z-r1", "20240601T020000Z-r9"))
    done = store.ingest(spark, [str(tmp_path / "extra.jsonl")], tmp_path / "st")
    assert done.runs_added == ("20240601T020000Z-r9",)
    assert spark.conf.get(key) == before


def test_store_rows_and_malformed_lines(spark: SparkSession, golden_store: Path) -> None:
    loaded = store.load_store(spark, golden_store)
    assert (loaded.n_valid, loaded.n_malformed) == (45, 1)
    assert loaded.results.count() == 45
    assert loaded.results.select("run_id").distinct().count() == 4
    assert [(e["file"], e["line"], e["reason"]) for e in loaded.examples] == [
        (str(GOLDEN / "garagemq-0.1.0.jsonl"), 5, "not a valid JSON object")]


def test_an_ingest_stores_neither_faults_records_nor_malformed_lines_as_rows(
        spark: SparkSession, tmp_path: Path) -> None:
    lines = (GOLDEN / "rabbitmq-3.12.0.jsonl").read_text(encoding="utf-8").splitlines()
    faults = json.dumps({"record": "faults.summary", "run_id": "f1", "time": "2024-05-01T00:00:00Z"})
    src = tmp_path / "mixed.jsonl"
    src.write_text("\n".join([lines[0], faults, "{not json", "", *lines[1:]]) + "\n", encoding="utf-8")
    done = store.ingest(spark, [str(src)], tmp_path / "st")
    assert (done.rows_added, done.runs_added, done.malformed_added) == (22, RUNS[:2], 1)
    loaded = store.load_store(spark, tmp_path / "st")
    assert [(e["line"], e["reason"]) for e in loaded.examples] == [(3, "not a valid JSON object")]
    assert sorted({r.run_id for r in loaded.results.select("run_id").collect()}) == list(RUNS[:2])
    assert not list((tmp_path / "st").glob(f"{store.PARSING}*"))


def _comparable(summary: dict[str, Any]) -> dict[str, Any]:
    keep = ("n_brokers", "n_cases", "brokers", "flaky", "regressions", "rule_coverage", "malformed")
    out = {k: summary[k] for k in keep}
    out["tables"] = {k: v["rows"] for k, v in summary["tables"].items()}
    out["n_rows"] = summary["inputs"]["n_rows"]
    out["n_malformed"] = summary["inputs"]["n_malformed"]
    return out


@pytest.fixture(scope="module")
def store_report(spark: SparkSession, golden_store: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str, str]:
    """The report command over the golden store (the general path: cached tables written by the
    executors): its folder, summary, stdout and stderr (the progress lines). One report for the
    tests of the command and of the store's report."""
    from conformance.report.cli import report_main

    out = tmp_path_factory.mktemp("store-report")
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = report_main(["--store", str(golden_store), "--out", str(out)])
    assert rc == 0, stderr.getvalue()[-2000:]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return out, summary, stdout.getvalue(), stderr.getvalue()


def test_report_from_the_store_equals_the_report_from_the_files(
        golden_report: tuple[Path, dict[str, Any], list[str]],
        store_report: tuple[Path, dict[str, Any], str, str]) -> None:
    # The files (the golden report): a small input (one action, tables written from the driver; a
    # malformed line, so Spark parses). The store: the general path (cached tables written by the
    # executors).
    files, from_files, files_lines = golden_report
    assert any(ln.startswith("report: write: ") for ln in files_lines)
    out, from_store, _, progress = store_report
    assert _comparable(from_store) == _comparable(from_files)
    assert "report: 0 input file(s), 1 store(s)" in progress.splitlines()
    assert_same_tables(files, out, nullability=False)


def test_a_clean_run_read_without_spark_gives_the_same_report(spark: SparkSession, tmp_path: Path) -> None:
    """Clean records parsed in the driver and handed to Spark as Arrow, every table in one
    action and written from the driver: the same tables, summary and page as the general path."""
    inputs = [str(GOLDEN / "rabbitmq-3.12.0.jsonl"), str(GOLDEN / "rabbitmq-3.13.0.jsonl")]
    lines: list[str] = []
    small = run_report(spark, inputs, tmp_path / "a", name="r", progress=lines.append, small=True)
    assert not any("using Spark" in ln for ln in lines), lines
    general = run_report(spark, inputs, tmp_path / "b", name="r", small=False)
    assert small["inputs"] == general["inputs"] and _comparable(small) == _comparable(general)
    assert_same_tables(tmp_path / "a", tmp_path / "b")
    page = [re.sub(r"generated \S+", "", (tmp_path / d / "index.html").read_text()) for d in ("a", "b")]
    assert page[0] == page[1]


def test_a_store_and_a_file_together(spark: SparkSession, golden_store: Path, tmp_path: Path) -> None:
    extra = tmp_path / "new.jsonl"
    rec = json.loads((GOLDEN / "rabbitmq-3.13.0.jsonl").read_text().splitlines()[0])
    extra.write_text(json.dumps({**rec, "run_id": "new-run"}) + "\n")
    # What the report reads of both (the tables over them: test_store_merge, a store and its files).
    loaded = store.load_inputs(spark, [str(extra)], [golden_store])
    assert (loaded.n_valid, loaded.n_malformed) == (46, 1)
    # The file's run merged with the store's aggregates: a second run of RabbitMQ 3.13.0.
    runs = {r["broker"]: r["n_runs"] for r in Frames(spark, loaded)["brokers"].collect()}
    assert runs == {"RabbitMQ@3.12.0": 2, "RabbitMQ@3.13.0": 2, "garagemq@0.1.0": 1}


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


def test_ingest_and_report_commands(
    golden_store: Path, store_report: tuple[Path, dict[str, Any], str, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    from conformance.report.cli import report_main

    assert store.ingest_main([str(tmp_path / "missing.jsonl"), "--store", str(tmp_path / "s")]) == 2
    assert "no such results file" in capsys.readouterr().err
    assert report_main(["--store", str(GOLDEN), "--out", str(tmp_path / "r")]) == 2
    assert "is not a results store" in capsys.readouterr().err
    assert store.ingest_main([str(GOLDEN), "--store", str(golden_store), "--quiet"]) == 0
    assert "(nothing new)" in capsys.readouterr().out
    # the command's report of the store (exit 0: store_report)
    assert ": 45 executions, " in store_report[2], store_report[2]


# a benchmark's own run (generate, ingest, report: minutes of Spark jobs on a loaded machine), so
# in CI's benchmark step (`pytest -m bench`), not the default run
@pytest.mark.bench
def test_bench_report_through_the_store(spark: SparkSession, tmp_path: Path) -> None:
    from benchmarks.report import run_bench

    figures = run_bench(3000, work=tmp_path, store=True)
    assert figures["ingest_s"] is not None and figures["ingest_s"] > 0
    manifest = json.loads((tmp_path / "store" / "store.json").read_text())
    stored = sum(ing["rows"] for ing in manifest["ingests"])
    # Every valid generated row went through the store into the report.
    assert figures["rows"] == stored > 0
    assert figures["summary"]["inputs"]["n_malformed"] == sum(ing["malformed"] for ing in manifest["ingests"])


def test_a_store_made_of_generated_rows_equals_the_ingest_of_their_lines(
    spark: SparkSession, tmp_path: Path
) -> None:
    from pyspark.testing import assertDataFrameEqual

    from benchmarks import synth
    from conformance.report import aggregates

    cases = synth.builtin_cases()
    lines = synth.generate(spark, 4000, seed=3, cases=cases, malformed=2)
    synth.write_jsonl(lines, tmp_path / "lines", files=2)
    by_lines = store.ingest(spark, [str(tmp_path / "lines")], tmp_path / "a")
    by_rows = store.ingest_rows(spark, synth.generate_rows(spark, 4000, seed=3, cases=cases, malformed=2),
                                tmp_path / "b", "synthetic:4000")
    assert by_lines.malformed_added == 2 and by_rows.malformed_added == 0
    assert (by_rows.rows_added, by_rows.runs_added) == (by_lines.rows_added, by_lines.runs_added) == (
        3998, by_rows.runs_added)
    a, b = (store.read_manifest(tmp_path / s)["ingests"][0] for s in ("a", "b"))
    assert a["runs"] == b["runs"] and b["sources"] == ["synthetic:4000"]
    def stored(name: str) -> Any:
        return store.read_results(spark, tmp_path / name).drop(store.PARTITION)

    assertDataFrameEqual(stored("b"), stored("a"))
    got, want = (store.load_partials(spark, tmp_path / n, store.read_manifest(tmp_path / n)) for n in "ba")
    for name in aggregates.NAMES:
        assertDataFrameEqual(getattr(got, name), getattr(want, name))
        assert getattr(got, name).schema == getattr(want, name).schema
    # Stored again: every run is known, nothing is added.
    again = store.ingest_rows(spark, synth.generate_rows(spark, 4000, seed=3, cases=cases, malformed=2),
                              tmp_path / "b", "synthetic:4000")
    assert (again.ingest_id, again.rows_added, len(again.runs_skipped)) == (None, 0, len(by_rows.runs_added))


def test_bench_report_of_a_synthetic_store(spark: SparkSession, tmp_path: Path) -> None:
    from benchmarks.report import run_bench

    figures = run_bench(3000, work=tmp_path, synthetic_store=True)
    manifest = json.loads((tmp_path / "store" / "store.json").read_text())
    assert [ing["sources"] for ing in manifest["ingests"]] == [["synthetic:rows=3000:seed=7"]]
    # 3 of the 3000 generated lines are cut short: no rows; the other rows all reach the report.
    assert figures["rows"] == sum(ing["rows"] for ing in manifest["ingests"]) == 2997
    assert figures["files"] == 0 and figures["ingest_s"] is None and figures["generate_rows_per_s"] > 0
    assert figures["driver_peak_rss_mb"] is None or figures["driver_peak_rss_mb"] > 100


# -------------------------------------------------------------- ingest without a JVM (pyarrow)

BASELINE = ROOT / "fixtures" / "baselines" / "garagemq.jsonl"


def _tricky_records() -> list[dict[str, Any]]:
    from .conftest import record

    trace = [
        {"ch": 0, "conn": "raw#1", "dir": "C->S", "frame": "protocol header b'AMQP\\x00'", "t": "0.0039"},
        {
            "ch": 1,
            "conn": "raw#1",
            "dir": "S->C",
            "frame": "basic.deliver\ttag=1\n«é»",
            "ok": True,
            "n": None,
            "nested": {"a": [1, 2, {"b": "/"}]},
        },
    ]
    return [
        record(
            run_id="arrow-1",
            case_id="confirms.a",
            extra={"trace": trace, "mutant": "none", "mutate_session": "s"},
        ),
        record(
            run_id="arrow-1",
            case_id="tx.publish.commit",
            time="2026-01-02T03:04:05+02:00",
            duration_s=3,
            extra={"tx_row": "publish", "tx_observed": " Committed ", "url": {"x": 1.5}},
        ),
        record(
            run_id="arrow-1",
            case_id="acks.b",
            time="2026-01-02T03:04:05.123456Z",
            rules=None,
            schema=None,
            duration_s=None,
            extra={"mutant": "confirms.ack-as-nack", "mutant_problem": "p", "mutant_tainted": "true"},
        ),
        record(
            run_id="arrow-2",
            case_id="acks.c",
            time="2026-01-02T03:04:05.1Z",
            rules=[],
            extra=None,
            message='ünïcödé \u2028 "quoted"',
            unknown_top_level_key=[1.25],
        ),
    ]


def test_arrow_ingest_writes_exactly_the_dataset_spark_writes(spark: SparkSession, tmp_path: Path) -> None:
    from pyspark.testing import assertDataFrameEqual

    src = tmp_path / "in.jsonl"
    src.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in _tricky_records()) + "\n  \n", encoding="utf-8"
    )
    files = [str(src), str(BASELINE)]
    by_spark = store.ingest(spark, files, tmp_path / "spark")
    by_arrow = store.ingest_without_spark(files, tmp_path / "arrow")
    assert by_arrow is not None
    assert (by_arrow.rows_added, by_arrow.runs_added, by_arrow.malformed_added) == (
        by_spark.rows_added, by_spark.runs_added, 0)
    a = store.load_store(spark, tmp_path / "spark").results
    b = store.load_store(spark, tmp_path / "arrow").results
    assert a.schema == b.schema
    assertDataFrameEqual(b, a, checkRowOrder=False)
    rows = {r["case_id"]: r for r in b.where("run_id like 'arrow-%'").collect()}
    assert rows["tx.publish.commit"]["tx_observed"] == "committed"
    assert rows["acks.b"]["mutant_tainted"] == "true" and rows["confirms.a"]["trace"].startswith('[{"ch":0,')
    # idempotent by run id, as the Spark path
    again = store.ingest_without_spark([str(src)], tmp_path / "arrow")
    assert again is not None and again.ingest_id is None and again.runs_skipped == ("arrow-1", "arrow-2")
    manifest = json.loads((tmp_path / "arrow" / "store.json").read_text())
    assert [ing["runs"] for ing in manifest["ingests"]] == [
        json.loads((tmp_path / "spark" / "store.json").read_text())["ingests"][0]["runs"]]


@pytest.mark.parametrize("line", [
    '{"run_id": "x", "ti',  # malformed: Spark keeps it aside with its line number
    json.dumps({"hello": "world"}),
    "\t",  # not blank for Spark's trim()
    "RECORD:client=7",  # a number where a string is expected
    "RECORD:time=2026-01-01 00:00:00",  # another timestamp form
    "EXTRA:trace=[{\"t\": 0.5}]",  # a float Java prints otherwise
    "EXTRA:trace=[\"\\u0001\"]",  # a control character Jackson escapes in upper-case hex
    '{"run_id": "a", "run_id": "b"}',  # a repeated key
    "RECORD:duration_s=NaN",
])
def test_arrow_ingest_leaves_to_spark_what_it_does_not_reproduce(tmp_path: Path, line: str) -> None:
    from .conftest import record

    if line.startswith("RECORD:"):
        key, value = line[7:].split("=", 1)
        text = json.dumps(record(**{key: int(value) if value.isdigit() else value}))
        text = text.replace('"NaN"', "NaN")
    elif line.startswith("EXTRA:"):
        key, value = line[6:].split("=", 1)
        text = json.dumps(record(extra={key: json.loads(value)}))
    else:
        text = line
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(record()) + "\n" + text + "\n", encoding="utf-8")
    said: list[str] = []
    assert store.ingest_without_spark([str(src)], tmp_path / "st", progress=said.append) is None
    assert (
        said and said[-1].endswith("using Spark (it keeps such lines aside exactly)") and ":2:" in said[-1]
    ), said
    assert not (tmp_path / "st").exists()


BASELINE_ROWS = sum(1 for line in BASELINE.read_text(encoding="utf-8").splitlines() if line.strip())


def test_ingest_command_takes_the_jvm_free_path_for_a_clean_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert store.ingest_main([str(BASELINE), "--store", str(tmp_path / "st")]) == 0
    cap = capsys.readouterr()
    assert "(pyarrow, no JVM)" in cap.err and f"{BASELINE_ROWS} rows from 1 new run(s)" in cap.out
    assert "ingest: starting Spark" not in cap.err
    assert store.ingest_main([str(BASELINE), "--store", str(tmp_path / "st"), "--quiet"]) == 0
    assert "(nothing new)" in capsys.readouterr().out


def test_a_store_from_before_the_mutation_columns_is_read_and_appended_to(
    spark: SparkSession, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from conformance.report import arrow_ingest
    from conformance.report.schema import MUTATION_COLUMNS, RESULTS_COLUMNS_V1

    st = tmp_path / "st"
    done = store.ingest_without_spark([str(BASELINE)], st)
    assert done is not None and done.ingest_id is not None
    # rewrite it as the previous version wrote it: no mutation columns, and says so in the manifest
    part = next((st / "results").glob("ingest=*/*.parquet"))
    old = pq.read_table(part).select(list(RESULTS_COLUMNS_V1))
    part.unlink()
    pq.write_table(old, part.with_name("part-old.parquet"))
    manifest = json.loads((st / "store.json").read_text())
    manifest["columns"] = list(RESULTS_COLUMNS_V1)
    (st / "store.json").write_text(json.dumps(manifest))
    rows = store.load_store(spark, st).results
    assert rows.count() == BASELINE_ROWS and rows.where("mutant is not null").count() == 0
    rec = _tricky_records()[0]
    (tmp_path / "m.jsonl").write_text(json.dumps(rec) + "\n")
    assert store.ingest_without_spark([str(tmp_path / "m.jsonl")], st) is not None
    both = store.load_store(spark, st).results
    assert both.count() == BASELINE_ROWS + 1 and [
        r["mutant"] for r in both.where("mutant is not null").collect()
    ] == ["none"]
    assert json.loads((st / "store.json").read_text())["columns"][-len(MUTATION_COLUMNS) :] == list(
        MUTATION_COLUMNS
    )
    assert arrow_ingest.arrow_schema().names[-len(MUTATION_COLUMNS):] == list(MUTATION_COLUMNS)
    assert isinstance(old, pa.Table)
