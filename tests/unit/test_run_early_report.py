"""``run`` starts the report's Spark session while the suite runs, hands it to the report and
stops it on every other path; ``--no-report`` never starts one (never imports pyspark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conformance import cli
from conformance.cli import run as run_cmd


class FakeEarly:
    def __init__(self) -> None:
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1

    def get(self) -> None:
        return None


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """pytest.main and the report replaced: ``outcome`` says what the fake suite does."""
    import conformance.report as report

    seen: dict[str, Any] = {"started": [], "built": [], "outcome": ("collect", 0)}

    def start(master: str | None = None) -> FakeEarly:
        seen["started"].append(FakeEarly())
        return seen["started"][-1]

    def fake_main(args: list[str], plugins: list[Any] | None = None) -> int:
        seen["plugins"] = plugins
        action, code = seen["outcome"]
        early = (plugins or [None])[0]
        if action in ("collect", "collect-and-write", "raise") and early is not None:
            early.pytest_collection_finish(SimpleNamespace(items=[1], config=SimpleNamespace(
                getoption=lambda name, default=None: False)))
        if action == "collect-and-write":
            results = Path(args[args.index("--amqp-results") + 1])
            results.mkdir(parents=True, exist_ok=True)
            rec = {"case_id": "x.y", "verdict": "PASS"}
            run_id = run_cmd.os.environ["AMQP_CONFORMANCE_RUN_ID"]
            (results / f"{run_id}.jsonl").write_text(json.dumps(rec) + "\n")
        if action == "raise":
            raise RuntimeError("internal error in the suite")
        return code

    def build(inputs: list[str], out: Path, **kw: Any) -> dict[str, Any]:
        seen["built"].append(kw.get("session"))
        if kw.get("session") is not None:
            kw["session"].stop()  # as the real build_report does
        return {"timings_s": {"read+parse": 0.5, "tables": 0.25}}

    monkeypatch.setattr(pytest, "main", fake_main)
    monkeypatch.setattr(report, "start_session_early", start)
    monkeypatch.setattr(report, "build_report", build)
    return seen


def _run(tmp_path: Path, *more: str) -> int:
    return cli.main(["run", "-n", "0", "--results", str(tmp_path / "r"), "--report-out",
                     str(tmp_path / "rep"), *more])


def test_the_early_session_goes_to_the_report(tmp_path: Path, fakes: dict[str, Any]) -> None:
    fakes["outcome"] = ("collect-and-write", 0)
    assert _run(tmp_path) == 0
    assert len(fakes["started"]) == 1 and fakes["built"] == fakes["started"]
    assert fakes["started"][0].stops == 1


@pytest.mark.parametrize("outcome", [("collect", 3), ("collect", 4), ("collect", 1), ("raise", 0)])
def test_the_early_session_is_stopped_when_the_suite_fails(
    tmp_path: Path, fakes: dict[str, Any], outcome: tuple[str, int]
) -> None:
    fakes["outcome"] = outcome
    if outcome[0] == "raise":
        with pytest.raises(RuntimeError):
            _run(tmp_path)
    else:
        assert _run(tmp_path) != 0
    assert len(fakes["started"]) == 1 and fakes["started"][0].stops == 1 and fakes["built"] == []


def test_no_case_collected_starts_no_session(tmp_path: Path, fakes: dict[str, Any]) -> None:
    fakes["outcome"] = ("nothing", 5)
    assert _run(tmp_path) == 5
    assert fakes["started"] == []


def test_no_report_gives_pytest_no_report_plugin(tmp_path: Path, fakes: dict[str, Any]) -> None:
    fakes["outcome"] = ("collect-and-write", 0)
    assert _run(tmp_path, "--no-report") == 0
    assert fakes["plugins"] is None and fakes["started"] == [] and fakes["built"] == []


@pytest.mark.integration
def test_run_no_report_never_imports_pyspark(tmp_path: Path) -> None:
    """A real run (default workers) in a fresh interpreter: pyspark is never imported."""
    code = (
        "import sys; from conformance import cli\n"
        f"rc = cli.main(['run', '--no-report', '--case', 'exchange.default-access-*', '--results', "
        f"{str(tmp_path / 'r')!r}, '--report-out', {str(tmp_path / 'rep')!r}])\n"
        "print('RC', rc, 'PYSPARK', any(m == 'pyspark' or m.startswith('pyspark.') for m in sys.modules))\n"
        "sys.stdout.flush()\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, stdin=subprocess.DEVNULL)
    assert "RC 0 PYSPARK False" in res.stdout, res.stdout[-2000:] + res.stderr[-2000:]


def test_bench_run_prints_every_phase(tmp_path: Path, fakes: dict[str, Any],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    fakes["outcome"] = ("collect-and-write", 0)
    assert cli.main(["bench", "run", "--json", "-n", "0", "--results", str(tmp_path / "r"),
                     "--report-out", str(tmp_path / "rep")]) == 0
    phases = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"suite", "jvm start (overlapping the suite)", "jvm start not hidden by the suite",
            "report (wall, from the suite's end)", "report: read+parse", "report: tables",
            "total"} <= set(phases), phases
    assert phases["report: read+parse"] == 0.5 and all(v >= 0 for v in phases.values())


@pytest.mark.parametrize(("cores", "n"), [(1, 3), (2, 6), (3, 8), (16, 8)])
def test_default_workers_is_three_times_the_cores_between_2_and_8(cores: int, n: int) -> None:
    assert run_cmd.default_workers(cores) == n


@pytest.mark.parametrize(("argv", "workers"), [
    ([], str(run_cmd.default_workers())),
    (["-n", "3"], "3"),
    (["--restart-cmd", "true"], "0"),  # acts on the one shared broker: in-process
    (["--alarm-cmd", "true {state}"], "0"),
    (["--", "--amqp-restart-cmd=true"], "0"),
])
def test_run_workers_default(argv: list[str], workers: str) -> None:
    args = run_cmd._run_parser().parse_args(argv)
    run_cmd._resolve_workers(args)
    assert args.workers == workers


@pytest.mark.parametrize(("argv", "spelled"), [
    (["--restart-cmd", "true"], "--restart-cmd"),
    (["--alarm-cmd", "true {state}"], "--alarm-cmd"),
    # the plugin's own spelling after --: the same shared broker, so the same refusal
    (["--", "--amqp-alarm-cmd", "true {state}"], "--amqp-alarm-cmd"),
    (["--", "--amqp-restart-cmd=true"], "--amqp-restart-cmd"),
])
def test_explicit_workers_with_a_broker_command_is_still_refused(argv: list[str], spelled: str) -> None:
    args = run_cmd._run_parser().parse_args(["-n", "2", *argv])
    run_cmd._resolve_workers(args)
    assert f"-n cannot be combined with {spelled}:" in (run_cmd.bad_run_input(args) or "")


def test_in_process_run_with_a_broker_command_is_accepted() -> None:
    args = run_cmd._run_parser().parse_args(["-n", "0", "--", "--amqp-alarm-cmd", "true {state}"])
    run_cmd._resolve_workers(args)
    assert run_cmd.bad_run_input(args) is None
