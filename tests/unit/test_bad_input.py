"""The error contract for bad option values: one stderr line naming the option, exit 2, before
anything starts (no broker is needed: every input here is refused before a target is opened)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import cli
from conformance.scenarios import areas_of

BAD_RUN = [
    (["--fail-on", "BOGUS"], "--fail-on"),
    (["--profile", "bogus"], "--profile"),
    (["--queue-type", "stream"], "--queue-type"),
    (["--queue-type", "classic,nosuch"], "--queue-type"),
    (["--case-timeout", "-1"], "--case-timeout"),
    (["--case-timeout", "soon"], "--case-timeout"),
    (["--case-ceiling", "0.5"], "--case-ceiling"),
    (["-n", "abc"], "-n"),
    (["-n", "2", "--broker-url", "amqp://guest:guest@127.0.0.1:1/", "--restart-cmd", "true"],
     "--restart-cmd"),
    (["-n", "2", "--alarm-cmd", "x {state}"], "--alarm-cmd"),
    (["--broker-url", "localhost:5672"], "--broker-url"),
    (["--restricted-url", "http://x/"], "--restricted-url"),
    (["--broker", "qpid"], "--broker"),
    (["--cluster-url", "amqp://127.0.0.1:1/", "--broker", "local:rabbitmq"], "--cluster-url"),
    (["--broker", "cluster"], "--cluster-url"),
    (["--cluster-cmd-kill", "kill {node}"], "--cluster-cmd-kill"),
    (["--cluster-url", "amqp://127.0.0.1:1/", "--cluster-cmd-kill", "kill -9"], "--cluster-cmd-kill"),
    (["--broker", "container:"], "--broker"),
    (["--broker", "url"], "--broker"),
    (["--broker", "local:garagemq", "--tls"], "--tls"),
    (["--broker-url", "amqp://guest:guest@127.0.0.1:1/", "--tls"], "--tls"),
    (["--broker", "reference", "--broker-url", "amqp://h/"], "--broker"),
    (["--expected-failures", "no-such-file.toml"], "--expected-failures"),
    (["--tls-ca", "no-such-ca.pem"], "--tls-ca"),
    (["--max-message-size", "1MiB"], "--max-message-size"),
    (["--alarm-cmd", "rabbitmqctl set_vm_memory_high_watermark 0"], "--alarm-cmd"),
    (["--area", "nosuch"], "--area"),
    (["--area", "confirms,nosuch"], "--area"),
    (["--", "--amqp-max-message-size", "1MiB"], "--amqp-max-message-size"),
    (["--", "--amqp-profile=bogus"], "--amqp-profile"),
    (["--", "--bogus"], "--bogus"),  # pytest's own parser, before anything starts
    (["--", "--maxfail=abc"], "--maxfail"),
    (["--case-timeout"], "--case-timeout"),
    (["--no-such-option"], "--no-such-option"),
    (["--cas", "x"], "--cas"),  # no abbreviations
]


@pytest.mark.parametrize(("argv", "option"), BAD_RUN, ids=[" ".join(a) for a, _o in BAD_RUN])
def test_bad_run_input_is_one_line_and_exit_2(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("AMQP_CONFORMANCE_")]:
        monkeypatch.delenv(name)
    try:
        code = cli.main(["run", "--no-report", *argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and option in lines[0], err
    assert "Traceback" not in err
    assert not (tmp_path / "reports").exists()  # nothing started, nothing written


def test_a_bad_env_twin_is_named(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMQP_CONFORMANCE_PROFILE", "bogus")
    assert cli.main(["run", "--no-report"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "amqp-conformance: AMQP_CONFORMANCE_PROFILE names an unknown profile 'bogus' "
        "(known: rabbitmq, spec, rabbitmq@RELEASE)"
    ]


def test_comma_lists_are_accepted_for_areas() -> None:
    assert areas_of(["confirms,tx", "tx"]) == ["confirms", "tx"]


@pytest.mark.parametrize("argv", [["--area", "nosuch"], ["--area", "tx,nosuch"], ["--bogus"]])
def test_cases_with_bad_input_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = cli.main(["cases", *argv])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1


def test_cases_into_a_closed_pipe_is_quiet() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        f"{sys.executable} -m conformance.cli cases | head -2", shell=True, capture_output=True, text=True,
        env=env, timeout=120,
    )
    assert len(proc.stdout.splitlines()) == 2
    assert proc.stderr == "", proc.stderr


def test_checkout_only_benchmarks_say_so_when_not_in_a_checkout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "site-packages" / "conformance" / "cli" / "__init__.py"
    monkeypatch.setattr(cli, "__file__", str(fake))
    for sub in ("report", "crash", "flood"):
        assert cli.main(["bench", sub]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "runs from a source checkout only" in err[0], err


def test_mutate_takes_comma_lists_like_run(capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.mutate.runner import main as mutate_main

    assert mutate_main(["--list", "--json", "--area", "qos,tx"]) == 0
    both = {m["id"] for m in json.loads(capsys.readouterr().out)}
    assert mutate_main(["--list", "--json", "--area", "qos", "--area", "tx"]) == 0
    assert both and both == {m["id"] for m in json.loads(capsys.readouterr().out)}


BAD_OTHER = [
    (["mutate", "-n", "abc"], "-n"),
    (["mutate", "--case-timeout", "-1"], "--case-timeout"),
    (["mutate", "--broker", "qpid"], "--broker"),
    (["mutate", "--jobs", "0"], "--jobs"),
    (["mutate", "--mutant", "no-such-*", "--list"], "--mutant"),
    (["fuzz", "--inputs", "x"], "--inputs"),
    (["fuzz", "--broker", "qpid"], "--broker"),
    (["fuzz", "--in-process", "--bound", "0"], "--bound"),
    (["bench", "broker", "--seconds", "0"], "--seconds"),
    (["bench", "broker", "--scenarios", "nosuch"], "scenario"),
    (["bench", "broker", "--broker", "container:x"], "--broker"),
    (["bench", "crash", "--broker", "url"], "--broker"),
    (["bench", "crash", "--cycles", "0"], "--cycles"),
    (["bench", "report", "--rows", "0"], "--rows"),
    (["bench", "nosuch"], "bench nosuch"),
    (["nosuch"], "nosuch"),
    (["gate", "--baseline"], "--baseline"),
    (["report"], "--out"),
    (["broker", "--port", "abc"], "--port"),
    (["cases", "--area"], "--area"),
    # faults: everything judged before a cluster is started or reached
    (["faults", "--cluster-size", "2"], "--cluster-size"),
    (["faults", "--nemesis", "flood"], "--nemesis"),
    (["faults", "--duration", "0"], "--duration"),
    (["faults", "--cluster-inject-loss", "1"], "--cluster-inject-loss"),
    (["faults", "--queue-type", "stream"], "--queue-type"),
    (["faults", "--publishers", "0"], "--publishers"),
    (["faults", "--cluster-cmd-kill", "docker kill {node}"], "--cluster-cmd-kill"),
    (["faults", "--cluster-node-names", "a,b,c"], "--cluster-node-names"),
    (["faults", "--cluster-url", "amqp://h1/,amqp://h2/"], "--cluster-url"),
    (["faults", "--cluster-url", "amqp://h1/,http://h2/,amqp://h3/"], "--cluster-url"),
    (["faults", "--cluster-url", "amqp://h1/,amqp://h2/,amqp://h3/", "--cluster-node-names", "a,b"],
     "--cluster-node-names"),
    (["faults", "--cluster-url", "amqp://h1/,amqp://h2/,amqp://h3/", "--cluster-cmd-kill", "docker kill"],
     "--cluster-cmd-kill"),
    (["faults", "--cluster-url", "amqp://h1/", "--cluster-url", "amqp://h2/,amqp://h3/",
      "--cluster-cmd-pause", "docker pause"], "--cluster-cmd-pause"),
]


@pytest.mark.parametrize(("argv", "said"), BAD_OTHER, ids=[" ".join(a) for a, _s in BAD_OTHER])
def test_bad_input_of_other_commands_is_one_line_and_exit_2(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and said in lines[0], err


@pytest.mark.parametrize(("ini", "option"), [
    ("amqp_case_timeout = -1", "--case-timeout"),
    ("amqp_profile = bogus", "profile"),
])
def test_a_bad_ini_value_is_bad_input_too(ini: str, option: str, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A value from a pytest ini file where run starts goes through the same check: exit 2, one
    line, before anything starts (pytest itself would say 4, which run means for an unusable target)."""
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("AMQP_CONFORMANCE_")]:
        monkeypatch.delenv(name)
    (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    code = cli.main(["run", "--no-report"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and option in err, err
    assert not (tmp_path / "reports").exists()
