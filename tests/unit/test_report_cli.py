"""The report command's bad input, checked before Spark starts (so these tests need no JVM)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance.report.cli import report_main

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "fixtures" / "results" / "rabbitmq-3.13.0.jsonl"


def test_out_naming_an_existing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    existing = tmp_path / "report.html"
    existing.write_text("keep me", encoding="utf-8")
    assert report_main([str(RESULTS), "--out", str(existing), "--quiet"]) == 2
    cap = capsys.readouterr()
    assert cap.err.strip().splitlines() == [
        (
            f"amqp-conformance report: --out {existing} is an existing file, not a folder (name a "
            "folder for the report)"
        )
    ]
    assert cap.out == "" and existing.read_text(encoding="utf-8") == "keep me"


def test_out_under_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    assert report_main([str(RESULTS), "--out", str(blocker / "sub"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"amqp-conformance report: cannot create the report folder {blocker / 'sub'}"
    )


def test_the_command_line_prints_no_traceback(tmp_path: Path) -> None:
    existing = tmp_path / "x.txt"
    existing.write_text("", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "report", str(RESULTS), "--out", str(existing)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [[str(RESULTS), "--out", "unused-report-dir"], ["report", "--rows", "10"]])
def test_a_missing_report_extra_is_one_line_naming_it(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from conformance import cli
    from conformance.report.cli import report_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "pyspark", None)  # as if `pip install amqp-conformance` without [report]
    assert (report_main(argv) if argv[0] != "report" else cli.main(["bench", *argv])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("needs the [report] extra (pyspark is not installed): "
                                             "pip install 'amqp-conformance[report]'")
    assert not (tmp_path / "unused-report-dir").exists()


def test_build_report_names_the_extra_for_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from conformance.report import build_report
    from conformance.report.session import EnvironmentProblem

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(EnvironmentProblem, match=r"the compliance report needs the \[report\] extra"):
        build_report([str(RESULTS)], tmp_path / "r")
