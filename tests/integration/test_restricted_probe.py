"""A wrong password in --restricted-url is one line and exit 4 before any case (it was an ERROR
with a traceback in each access case)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.targets import spawn_private
from conformance.targets.base import RESTRICTED, with_credentials

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_a_refused_restricted_login_is_one_line_and_exit_4(tmp_path: Path) -> None:
    target = spawn_private("reference", workdir=tmp_path)
    try:
        wrong = with_credentials(target.url, RESTRICTED.name, "not-the-password")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env = {k: v for k, v in env.items() if not k.startswith("AMQP_CONFORMANCE_")}
        res = subprocess.run(
            [sys.executable, "-m", "conformance.cli", "run", "--no-report", "--broker-url", str(target.url),
             "--restricted-url", str(wrong), "--area", "access", "--results", str(tmp_path / "r")],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
        )
    finally:
        target.close()
    said = [line for line in res.stderr.splitlines() if "restricted-url" in line]
    assert res.returncode == 4, res.stderr[-2000:]
    assert len(said) == 1 and "login refused" in said[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr and "not-the-password" not in res.stderr
    assert not list((tmp_path / "r").glob("*.jsonl"))  # no case ran
