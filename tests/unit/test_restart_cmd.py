"""``--restart-cmd`` is a shell command (its help says so): pipes, ``&&`` and variables work, a
failing command says its exit code and stderr, and one that outlives its timeout is killed with
everything it started."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from conformance.protocol.wire import URL
from conformance.targets import url as url_target
from conformance.targets.base import TargetError

BROKER = URL.parse("amqp://guest:guest@127.0.0.1:1/")  # never reached: amqp_ready is replaced


@pytest.fixture(autouse=True)
def ready(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(url_target, "amqp_ready", lambda u, deadline, what: seen.append(what))
    return seen


def test_the_command_runs_in_a_shell(tmp_path: Path, ready: list[str]) -> None:
    out = tmp_path / "out"
    ctl = url_target.CommandController(f"X=restarted; echo $X | tr a-z A-Z > {out} && echo done >> {out}",
                                       BROKER, timeout=10)
    ctl.restart()
    assert out.read_text().split() == ["RESTARTED", "done"]
    assert ready == ["broker at amqp://guest:***@127.0.0.1:1/%2F"]


def test_a_failing_command_says_its_code_and_stderr(ready: list[str]) -> None:
    ctl = url_target.CommandController("echo no such service >&2; exit 3", BROKER, timeout=10)
    with pytest.raises(TargetError, match="--restart-cmd exited 3: no such service"):
        ctl.restart()
    assert ready == []


def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    ctl = url_target.CommandController(f"sleep 60 & echo $! > {pid_file}; wait", BROKER, timeout=1)
    with pytest.raises(TargetError, match="did not end within 1 s"):
        ctl.restart()
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as stat:
            if stat.read().split()[2] == "Z":  # killed, not yet reaped by its (dead) parent's reaper
                break
        time.sleep(0.05)
    else:
        pytest.fail(f"the command's child {child} outlived the kill")
