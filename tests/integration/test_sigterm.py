"""A run stopped by SIGTERM (a CI timeout or cancellation), or even SIGKILL, leaves no broker behind.

SIGTERM's default action ends a process without any clean-up; the plugin makes it stop the run as
^C does, so the session target and the workers' private brokers are closed. Whatever else ends a
process (SIGKILL, an xdist worker torn down before its clean-up), the kernel sends each broker
SIGTERM when the process that started it dies (``targets.base._die_with_parent``).
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

from tests.proctable import processes_with_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _brokers(mark: str, run_pid: int) -> list[int]:
    found = []
    for p in processes_with_env(mark):
        try:
            if p != run_pid and b"conformance.broker" in Path(f"/proc/{p}/cmdline").read_bytes():
                found.append(p)
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_stopped_run_leaves_no_broker(tmp_path: Path, sig: int) -> None:
    mark = f"AMQPC_SIGTERM_TEST={uuid.uuid4().hex}"
    # TMPDIR: a SIGKILLed run cannot remove its brokers' temp folders (the brokers stop, their
    # folders stay); the test's own folder takes them
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "AMQPC_SIGTERM_TEST": mark.split("=", 1)[1], "TMPDIR": str(tmp_path / "tmp"),
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "conformance.cli", "run", "--no-report", "-n", "2", "--results", str(results)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        # wait until cases run and a worker has its private broker (restart cases): the session
        # target plus at least one worker's broker
        while time.monotonic() < deadline and len(_brokers(mark, proc.pid)) < 2:
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            time.sleep(0.2)
        brokers = _brokers(mark, proc.pid)
        assert len(brokers) >= 2, f"expected the target and a private broker, found {brokers}"
        proc.send_signal(sig)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30  # a broker's own clean shutdown takes a moment
        while time.monotonic() < deadline and [p for p in brokers if Path(f"/proc/{p}").exists()]:
            time.sleep(0.2)
        left = [p for p in brokers if Path(f"/proc/{p}").exists()]
        assert left == [], f"brokers left running after signal {sig}: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for p in processes_with_env(mark):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
