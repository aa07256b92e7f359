"""^C during ``run`` exits 130 ("interrupted"), not 2 (which means bad arguments)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_during_run_exits_130(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMQP_CONFORMANCE_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance.cli", "run", "--no-report", "--results", str(tmp_path / "r")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )
    killer = threading.Timer(180, proc.kill)  # the test's deadline, whatever happens
    killer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # a module's progress line: cases are running
            if "test_" in line and "[" in line:
                break
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "amqp-conformance: interrupted" in err
