"""The CLI's answers to bad input: one clear line, non-zero, fast."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.targets.base import free_port
from tests.fakebroker import FakeBroker


def cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("mode", "needle"), [(None, "unreachable"), ("refuse-login", "login refused")])
def test_run_against_an_unusable_broker(tmp_path: Path, mode: str | None, needle: str) -> None:
    results = tmp_path / "r"
    if mode is None:
        res = cli("run", "--broker-url", f"amqp://guest:guest@127.0.0.1:{free_port()}/", "--results",
                  str(results), cwd=tmp_path)
    else:
        with FakeBroker(mode) as fb:
            res = cli("run", "--broker-url", fb.url, "--results", str(results), cwd=tmp_path)
    ended = time.time()
    # Fast: from the run's check that it can write its results (the plugin's session start, just
    # before the probe: the folder's mtime) to its end, not from the interpreter's start, whose
    # imports took 16 s of a 10 s bound at load 12. No case started: none recorded.
    assert ended - results.stat().st_mtime < 10, ended - results.stat().st_mtime
    assert not list(results.iterdir())
    assert res.returncode != 0
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if "amqp-conformance:" in ln]
    assert len(lines) == 1 and needle in lines[0], res.stdout + res.stderr


def test_bad_url_and_unknown_command(tmp_path: Path) -> None:
    res = cli("run", "--broker-url", "http://nowhere/", cwd=tmp_path)
    assert res.returncode != 0 and "unsupported URL scheme" in res.stdout + res.stderr
    res = cli("frobnicate", cwd=tmp_path)
    assert res.returncode == 2 and "unknown command" in res.stderr


def test_unknown_broker_kind(tmp_path: Path) -> None:
    res = cli("run", "--broker", "local:qpid", cwd=tmp_path)
    assert res.returncode == 2 and "unknown target 'local:qpid'" in res.stderr


def test_run_case_is_not_read_as_an_abbreviation(tmp_path: Path) -> None:
    # argparse once read --case as --case-timeout; the README's own example must work.
    # -n 0: in the run's own process (four workers to start cost more than the few cases)
    res = cli("run", "-n", "0", "--case", "exchange.default-access-*", "--no-report", "--results",
              str(tmp_path / "r"), "--report-out", str(tmp_path / "rep"), cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    ids = {
        json.loads(line)["case_id"]
        for f in (tmp_path / "r").glob("*.jsonl")
        for line in f.read_text().splitlines()
    }
    assert ids and all(i.startswith("exchange.default-access-") for i in ids), ids
    res = cli("run", "--case-t", "3", cwd=tmp_path)
    assert res.returncode == 2 and "unrecognized arguments" in res.stderr


def test_run_with_unwritable_results_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file, not a folder")
    res = cli("run", "--results", str(tmp_path / "blocked" / "r"), cwd=tmp_path)
    text = res.stdout + res.stderr
    assert res.returncode == 2 and "Traceback" not in text and "INTERNALERROR" not in text, text
    assert [ln for ln in text.splitlines() if ln.strip()] == [ln for ln in text.splitlines()
                                                               if "cannot write results to" in ln]


def test_cases_needs_no_broker_and_takes_no_abbreviation(tmp_path: Path) -> None:
    res = cli("cases", "--area", "tx", cwd=tmp_path)
    assert res.returncode == 0 and "tx." in res.stdout
    res = cli("cases", "--are", "tx", cwd=tmp_path)
    assert res.returncode == 2


def test_run_expected_failures_are_known_not_failing(tmp_path: Path) -> None:
    """`run --expected-failures` reads the gate's triage format: a FAIL it explains is reported as
    known and does not fail the run; a listed case that passes is reported as fixed."""
    # Under the spec profile the reference broker (RabbitMQ semantics) answers queue.delete of a
    # missing queue with delete-ok where the spec wants 404: a FAIL. purge-missing-404 passes.
    cases = "queue.delete-missing-404,queue.purge-missing-404"
    common = ("run", "-n", "0", "--profile", "spec", "--case", cases, "--no-report", "--results",
              str(tmp_path / "r"), "--report-out", str(tmp_path / "rep"))
    res = cli(*common, cwd=tmp_path, timeout=120)
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    triage = tmp_path / "known.toml"
    triage.write_text('[[triage]]\ncases = ["queue.delete-missing-404", "queue.purge-missing-404"]\n'
                      'reason = "RabbitMQ semantics: deleting a missing queue is not an error"\n')
    res = cli(*common, "--expected-failures", str(triage), cwd=tmp_path, timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-2000:]
    assert "1 known, not counted for --fail-on" in out
    assert "fixed (listed there, PASS now): queue.purge-missing-404" in out
    res = cli(*common, "--expected-failures", str(tmp_path / "missing.toml"), cwd=tmp_path, timeout=60)
    assert res.returncode != 0 and "no such triage file" in res.stdout + res.stderr


def test_junit_named_after_the_broker_and_allure_titled_by_case_id(tmp_path: Path) -> None:
    # JUnit files of several brokers merged in one dashboard stay apart; allure keeps one test per
    # case id (channel.close-stability and connection.close-stability are both test_close_stability).
    res = cli("run", "-n", "0", "--area", "channel,connection", "--no-report", "--fail-on", "none",
              "--results", str(tmp_path / "r"), cwd=tmp_path, timeout=180)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    (xml,) = (tmp_path / "reports" / "junit").glob("*.xml")
    text = xml.read_text()
    assert '<testsuite name="amqp-conformance reference broker ' in text
    assert '<property name="broker.product" value="amqp-conformance reference broker" />' in text
    lines = next((tmp_path / "r").glob("*.jsonl")).read_text().splitlines()
    ids = {json.loads(line)["case_id"] for line in lines}
    (allure_dir,) = (tmp_path / "reports" / "allure-results").iterdir()  # the run's own folder
    assert allure_dir.name == xml.stem  # named after the run id, as the JUnit file is
    results = [json.loads(p.read_text()) for p in allure_dir.glob("*-result.json")]
    assert {r["name"] for r in results} == ids
    assert len({r["historyId"] for r in results}) == len(results) == len(ids)
    assert {"channel.close-stability", "connection.close-stability"} <= ids
