"""The whole report over the golden result sets in fixtures/results/, with its numbers stated.

The golden sets (see the expected numbers below, worked out by hand from the files):
- RabbitMQ 3.12.0, runs r1 and r2: 11 cases each; exclusive.other-connection-405 is TIMEOUT in r1
  and PASS in r2 (the flaky case); recover.requeue-false UNSUPPORTED; tx rows as RabbitMQ >= 2.8.
- RabbitMQ 3.13.0, run r3: acks.double-ack-406 FAIL (regression from PASS), reject.requeue-head
  NON_STRICT (new NON_STRICT).
- garagemq 0.1.0, run g1: 12 cases, line 5 cut short (malformed), line 9 blank; tx rows as
  RabbitMQ < 2.6 except error detection "on commit".
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from conformance.report import tables
from conformance.report.cli import report_main

from .conftest import chromium

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "fixtures" / "results"


@pytest.fixture(scope="module")
def report(golden_report: tuple[Path, dict[str, Any], list[str]]) -> tuple[Path, dict[str, Any]]:
    out, summary, lines = golden_report
    assert any(line.startswith(f"report: tables: {len(tables.TABLES)} tables") for line in lines), lines
    assert summary["tables"]["latest"]["rows"] == 34
    return out, summary


def by_broker(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["broker"]: b for b in summary["brokers"]}


def test_inputs_and_malformed_line(report: tuple[Path, dict[str, Any]]) -> None:
    _, s = report
    assert s["inputs"]["n_files"] == 3
    assert s["inputs"]["n_rows"] == 45
    assert s["inputs"]["n_malformed"] == 1
    assert s["malformed"] == [
        {"file": str(GOLDEN / "garagemq-0.1.0.jsonl"), "line": 5, "reason": "not a valid JSON object"}
    ]
    assert s["n_brokers"] == 3
    assert s["n_cases"] == 12


def test_broker_summaries(report: tuple[Path, dict[str, Any]]) -> None:
    b = by_broker(report[1])
    r12, r13, g = b["RabbitMQ@3.12.0"], b["RabbitMQ@3.13.0"], b["garagemq@0.1.0"]
    assert (r12["n_runs"], r12["n_executions"], r12["n_cases"]) == (2, 22, 11)
    assert r12["verdicts"] == {
        "PASS": 9,
        "FAIL": 0,
        "NON_STRICT": 0,
        "UNSUPPORTED": 1,
        "INFORMATIONAL": 1,
        "TIMEOUT": 0,
        "ERROR": 0,
        "NOT_RUN": 0,
    }
    assert (r12["score"], r12["n_must_failures"]) == (1.0, 0)
    assert (
        r13["verdicts"]["PASS"] == 7 and r13["verdicts"]["FAIL"] == 1 and r13["verdicts"]["NON_STRICT"] == 1
    )
    assert (r13["n_scored"], r13["score"], r13["n_must_failures"]) == (9, 0.7778, 1)
    assert g["verdicts"] == {
        "PASS": 5,
        "FAIL": 3,
        "NON_STRICT": 1,
        "UNSUPPORTED": 1,
        "INFORMATIONAL": 2,
        "TIMEOUT": 0,
        "ERROR": 0,
        "NOT_RUN": 0,
    }
    assert (g["n_cases"], g["score"], g["n_must_failures"]) == (12, 0.5556, 3)


def test_profiles(report: tuple[Path, dict[str, Any]]) -> None:
    b = by_broker(report[1])
    for rabbit in ("RabbitMQ@3.12.0", "RabbitMQ@3.13.0"):
        assert b[rabbit]["tx_profile"] == {
            "column": "rabbitmq>=2.8",
            "profile": "rabbitmq",
            "score": 1.0,
            "n_compared": 5,
            "disagreements": [],
        }
    assert b["garagemq@0.1.0"]["tx_profile"] == {
        "column": "rabbitmq<2.6",
        "profile": None,
        "score": 0.8,
        "n_compared": 5,
        "disagreements": ["error-detection: observed on commit, column says immediate"],
    }


def test_flaky_regressions_and_coverage(report: tuple[Path, dict[str, Any]]) -> None:
    s = report[1]
    assert s["flaky"] == {
        "count": 1,
        "top": [
            {
                "broker": "RabbitMQ@3.12.0",
                "broker_platform": "Erlang/OTP 26.2",
                "case_id": "exclusive.other-connection-405",
                "n_runs": 2,
                "verdict_summary": "PASS / TIMEOUT",
            }
        ],
    }
    assert s["regressions"]["by_kind"] == {"regression": 1, "new-non-strict": 1}
    assert sorted(
        (r["case_id"], r["kind"], r["baseline_verdict"], r["candidate_verdict"])
        for r in s["regressions"]["top"]
    ) == [
        ("acks.double-ack-406", "regression", "PASS", "FAIL"),
        ("reject.requeue-head", "new-non-strict", "PASS", "NON_STRICT"),
    ]
    assert s["rule_coverage"] == {
        "rule_elements": 115,
        "rule_ids": 115,
        "covered": 5,
        "uncovered": 110,
        "cited_not_in_spec": ["confirm.select/nowait"],
    }


def test_tables_on_disk(spark: SparkSession, report: tuple[Path, dict[str, Any]]) -> None:
    out, s = report
    expected_rows = {
        "latest": 34,
        "history": 34,
        "matrix": 34,
        "brokers": 3,
        "scores_area": 18,
        "scores_level": 15,
        "scores_run": 4,
        "tx_table": 30,
        "profile_inference": 12,
        "flaky": 1,
        "regressions": 2,
        "rule_coverage": 128,
        "malformed": 1,
        "queue_types": 0,  # the golden results declare no quorum runs
        "mutation_cases": 0,
        "mutants": 0,
        "mutation_scores": 0,  # no mutation runs among the inputs
        "cluster_runs": 0,
        "cluster_faults": 0,
        "cluster_timeline": 0,
        "cluster_events": 0,
        "cluster_cases": 0,  # no faults runs, no cluster area: the section is left out
        "upgrade": 2,  # RabbitMQ 3.12.0 → 3.13.0: the two cases whose verdict changed, neither documented
    }
    assert {k: v["rows"] for k, v in s["tables"].items()} == expected_rows
    for name, n in expected_rows.items():  # the files hold them (a Spark read: a job per table)
        assert pq.read_table(out / "tables" / name).num_rows == n, name
    on_disk = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert on_disk["inputs"] == s["inputs"]
    tx = (
        spark.read.parquet(str(out / "tables" / "tx_table"))
        .where("broker = 'garagemq@0.1.0' and tx_row = 'no-route-return'")
        .first()
    )
    assert tx is not None
    assert (tx["observed"], tx["rabbitmq_lt_2_6_match"], tx["rabbitmq_ge_2_8_match"]) == (
        "immediate",
        True,
        False,
    )
    area = (
        spark.read.parquet(str(out / "tables" / "scores_area"))
        .where("broker = 'garagemq@0.1.0' and area = 'tx'")
        .first()
    )
    assert area is not None
    assert (area["n_cases"], area["n_pass"], area["n_fail"], area["n_scored"], area["score"]) == (
        7,
        2,
        3,
        5,
        0.4,
    )


def test_html_is_self_contained_and_has_every_section(report: tuple[Path, dict[str, Any]]) -> None:
    page = (report[0] / "index.html").read_text(encoding="utf-8")
    for anchor in (
        "summary",
        "plot",
        "trend",
        "matrix",
        "tx",
        "profile",
        "rules",
        "flaky",
        "regressions",
        "malformed",
        "power",
    ):
        assert f'id="{anchor}"' in page
    assert 'id="cluster"' not in page
    # Self-contained: one inline script, nothing loaded from elsewhere (links to sources are fine).
    assert page.count("<script") == 1 and "<script>" in page and "<link" not in page
    assert re.search(r'\ssrc="', page) is None
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert page.count("<svg") >= 3 + 7  # one chart per broker, legend swatches
    assert page.count("<details>") == 34  # one expandable cell per latest verdict
    assert page.count('<details class="case">') == 12  # one drill-down per case row (12 distinct cases)
    assert "error-detection: observed on commit, column says immediate" in page
    # The title names the brokers, most recent first.
    title = re.search(r"<title>(.*?)</title>", page)
    assert title is not None and title.group(1).startswith("AMQP 0-9-1 conformance — ")
    for broker in ("RabbitMQ@3.12.0", "RabbitMQ@3.13.0", "garagemq@0.1.0"):
        assert broker in title.group(1)
    # Filters: verdict, area, level, broker and a search box over the matrix rows.
    for name in ("verdict", "area", "level", "broker"):
        assert f'<select name="{name}">' in page
    assert '<input name="q" type="search"' in page
    assert 'data-area="acks" data-level="MUST"' in page
    # The drill-down of a case of the suite: its rule's text and its sources as public links, no file names.
    assert "https://www.rabbitmq.com/docs/semantics#tx" in page
    assert re.search(r"\b\d{3}_[0-9a-f]{16}\.txt", page) is None
    # The trend: one chart per product.
    trend = page[page.index('id="trend"'):page.index('id="matrix"')]
    assert trend.count("<svg") == 2 and "3.12.0" in trend and "3.13.0" in trend


@pytest.mark.skipif(
    chromium() is None, reason="/usr/bin/chromium is absent: cannot render the page in a browser"
)
def test_page_renders_in_chromium_without_errors(report: tuple[Path, dict[str, Any]]) -> None:
    page = report[0] / "index.html"
    shot = report[0] / "screenshot.png"
    common = [
        str(chromium()), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0",
    ]
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [*common, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        )
    with tempfile.TemporaryDirectory() as profile:
        snap = subprocess.run(
            [
                *common,
                f"--user-data-dir={profile}",
                f"--screenshot={shot}",
                "--window-size=1400,3000",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert snap.returncode == 0, snap.stderr[-2000:]
    for log in (dom.stderr, snap.stderr):
        console = [ln for ln in log.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
        assert console == [], console
    # The DOM chromium built holds the rendered sections (parsing did not stop early).
    assert 'id="regressions"' in dom.stdout and "garagemq@0.1.0" in dom.stdout
    assert shot.stat().st_size > 50_000  # a blank 1400x3000 PNG is a few KB


def test_report_command_exit_codes(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        report_main([str(GOLDEN / "rabbitmq-3.13.0.jsonl"), "--out", str(tmp_path / "one"), "--quiet"]) == 0
    )
    assert "11 executions, 1 broker versions" in capsys.readouterr().out
    notes = tmp_path / "notes.txt"
    notes.write_text("this is\nnot results\n", encoding="utf-8")
    assert report_main([str(notes), "--out", str(tmp_path / "bad"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"amqp-conformance report: {notes} is not a results file: none of its 2 lines is a result record "
        "(line 1: not a valid JSON object)"
    ]
    assert report_main([str(tmp_path / "nothing-*.jsonl"), "--out", str(tmp_path / "x")]) == 2
    assert "no results file matches" in capsys.readouterr().err


def test_the_matrix_reads_worst_first(report: tuple[Path, dict[str, Any]]) -> None:
    """Rows by the verdict a reader must act on most (FAIL, TIMEOUT, ERROR, NOT_RUN, NON_STRICT,
    then the rest): the golden sets' FAIL first, the UNSUPPORTED and PASS-only rows after every
    NON_STRICT one."""
    from conformance.model.verdicts import action_rank

    page = (report[0] / "index.html").read_text(encoding="utf-8")
    matrix = page[page.index('id="matrix"'):page.index('id="tx"')]
    rows = re.findall(r'<tr data-area=.*?</tr>', matrix, re.S)
    worst = [min(action_rank(v) for v in re.findall(r'data-v="([A-Z_]+)"', row)) for row in rows]
    assert len(rows) == 12 and worst == sorted(worst), worst
    assert worst[0] == action_rank("FAIL") and "acks.double-ack-406" in rows[0]
