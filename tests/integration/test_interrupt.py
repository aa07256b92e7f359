"""^C during ``run`` exits 130 ("interrupted"), not 2 (which means bad arguments)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("workers", [["-n", "0"], []], ids=["in-process", "default-workers"])
def test_ctrl_c_during_run_exits_130(tmp_path: Path, workers: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMQP_CONFORMANCE_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance.cli", "run", *workers, "--no-report", "--results",
         str(tmp_path / "r")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )
    killer = threading.Timer(180, proc.kill)  # the test's deadline, whatever happens
    killer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # cases are running: a module's progress line, or xdist's workers line
            if ("test_" in line and "[" in line) or " workers [" in line:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "amqp-conformance: interrupted" in err
    # The cases that never ran are in the results as NOT_RUN, and the table says the run is partial.
    (results,) = (tmp_path / "r").glob("*.jsonl")
    verdicts = [json.loads(line)["verdict"] for line in results.read_text().splitlines()]
    assert "NOT_RUN" in verdicts and "INTERRUPTED (^C)" in out, out[-2000:]


def _confirms_cases() -> set[str]:
    from conformance.scenarios import all_cases

    return {c.id for c in all_cases() if c.area == "confirms"}


def _records(folder: Path) -> list[dict[str, str]]:
    return [json.loads(line) for f in folder.glob("*.jsonl") for line in f.read_text().splitlines()]


@pytest.mark.parametrize("when", ["starting", "collected", "cases-ran"])
def test_ctrl_c_at_any_point_of_a_four_worker_run_records_every_case(tmp_path: Path, when: str) -> None:
    """^C (SIGINT to the whole process group, as a terminal sends it) while the session starts,
    once the workers collected, and after some cases ran: one record per selected case (the
    unfinished ones NOT_RUN, with the interruption as their reason), "INTERRUPTED" in the table,
    exit 130."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMQP_CONFORMANCE_")}
    env["PYTHONPATH"] = str(ROOT)
    results = tmp_path / "r"
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance.cli", "run", "-n", "4", "--area", "confirms", "--no-report",
         "--results", str(results)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        start_new_session=True,  # its own process group: the SIGINT below reaches it and its workers only
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal
    )
    killer = threading.Timer(240, proc.kill)  # the test's deadline, whatever happens
    killer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if when == "starting" and "test session starts" in line:
                break
            if when != "starting" and " workers [" in line:
                break
        if when == "cases-ran":
            while sum(1 for f in results.glob("*.part.jsonl") for _ in f.open()) < 3 and proc.poll() is None:
                threading.Event().wait(0.05)  # the part files grow as cases end
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=180)
    finally:
        killer.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    records = _records(results)
    ids = [r["case_id"] for r in records]
    assert sorted(ids) == sorted(_confirms_cases()), (len(ids), err[-1500:])  # each selected case, once
    not_run = [r for r in records if r["verdict"] == "NOT_RUN"]
    assert not_run and all("interrupted" in (r.get("message") or "") for r in not_run), not_run[:2]
    if when == "cases-ran":
        assert len(not_run) < len(records)  # the cases that finished kept their verdicts
    assert "INTERRUPTED (^C)" in out, out[-2000:]
