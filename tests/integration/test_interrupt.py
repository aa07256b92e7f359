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
