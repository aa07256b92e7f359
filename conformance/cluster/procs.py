"""The process plumbing of a local cluster: free ports, cgroups, the parent-death signal, the
sweep of what a SIGKILLed run left behind, and the leftovers check of tests.

Split from :mod:`conformance.cluster.local` (the controller), which imports everything here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

CGROUP2_ROOT = Path("/sys/fs/cgroup/unified")
CGROUP2_FALLBACK = Path("/sys/fs/cgroup")
PR_SET_PDEATHSIG = 1
#: every process a run spawns carries this variable (its run id): tests find leftovers by it
RUN_ENV = "AMQPC_CLUSTER_RUN"


def _cgroup2_root() -> Path | None:
    for root in (CGROUP2_ROOT, CGROUP2_FALLBACK):
        if (root / "cgroup.procs").exists() and (root / "cgroup.subtree_control").exists():
            return root
    return None


def _preexec(cgroup: Path | None, parent: int) -> Callable[[], None]:
    """Runs in the child before exec: join the node's cgroup (so the partition rules see its
    sockets), and have the kernel send SIGTERM when the spawning thread dies (rabbitmq-server's
    script forwards TERM to the Erlang VM, which then shuts down)."""
    try:
        prctl: Any = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        prctl = None

    def run() -> None:
        if cgroup is not None:
            with open(cgroup / "cgroup.procs", "w") as f:
                f.write(str(os.getpid()))
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != parent:
                os._exit(1)

    return run


def sweep_stale(run_id: str | None = None, min_age: float = 60.0) -> list[str]:
    """Remove what a run killed with SIGKILL could not: its iptables chain and cgroups, for every
    ``amqpc-<run>`` cgroup no process is left in (its nodes died with it: PR_SET_PDEATHSIG).
    Only run ``run_id`` when given; only cgroups ``min_age`` seconds old. Returns the run ids swept."""
    root = _cgroup2_root()
    if os.geteuid() == 0:
        from conformance.targets.roots import sweep_mounts

        with contextlib.suppress(OSError):
            sweep_mounts()  # a root's proc and dev a killed run left mounted
    if root is None or os.geteuid() != 0:
        return []
    swept = []
    for run in root.glob(f"amqpc-{run_id or '*'}/"):
        subs = [p for p in run.iterdir() if p.is_dir()]
        # a run's cgroups are empty for a moment while it starts: only sweep ones a minute old
        if time.time() - run.stat().st_mtime < min_age or any(_cgroup_pids(p) for p in [run, *subs]):
            continue
        run_id = run.name.removeprefix("amqpc-")
        chain = f"AMQPC-{run_id}"
        for args in (["-D", "OUTPUT", "-j", chain], ["-F", chain], ["-X", chain]):
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(["iptables", "-w", "5", *args], capture_output=True, timeout=30)
        for sub in [*subs, run]:
            with contextlib.suppress(OSError):
                sub.rmdir()
        for data in Path(tempfile.gettempdir()).glob(f"amqpc-cluster-{run_id}-*"):
            shutil.rmtree(data, ignore_errors=True)  # the data of a run in the default temp folder
        swept.append(run_id)
    return swept


def leftovers(run_id: str) -> list[str]:
    """What of run ``run_id`` still exists: processes (by :data:`RUN_ENV`), its iptables chain,
    its cgroup — for tests and a final check. Empty when the teardown was complete."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
            if f"{RUN_ENV}={run_id}".encode() in env:
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(f"process {proc.name}: {(proc / 'cmdline').read_bytes()[:80]!r}")
        except OSError:
            continue
    done = (
        subprocess.run(["iptables", "-w", "5", "-S"], capture_output=True, timeout=30)
        if shutil.which("iptables") and os.geteuid() == 0
        else None
    )
    if done is not None and f"AMQPC-{run_id}".encode() in done.stdout:
        found.append(f"iptables chain AMQPC-{run_id}")
    root = _cgroup2_root()
    if root is not None and (root / f"amqpc-{run_id}").exists():
        found.append(f"cgroup {root / f'amqpc-{run_id}'}")
    found += [f"data {d}" for d in Path(tempfile.gettempdir()).glob(f"amqpc-cluster-{run_id}-*")]
    from conformance.targets.roots import roots_dir, stray_mounts

    for where in roots_dir().glob("*/"):
        found += [f"data {d}" for d in (where / "tmp").glob(f"amqpc-cluster-{run_id}-*")]
    found += [f"mount {m} (no holder left)" for m in stray_mounts()]
    return found


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _remove_cgroups(run: Path, deadline: float) -> None:
    """rmdir the run's cgroups, retrying until ``deadline``: a killed node's Erlang VM is orphaned
    when its shell dies first and stays in the cgroup as a zombie until PID 1 reaps it (seconds,
    where PID 1 is a slow reaper). What is still there at the deadline the next run sweeps."""
    while True:
        left = []
        for sub in [*sorted(run.glob("*/")), run]:
            try:
                sub.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                left.append(sub)
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.2)  # zombies are reaped by PID 1, which we cannot wait on


def _cgroup_pids(cgroup: Path | None) -> list[int]:
    if cgroup is None:
        return []
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _wait_empty(cgroup: Path | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _cgroup_pids(cgroup) and time.monotonic() < deadline:
        for pid in _cgroup_pids(cgroup):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)  # the kernel empties cgroup.procs as the processes are reaped
