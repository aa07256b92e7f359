"""A small real mutation run against the reference broker, ingested into a results store, ends in
a report with a suite-power section with the mutate command's figures.

One report (one JVM), from the store. A report from the mutate summary (the command's hint) differs
only in its input: the summary names the results file beside it (edges.resolve_inputs) and a results
file is read as any other; both are unit-tested (tests/unit/report/test_power.py: that resolution,
and the mutation tables and power section over parsed records). The store adds the ingest of a
mutate results folder and the store's mutation columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = ["returns.reply-code-313", "counts.delete-ok-message-count", "confirms.in-order-ack-as-multiple"]
# only the cases that observe them, so the run stays short
CASES = ",".join(
    ["returns.mandatory-unroutable-312", "replies.mandatory-return-whole-reply", "replies.delete-ok-count",
     "confirms.seq-*"]
)


def cli(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return finish(start(*args, cwd=cwd), timeout)


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "conformance.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def finish(proc: subprocess.Popen[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def outcomes(mutants: list[dict[str, object]]) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    return {str(m["mutant"]): (str(m["outcome"]), sorted((k["case_id"], k["verdict"]) for k in m["kills"]))  # type: ignore[attr-defined]
            for m in mutants}


def test_mutate_run_ends_in_a_report_with_suite_power(tmp_path: Path) -> None:
    run = cli("mutate", *[a for m in MUTANTS for a in ("--mutant", m)], "--case", CASES, "-j", "2",
              "--case-timeout", "3", "--results", str(tmp_path / "mutate"), cwd=tmp_path, timeout=400)
    assert run.returncode == 0, run.stdout + run.stderr
    (summary_file,) = (tmp_path / "mutate").glob("*.summary.json")
    mutate = json.loads(summary_file.read_text())
    assert mutate["total"]["killed"] == 2 and mutate["total"]["equivalent"] == 1, mutate

    # through a results store: ingest the mutate results folder (the summary is skipped), report from it
    store = tmp_path / "store"
    ing = cli("ingest", str(tmp_path / "mutate"), "--store", str(store), cwd=tmp_path, timeout=1500)
    assert ing.returncode == 0, ing.stdout + ing.stderr
    rep = cli("report", "--store", str(store), "--out", str(tmp_path / "rep"), cwd=tmp_path, timeout=1500)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "suite power on amqp-conformance reference broker@3.10.8: 3 mutants, 2 killed, 0 survived, " \
           "0 no result, 1 equivalent; mutation score 100.0%" in rep.stdout, rep.stdout
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert summary["brokers"] == [] and summary["n_cases"] == 0  # mutation runs are no compliance run
    (power,) = summary["mutation"]["brokers"]
    assert {a: (s["n_mutants"], s["n_killed"], s["n_equivalent"]) for a, s in power["areas"].items()} == {
        c: (v["mutants"], v["killed"], v["equivalent"]) for c, v in mutate["categories"].items()}
    html = (tmp_path / "rep" / "index.html").read_text()
    assert '<section id="power">' in html and 'aria-label="mutation score per area' in html
    for m in mutate["mutants"]:
        assert f"<code>{m['mutant']}</code>" in html
        for k in m["kills"]:
            assert f"<code>{k['case_id']}</code>" in html
    # the same figures, per mutant and killing case, from the mutants table as from the command
    assert outcomes(mutate["mutants"]) == outcomes_from_report(tmp_path / "rep")


def outcomes_from_report(out: Path) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Per mutant outcome and killing cases read back from the report's ``mutants`` table (the
    Parquet files as written, read with pyarrow: no second JVM)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(out / "tables" / "mutants").to_pylist()
    return outcomes([r for r in rows if r["latest"]])
