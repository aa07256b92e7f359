"""A local cluster's start stopped half-way — the process starting it SIGTERMed or SIGKILLed while
the nodes boot — leaves no process of the run behind (and, after SIGTERM, no iptables chain or
cgroup either)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conformance.cluster.local import RABBITMQ_SERVER, RUN_ENV, leftovers, sweep_stale
from tests.proctable import processes_with_env

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.cluster,
    pytest.mark.skipif(
        shutil.which("rabbitmq-server") is None and not Path(RABBITMQ_SERVER).exists(),
        reason="rabbitmq-server is not installed",
    ),
]

ROOT = Path(__file__).resolve().parents[2]


CHILD = textwrap.dedent(
    """
    import sys
    from conformance.cluster.local import LocalCluster
    with LocalCluster(3, run_id=sys.argv[1], on_log=print):
        print("joined", flush=True)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_start_stopped_half_way_leaves_nothing(sig: int) -> None:
    run_id = f"s{sig}{os.getpid() % 10000:04d}"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, run_id], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        # epmd and three nodes spawned (each node is a shell script with the Erlang VM under it)
        while len(processes_with_env(f"{RUN_ENV}={run_id}")) < 4:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the nodes were not spawned"
            time.sleep(0.2)
        time.sleep(3)  # half-way: the VMs are booting
        proc.send_signal(sig)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    deadline = time.monotonic() + 60
    while processes_with_env(f"{RUN_ENV}={run_id}") and time.monotonic() < deadline:
        time.sleep(0.5)  # SIGKILL: the nodes get SIGTERM from the kernel and shut down
    assert processes_with_env(f"{RUN_ENV}={run_id}") == []
    if sig == signal.SIGTERM:
        assert leftovers(run_id) == []
    else:
        # a SIGKILLed controller cannot remove its (empty) cgroups; the next run sweeps them
        assert [x for x in leftovers(run_id) if x.startswith("process")] == []
        sweep_stale(run_id, min_age=0)
        assert leftovers(run_id) == []
