"""A run stopped by SIGTERM (a CI timeout or cancellation) stops the brokers it started.

SIGTERM's default action ends a process without any clean-up; the plugin makes it stop the run as
^C does, so the session target and the workers' private brokers are closed, not orphaned.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _marked(mark: str) -> list[int]:
    """Processes whose environment carries ``mark`` (the run and everything it spawned)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_sigterm_stops_the_brokers_the_run_started(tmp_path: Path) -> None:
    mark = f"AMQPC_SIGTERM_TEST={uuid.uuid4().hex}"
    env = {**os.environ, "AMQPC_SIGTERM_TEST": mark.split("=", 1)[1],
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance.cli", "run", "--no-report", "-n", "2", "--results", str(results)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        # wait until cases are running (results are being written): the target is up
        while time.monotonic() < deadline and not any(p.stat().st_size for p in results.glob("*.jsonl")):
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            time.sleep(0.2)
        brokers = [p for p in _marked(mark) if p != proc.pid and b"conformance.broker" in
                   Path(f"/proc/{p}/cmdline").read_bytes()]
        assert brokers, "the run started no reference broker"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30  # a broker's own clean shutdown takes a moment
        while time.monotonic() < deadline and [p for p in brokers if Path(f"/proc/{p}").exists()]:
            time.sleep(0.2)
        left = [p for p in brokers if Path(f"/proc/{p}").exists()]
        assert left == [], f"brokers left running after SIGTERM: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for p in _marked(mark):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
