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


def _spawn_child(run_id: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, run_id], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def test_a_start_stopped_half_way_leaves_nothing() -> None:
    """Two controllers at once (their clusters are independent: own run id, ports, epmd, cgroups),
    one stopped by SIGTERM and one by SIGKILL, so the two waits for the nodes' boot and end overlap."""
    runs = {sig: f"s{sig}{os.getpid() % 10000:04d}" for sig in (signal.SIGTERM, signal.SIGKILL)}
    procs = {sig: _spawn_child(run_id) for sig, run_id in runs.items()}
    try:
        deadline = time.monotonic() + 60
        # epmd and three nodes spawned (each node is a shell script with the Erlang VM under it)
        for sig, run_id in runs.items():
            proc = procs[sig]
            while len(processes_with_env(f"{RUN_ENV}={run_id}")) < 4:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline, "the nodes were not spawned"
                time.sleep(0.2)
        time.sleep(3)  # half-way: the VMs are booting
        for sig, proc in procs.items():
            proc.send_signal(sig)
        for proc in procs.values():
            proc.wait(60)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    deadline = time.monotonic() + 60
    while any(processes_with_env(f"{RUN_ENV}={r}") for r in runs.values()) and time.monotonic() < deadline:
        time.sleep(0.5)  # SIGKILL: the nodes get SIGTERM from the kernel and shut down
    for run_id in runs.values():
        assert processes_with_env(f"{RUN_ENV}={run_id}") == []
    # SIGTERM: the controller tore everything down
    assert leftovers(runs[signal.SIGTERM]) == []
    # SIGKILL: a SIGKILLed controller cannot remove its (empty) cgroups; the next run sweeps them
    killed = runs[signal.SIGKILL]
    assert [x for x in leftovers(killed) if x.startswith("process")] == []
    sweep_stale(killed, min_age=0)
    assert leftovers(killed) == []
