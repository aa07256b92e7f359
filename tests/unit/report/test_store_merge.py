"""The store's aggregates: kept per ingest, merged across ingests, computed from the rows of
ingests that lack them (the pyarrow ingest, an older store) — the same tables as from the files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from conformance.report import aggregates, compliance, edges, history, store

from .conftest import record

CASE = "acks.double-ack-406"
# 15 executions of CASE on one build, one per run, spread over three ingests; the two latest
# (t=20) tie on time, in different ingests: the greater run id is the latest.
VERDICTS = ["PASS", "FAIL", "PASS", "TIMEOUT", "PASS", "PASS", "ERROR", "PASS", "FAIL", "PASS",
            "PASS", "NON_STRICT", "PASS", "FAIL", "PASS"]


def _ts(minute: int) -> str:
    return f"2024-05-01T00:{minute:02d}:00.000Z"


def _records() -> list[list[dict[str, Any]]]:
    """Three files, each of its own runs (a store's ingests hold disjoint runs)."""
    files: list[list[dict[str, Any]]] = [[], [], []]
    for i, verdict in enumerate(VERDICTS):
        minute = min(i, 13) + 7  # runs 13 and 14 at the same time (20)
        run = f"run-{i:02d}" if i != 13 else "run-99"  # tied: run-99 (3rd ingest) > run-14 (1st)
        part = 2 if i == 13 else i % 2
        same = {"run_id": run, "time": _ts(minute), "client": f"c{part}"}
        files[part] += [record(verdict=verdict, **same), record(case_id="basic.qos-zero", **same)]
    # Another version, and a mutation run (the suite-power rows), in the last ingest.
    files[2].append(record(run_id="run-b", time=_ts(30), broker_version="3.14.0", verdict="FAIL"))
    files[2].append(record(run_id="mut-1", time=_ts(31), extra={"mutant": "none", "mutate_session": "s1"}))
    return files


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("merge")
    paths = []
    for i, recs in enumerate(_records()):
        path = base / f"part{i}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        paths.append(path)
    return paths


def _finals(p: aggregates.Partials) -> dict[str, list[str]]:
    latest = compliance.latest_final(p.latest)
    tables: dict[str, DataFrame] = {
        "latest": latest,
        "history": history.history_final(p.history),
        "brokers": compliance.broker_summary_of(p.broker_runs, latest),
        "scores_run": p.run_scores,
        "mutation_rows": p.mutation_rows,
    }
    return {n: sorted(repr(r.asDict(recursive=True)) for r in df.collect()) for n, df in tables.items()}


@pytest.fixture(scope="module")
def from_files(spark: SparkSession, inputs: list[Path]) -> dict[str, list[str]]:
    loaded = edges.load_results(spark, [str(p) for p in inputs])
    try:
        return _finals(aggregates.partials_of(loaded.results))
    finally:
        loaded.close()


@pytest.fixture(scope="module")
def merged_store(spark: SparkSession, inputs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    st = tmp_path_factory.mktemp("stores") / "st"
    for path in inputs[:2]:  # Spark ingests: aggregates kept
        assert store.ingest(spark, [str(path)], st).ingest_id is not None
    # the pyarrow ingest keeps none: the report computes them from the ingest's rows
    assert store.ingest_without_spark([str(inputs[2])], st) is not None
    manifest = json.loads((st / "store.json").read_text())
    assert [ing.get("aggregates") for ing in manifest["ingests"]] == [aggregates.VERSION] * 2 + [None]
    # An ingest that died before its commit: its aggregates are there, and invisible.
    latest_dir = st / store.AGGREGATES / "latest"
    shutil.copytree(next(latest_dir.glob("ingest=*")), latest_dir / "ingest=never-committed")
    return st


def _partials(spark: SparkSession, st: Path) -> aggregates.Partials:
    partials = store.load_store(spark, st).partials
    assert partials is not None
    return partials


def test_aggregates_merged_across_ingests_equal_those_of_the_files(
        spark: SparkSession, merged_store: Path, from_files: dict[str, list[str]]) -> None:
    partials = _partials(spark, merged_store)
    assert _finals(partials) == from_files
    latest = {(r["broker_version"], r["case_id"]): r
              for r in compliance.latest_final(partials.latest).collect()}
    tied = latest[("3.13.0", CASE)]
    assert (tied["run_id"], tied["verdict"], tied["n_executions"]) == ("run-99", "FAIL", 15)
    hist = history.history_final(partials.history)
    row = hist.where(f"case_id = '{CASE}' and broker_version = '3.13.0'").collect()[0]
    # oldest first, the tie broken by run id: run-14 (PASS) before run-99 (FAIL)
    last10 = [VERDICTS[i] for i in (5, 6, 7, 8, 9, 10, 11, 12, 14, 13)]
    assert row["recent_verdicts"] == " ".join(last10)
    assert (row["n_executions"], row["n_runs"], row["n_fail"]) == (15, 15, 3)


def test_a_store_from_before_the_aggregates_is_read(
        spark: SparkSession, merged_store: Path, from_files: dict[str, list[str]], tmp_path: Path) -> None:
    st = tmp_path / "old"
    shutil.copytree(merged_store, st)
    # as a version before the aggregates wrote it: rows only, and a manifest without the key
    shutil.rmtree(st / store.AGGREGATES)
    manifest = json.loads((st / "store.json").read_text())
    for ing in manifest["ingests"]:
        ing.pop("aggregates", None)
    (st / "store.json").write_text(json.dumps(manifest))
    assert _finals(_partials(spark, st)) == from_files


def test_the_ingests_shared_pass_gives_the_partials_of_the_rows(
        spark: SparkSession, inputs: list[Path]) -> None:
    from pyspark.testing import assertDataFrameEqual

    from .conftest import results_frame

    golden = Path(__file__).resolve().parents[3] / "fixtures" / "results"
    loaded = edges.load_results(spark, [*map(str, inputs), str(golden)])
    try:
        # A build without a platform (a null key of the history's groups, not of the latest's).
        extra = results_frame(spark, [record(run_id="np", broker_platform=None, verdict="FAIL"),
                                      record(run_id="np2", broker_platform=None, time=_ts(40)),
                                      # The latest time and run twice in a group: the payload decides.
                                      record(run_id="tie", time=_ts(50), verdict="PASS", observed="a"),
                                      record(run_id="tie", time=_ts(50), verdict="FAIL", observed="b")])
        rows = loaded.results.unionByName(extra)
        shared = aggregates.partials_of_shared(rows, aggregates.shared_groups(rows))
        plain = aggregates.partials_of(rows)
        for name in aggregates.NAMES:
            assertDataFrameEqual(getattr(shared, name), getattr(plain, name))
    finally:
        loaded.close()
