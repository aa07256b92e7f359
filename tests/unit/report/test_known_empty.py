"""Tables fed only by an input the driver knows is empty (``tables.Table.source``) are not derived,
only given their recorded schema (``conformance/report/table_schemas.json``): proven here with the
real derivations, in Spark.

- every table's recorded schema is the schema its derivation gives (``UPDATE_TABLE_SCHEMAS=1``
  rewrites the file from the derivations);
- a table whose source is empty is empty, whatever else the input holds (the other source, results
  of several brokers and versions, a flaky case, a regression);
- the driver's parse says which sources are empty, and leaves faults lines to Spark.

The small path's whole report (which skips them) equals the general path's (which derives them):
tests/unit/report/test_store.py, ``test_a_clean_run_read_without_spark_gives_the_same_report``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from conformance.report import arrow_ingest, edges, tables
from conformance.report.gather import gather
from conformance.report.tables import BY_NAME, SCHEMAS_FILE, TABLES, Frames, empty_view, recorded_schema

from .test_cluster import _run
from .test_power import RECORDS

GOLDEN = Path(__file__).resolve().parents[3] / "fixtures" / "results"
ALL = ("rabbitmq-3.12.0.jsonl", "rabbitmq-3.13.0.jsonl", "garagemq-0.1.0.jsonl")
# Per source: an input without it but with the others (the golden sets: runs r1, r2 of 3.12.0 with a
# flaky case, r3 of 3.13.0 with a regression; a faults run; a mutate session) and a table it makes
# non-empty.
WITHOUT: dict[str, tuple[tuple[str, ...], bool, bool, str]] = {
    "workload": (ALL, False, True, "mutants"),
    "mutation": (ALL, True, False, "cluster_runs"),
    "second_run": (("rabbitmq-3.13.0.jsonl",), True, True, "mutants"),
    "second_version": (("rabbitmq-3.12.0.jsonl", "garagemq-0.1.0.jsonl"), True, True, "flaky"),
}


def _folder(root: Path, files: tuple[str, ...] = ALL, *, workload: bool, mutation: bool) -> Path:
    """Golden result sets, plus a faults run (``workload``) and a mutate session (``mutation``)."""
    folder = root / f"w{int(workload)}m{int(mutation)}"
    folder.mkdir()
    for name in files:
        (folder / name).write_text((GOLDEN / name).read_text())
    if workload:
        rows = _run("q1", "quorum", 40, 1)
        (folder / "faults-q1-quorum.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if mutation:
        (folder / "mutate.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    return folder


def _frames(spark: SparkSession, folder: Path) -> Frames:
    """Every table derived by Spark (the general path's load: no source known empty)."""
    loaded = edges.load_results(spark, edges.resolve_inputs([str(folder)]))
    assert loaded.known_empty == frozenset()
    return Frames(spark, loaded, small=True)


def test_every_recorded_schema_is_the_derivations(spark: SparkSession, tmp_path: Path) -> None:
    frames = _frames(spark, _folder(tmp_path, workload=True, mutation=True))
    derived = {t.name: frames[t.name].schema.jsonValue() for t in TABLES}
    if os.environ.get("UPDATE_TABLE_SCHEMAS") == "1":
        _update("schemas", derived)
    recorded = json.loads(SCHEMAS_FILE.read_text(encoding="utf-8"))["schemas"]
    assert sorted(recorded) == sorted(derived), "tables added or removed: UPDATE_TABLE_SCHEMAS=1 rewrites it"
    for name, schema in derived.items():
        assert recorded[name] == schema, f"{name}: the recorded schema is not the derivation's"


def _update(key: str, value: dict[str, Any]) -> None:
    whole = json.loads(SCHEMAS_FILE.read_text(encoding="utf-8"))
    whole[key] = value
    SCHEMAS_FILE.write_text(json.dumps(whole, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tables._recorded.cache_clear()


def test_every_recorded_empty_view_is_the_view_of_the_empty_table(spark: SparkSession) -> None:
    """A known-empty table's view is not planned: its recorded value is the real view's, gathered
    from the empty table (and the other tables of the same source it reads, empty too)."""
    files = [str(GOLDEN / "rabbitmq-3.13.0.jsonl")]
    per_file = arrow_ingest.plan_by_file(files, lambda _: None, who="report")
    assert per_file is not None
    frames = Frames(spark, edges.load_rows(spark, files, per_file), small=True)
    empty = [t for t in TABLES if t.source is not None and t.view is not None]
    assert all(frames.known_empty(t.name) for t in empty)
    derived = {t.name: gather(t.view(frames[t.name], frames), one_task=True)  # type: ignore[misc]
               for t in empty}
    if os.environ.get("UPDATE_TABLE_SCHEMAS") == "1":
        _update("empty_views", derived)
    assert json.loads(SCHEMAS_FILE.read_text(encoding="utf-8"))["empty_views"] == derived
    assert {t.name: empty_view(t.name) for t in empty} == derived


@pytest.mark.parametrize("source", sorted(WITHOUT))
def test_a_table_whose_source_is_empty_is_empty(spark: SparkSession, tmp_path: Path, source: str) -> None:
    fed = [t.name for t in TABLES if t.source == source]
    assert fed, f"no table is fed by {source}"
    files, workload, mutation, other = WITHOUT[source]
    frames = _frames(spark, _folder(tmp_path, files, workload=workload, mutation=mutation))
    assert frames[other].count() > 0  # the input is not empty, these tables must be
    assert {name: frames[name].count() for name in fed} == dict.fromkeys(fed, 0)
    for name in fed:
        assert frames[name].schema == recorded_schema(name)


def test_the_drivers_parse_says_which_sources_are_empty(spark: SparkSession, tmp_path: Path) -> None:
    def known(folder: Path) -> frozenset[str] | None:
        files = edges.resolve_inputs([str(folder)])
        per_file = arrow_ingest.plan_by_file(files, lambda _: None, who="report")
        return None if per_file is None else edges.load_rows(spark, files, per_file).known_empty

    one = tmp_path / "one"
    one.mkdir()
    (one / "r3.jsonl").write_text((GOLDEN / "rabbitmq-3.13.0.jsonl").read_text())
    assert known(one) == {"workload", "mutation", "second_run", "second_version"}
    # mutation runs are not normal runs: no second run, no second version
    (one / "mutate.jsonl").write_text(json.dumps(RECORDS[0]) + "\n")
    assert known(one) == {"workload", "second_run", "second_version"}
    (one / "r1r2.jsonl").write_text((GOLDEN / "rabbitmq-3.12.0.jsonl").read_text())
    assert known(one) == {"workload"}
    two_runs = tmp_path / "two-runs"
    two_runs.mkdir()
    (two_runs / "r1r2.jsonl").write_text((GOLDEN / "rabbitmq-3.12.0.jsonl").read_text())
    assert known(two_runs) == {"workload", "mutation", "second_version"}
    rec = json.loads((GOLDEN / "rabbitmq-3.12.0.jsonl").read_text().splitlines()[0])
    (two_runs / "next.jsonl").write_text(json.dumps({**rec, "broker_version": "3.12.1"}) + "\n")
    assert known(two_runs) == {"workload", "mutation"}
    # A faults line is no result record: Spark parses such inputs (and finds the workload).
    (one / "faults.jsonl").write_text(json.dumps(_run("q1", "quorum", 4, 0)[0]) + "\n")
    assert known(one) is None


def test_a_known_empty_table_is_given_its_recorded_schema(spark: SparkSession) -> None:
    files = [str(GOLDEN / "rabbitmq-3.12.0.jsonl")]
    per_file = arrow_ingest.plan_by_file(files, lambda _: None, who="report")
    assert per_file is not None
    frames = Frames(spark, edges.load_rows(spark, files, per_file), small=True)
    for name in ("mutants", "cluster_faults"):
        df = frames[name]
        assert BY_NAME[name].source in frames.loaded.known_empty
        assert df.schema == recorded_schema(name) and df.count() == 0
    # not derived: no table it derives from was built on the way (mutants reads mutation_cases)
    assert "table:mutation_cases" not in frames._memo and "table:cluster_runs" not in frames._memo


def test_all_broker_versions_are_among_the_recent_when_there_are_no_more(spark: SparkSession) -> None:
    """The views keep the rows of the most recent broker versions; with no more versions than
    that (known from the driver's parse) every row, in the same order, without the join."""
    files = [str(GOLDEN / name) for name in ("rabbitmq-3.12.0.jsonl", "rabbitmq-3.13.0.jsonl")]
    per_file = arrow_ingest.plan_by_file(files, lambda _: None, who="report")
    assert per_file is not None
    frames = Frames(spark, edges.load_rows(spark, files, per_file), small=True)
    assert frames.loaded.n_brokers == 2
    latest = frames["latest"]
    joined = latest.join(frames.recent_brokers(2), "broker", "left_semi")
    assert frames.among_recent(latest, 2) is latest
    assert latest.collect() == joined.collect()
    fewer = frames.among_recent(latest, 1)
    assert fewer is not latest and {r["broker"] for r in fewer.collect()} == {"RabbitMQ@3.13.0"}
