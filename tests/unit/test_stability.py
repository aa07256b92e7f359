"""``amqp-conformance stability``: N runs into one folder, every case whose verdict (or failure form)
moved, the exit code; the runs themselves are faked here except one real pair of tiny runs."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from conformance.cli import stability

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "fixtures" / "baselines" / "garagemq.jsonl"


def records() -> list[dict[str, Any]]:
    return [json.loads(x) for x in BASELINE.read_text(encoding="utf-8").splitlines() if x.strip()]


def write_run(folder: Path, run_id: str, edits: dict[str, dict[str, Any]]) -> Path:
    rows = [dict(r, run_id=run_id, **edits.get(r["case_id"], {})) for r in records()]
    path = folder / f"{run_id}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


MOVED = {"connection.close-stability": {"verdict": "PASS", "observed": "['connection.close-ok']"}}
FORM = {"access.unknown-user-closes-403": {"observed": "541"}}


def test_analyse_lists_moved_verdicts_and_forms(tmp_path: Path) -> None:
    files = [write_run(tmp_path, "r1", {}), write_run(tmp_path, "r2", {**MOVED, **FORM}),
             write_run(tmp_path, "r3", {})]
    res = stability.analyse(files, str(tmp_path))
    assert res.run_ids == ["r1", "r2", "r3"] and res.n_cases == len(records())
    [moved] = res.moved
    assert moved.case_id == "connection.close-stability" and moved.verdicts == ["FAIL", "PASS", "FAIL"]
    [form] = res.form_moved
    assert form.case_id == "access.unknown-user-closes-403" and form.verdicts == ["FAIL"] * 3
    assert form.forms[1] == "value 541 | connection.close reply-code" != form.forms[0]
    out = io.StringIO()
    stability.print_stability(res, out)
    text = out.getvalue()
    assert "connection.close-stability  FAIL → PASS → FAIL" in text
    assert "run 2: ['connection.close-ok']" in text
    assert text.splitlines()[-1].startswith(
        f"stability FAIL: 3 runs of {len(records())} cases against garagemq 0.1: 1 verdict(s) moved, "
        f"1 failure form(s) moved, {len(records()) - 2} steady")


def test_a_case_absent_from_a_run_moved(tmp_path: Path) -> None:
    first = write_run(tmp_path, "r1", {})
    rows = [r for r in records() if r["case_id"] != "tx.select-ok"]
    second = tmp_path / "r2.jsonl"
    second.write_text("".join(json.dumps(dict(r, run_id="r2")) + "\n" for r in rows), encoding="utf-8")
    [moved] = stability.analyse([first, second]).moved
    assert (moved.case_id, moved.verdicts) == ("tx.select-ok", ["FAIL", stability.ABSENT])


def test_from_folder_exit_codes_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steady = tmp_path / "steady"
    steady.mkdir()
    write_run(steady, "r1", {})
    write_run(steady, "r2", FORM)  # a form moved, no verdict: exit 0
    assert stability.stability_main(["--from", str(steady)]) == 0
    moved = tmp_path / "moved"
    moved.mkdir()
    write_run(moved, "r1", {})
    write_run(moved, "r2", MOVED)
    js = tmp_path / "s.json"
    assert stability.stability_main(["--from", str(moved), "--json", str(js)]) == 1
    assert stability.stability_main(["--from", str(moved), "--no-fail"]) == 0
    doc = json.loads(js.read_text(encoding="utf-8"))
    assert doc["n_moved"] == 1 and doc["moved"][0]["verdicts"] == ["FAIL", "PASS"]
    capsys.readouterr()
    assert stability.stability_main(["--runs", "1"]) == 2
    assert stability.stability_main(["--from", str(moved), "--area", "tx"]) == 2
    one = tmp_path / "one"
    one.mkdir()
    write_run(one, "r1", {})
    assert stability.stability_main(["--from", str(one)]) == 2
    assert "two runs or more" in capsys.readouterr().err


def test_runs_share_one_folder_and_pass_run_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake_call(cmd: Sequence[str], stdout: Any = None, stderr: Any = None) -> int:
        calls.append(list(cmd))
        folder = Path(cmd[cmd.index("--results") + 1])
        n = len(calls)
        write_run(folder, f"r{n}", MOVED if n == 2 else {})
        print("verdicts: 328 cases: …", file=stdout)
        return 0

    monkeypatch.setattr(stability.subprocess, "call", fake_call)
    out = io.StringIO()
    folder = tmp_path / "runs"
    rc = stability.stability_main(["--runs", "3", "--area", "confirms", "--broker", "local:garagemq",
                                   "--results", str(folder)], out)
    assert rc == 1
    assert len(calls) == 3
    for cmd in calls:
        assert cmd[1:4] == ["-m", "conformance.cli", "run"]
        assert cmd[4:8] == ["--area", "confirms", "--broker", "local:garagemq"]
        assert cmd[cmd.index("--results") + 1] == str(folder.resolve())
        assert "--no-report" in cmd and cmd[cmd.index("--fail-on") + 1] == "none"
    text = out.getvalue()
    assert text.startswith("run 1/3: exit 0")
    assert "connection.close-stability  FAIL → PASS → FAIL" in text
    assert sorted(p.name for p in folder.glob("*.jsonl")) == ["r1.jsonl", "r2.jsonl", "r3.jsonl"]


def test_a_run_that_cannot_start_its_target_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_call(cmd: Sequence[str], stdout: Any = None, stderr: Any = None) -> int:
        print("amqp-conformance run: cannot reach the broker", file=stdout)
        return 4

    monkeypatch.setattr(stability.subprocess, "call", fake_call)
    out = io.StringIO()
    assert stability.stability_main(["--runs", "3", "--results", str(tmp_path)], out) == 4
    assert "cannot reach the broker" in out.getvalue() and "run 2/3" not in out.getvalue()


@pytest.mark.integration
@pytest.mark.slow
def test_two_real_runs_against_the_reference_broker(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "stability", "--runs", "2", "-n", "0", "--area", "confirms",
         "-k", "routed and transient", "--results", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stability PASS: 2 runs of 3 cases against amqp-conformance reference broker" in proc.stdout
    assert len(list(tmp_path.glob("*.jsonl"))) == 2
