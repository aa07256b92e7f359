"""The CLI's answers to bad input: one clear line, non-zero, fast."""

from __future__ import annotations

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
    t0 = time.monotonic()
    if mode is None:
        res = cli("run", "--broker-url", f"amqp://guest:guest@127.0.0.1:{free_port()}/", cwd=tmp_path)
    else:
        with FakeBroker(mode) as fb:
            res = cli("run", "--broker-url", fb.url, cwd=tmp_path)
    assert time.monotonic() - t0 < 10
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
    assert res.returncode != 0 and "unknown local broker 'qpid'" in res.stdout + res.stderr
