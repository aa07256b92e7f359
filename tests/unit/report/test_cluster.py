"""The report's cluster section over a hand-made results folder: the suite's records (one of them of
the ``cluster`` area) beside ``faults`` records written by the workload's own :func:`records`."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from conformance.faults.checker import ACK, NACK, Delivery, Publish, buckets, check
from conformance.faults.records import records
from conformance.faults.run import FaultsConfig, FaultsResult
from conformance.report import page_cluster
from conformance.report.pipeline import run_report
from tests.unit.report.conftest import chromium, record


def _run(
    run_id: str, queue_type: str, n: int, lose: int, injected: str | None = None
) -> list[dict[str, Any]]:
    """A faults run of ``n`` confirmed messages (one nacked more) over 20 s; the last ``lose`` are never
    consumed; a kill of n1 from 5 s to 12 s."""
    pubs = [Publish(f"m{i}", i * 20 / n, ACK, i * 20 / n + 0.01) for i in range(n)]
    pubs.append(Publish("nacked", 19.0, NACK, 19.1))
    dels = [Delivery(f"m{i}", i * 20 / n + 0.02) for i in range(n - lose)]
    verdict = check(pubs, dels)
    node = {"node": 1, "node_name": "n1", "ok": True, "detail": "", "phase": "schedule"}
    events = [{"t": 5.0, "action": "kill", **node}, {"t": 12.0, "action": "start", **node}]
    rows = buckets(pubs, dels, 5.0, 20.0, verdict.lost_ids)
    cfg = FaultsConfig(queue_type=queue_type, nemesis=("kill",), duration=20.0, bucket=5.0)
    result = FaultsResult(run_id, cfg, verdict, events, rows, "queue empty", 20.0, injected,
                          broker=("RabbitMQ", "3.10.8"))
    return records(result)


@pytest.fixture(scope="module")
def report(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("results")
    suite = [
        record(case_id="cluster.confirm-survives-leader-kill[quorum]", area="cluster", queue_type="quorum",
               broker_version="3.10.8", observed="200 confirmed, 200 consumed"),
        record(case_id="cluster.exclusive-dies-with-node", area="cluster", broker_version="3.10.8",
               verdict="FAIL", expected="404", observed="200"),
        record(broker_version="3.10.8"),
    ]
    (folder / "suite.jsonl").write_text("".join(json.dumps(r) + "\n" for r in suite))
    runs = [_run("q1", "quorum", 400, 0), _run("m1", "classic-mirrored", 400, 7),
            _run("m2", "classic-mirrored", 200, 3), _run("i1", "quorum", 100, 2, injected="drops 1 in 50")]
    for rows in runs:
        name = f"faults-{rows[0]['run_id']}-{rows[0]['queue_type']}.jsonl"
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path_factory.mktemp("report")
    return out, run_report(spark, [str(folder)], out)


def test_faults_records_are_neither_results_nor_malformed(report: tuple[Path, dict[str, Any]]) -> None:
    _, summary = report
    assert summary["inputs"]["n_rows"] == 3 and summary["inputs"]["n_malformed"] == 0
    assert summary["n_cases"] == 3


def test_cluster_tables(spark: SparkSession, report: tuple[Path, dict[str, Any]]) -> None:
    out, summary = report
    assert summary["tables"]["cluster_runs"]["rows"] == 4
    assert summary["tables"]["cluster_cases"]["rows"] == 2
    assert summary["tables"]["cluster_timeline"]["rows"] == 4 * 4
    assert summary["tables"]["cluster_events"]["rows"] == 4 * 2
    rows = {(r["queue_type"], r["nemesis"]): r.asDict()
            for r in spark.read.parquet(str(out / "tables" / "cluster_faults")).collect()}
    assert set(rows) == {("quorum", "kill"), ("classic-mirrored", "kill"), ("quorum", "kill + injected loss")}
    mirrored = rows[("classic-mirrored", "kill")]
    assert mirrored["broker"] == "RabbitMQ@3.10.8" and mirrored["n_runs"] == 2 and mirrored["n_fail"] == 2
    figures = (mirrored["published"], mirrored["ok"], mirrored["lost"], mirrored["unconfirmed"])
    assert figures == (602, 590, 10, 2)
    quorum = rows[("quorum", "kill")]
    assert (quorum["lost"], quorum["ok"], quorum["n_fail"], quorum["events"]) == (0, 400, 0, 2)
    assert rows[("quorum", "kill + injected loss")]["lost"] == 2


def test_cluster_section(report: tuple[Path, dict[str, Any]]) -> None:
    out, _ = report
    html = (out / "index.html").read_text()
    section = html[html.index('<section id="cluster">'):]
    section = section[: section.index("</section>")]
    assert 'href="#cluster"' in html
    assert "kill + injected loss" in section and "cluster.exclusive-dies-with-node" in section
    assert section.count("<svg") == 4  # one timeline per run
    assert section.count('opacity="0.15"') == 4  # the kill of each run shaded
    assert re.search(r"<title>7 lost", section)  # lost messages drawn where they were sent


def test_section_hidden_without_cluster_records() -> None:
    assert page_cluster.cluster_context({}, {})["fault_rows"] == []
    from conformance.report.page import render_section

    assert render_section("cluster", {}, {}).strip() == ""


def test_fault_intervals_pair_faults_with_their_recovery() -> None:
    steps = [(1, "pause", 2, True), (2, "partition", 0, True), (3, "resume", 2, True),
             (4, "heal", None, True), (5, "kill", 1, False), (6, "kill", 1, True)]
    ev = [{"t": t, "action": a, "node": n, "ok": ok} for t, a, n, ok in steps]
    assert page_cluster.fault_intervals(ev, 9.0) == [
        ("pause", "n2", 1.0, 3.0), ("partition", "n0", 2.0, 4.0), ("kill", "n1", 6.0, 9.0)
    ]


def test_cluster_section_in_chromium(report: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    browser = chromium()
    if browser is None:
        pytest.skip("chromium not installed")
    shot = tmp_path / "cluster.png"
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
         "--window-size=1300,2400", (report[0] / "index.html").as_uri() + "#cluster"],
        capture_output=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert shot.stat().st_size > 10_000
