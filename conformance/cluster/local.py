"""A local RabbitMQ cluster: N nodes of the installed rabbitmq-server, joined, torn down on any exit.

Each node has its own node name (``amqpc<run>n<i>@localhost``), AMQP and distribution ports,
data, log and pid files and config; all share one Erlang cookie in a HOME made for the run and
one epmd the run starts on a free port (``ERL_EPMD_PORT``, nodes run with ``-start_epmd false``),
so nothing the run starts is shared with anybody else's RabbitMQ and all of it is stopped at the end.

Configuration (stated, because verdicts depend on it):

- ``cluster_partition_handling = pause_minority`` (RabbitMQ's clustering guide recommends it for
  3+ nodes): a node that finds itself in a minority stops serving until the partition heals;
- ``net_ticktime = 5`` (kernel) so a partition or a paused node is noticed in ~4-6 s, not ~60 s;
- every listener binds 127.0.0.1 (AMQP listener; ``inet_dist_use_interface`` for distribution).
- no plugin enabled, and the plugins directory (``RABBITMQ_PLUGINS_DIR``) holds only what the
  node boots (:func:`conformance.targets.rabbitnode.boot_plugins_dir`): a quarter less CPU per
  node start, the same code running.

Node actions: ``kill`` = SIGKILL of the node's process group; ``start`` = spawn again on the same
data and ports; ``pause`` / ``resume`` = SIGSTOP / SIGCONT of the group; ``partition`` = packet
filtering: each node runs in its own cgroup v2 (``<unified>/amqpc-<run>/n<i>``) and an iptables
chain of the run (``AMQPC-<run>``, jumped to from OUTPUT) marks every TCP connection between the
isolated node and the others' distribution ports (``-m cgroup --path``, ``CONNMARK``) and drops
marked packets, both directions; clients (AMQP) and the controller (erl_call) are not cut off.
``heal`` flushes the chain. Without root, iptables or cgroup v2 the partition nemesis is
UNSUPPORTED (one line).

Teardown (``close``, also from ``atexit``, a SIGTERM while inside ``with`` and a failed start):
resume paused nodes, remove the iptables chain, SIGKILL every node's process group and every
process left in the run's cgroups, stop the run's epmd, remove cgroups and the data folder.
Every spawned process also has PR_SET_PDEATHSIG set (spawned from one long-lived thread of the
controller), so a SIGKILLed controller still takes its nodes with it. The process plumbing
(ports, cgroups, sweep, leftovers) lives in :mod:`conformance.cluster.procs`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from conformance.cluster.base import ClusterError, Leader, Node, Unsupported, answers_amqp, wait_amqp
from conformance.cluster.procs import (
    RUN_ENV,
    _cgroup2_root,
    _cgroup_pids,
    _preexec,
    _raise_exit,
    _remove_cgroups,
    _wait_empty,
    leftovers,
    sweep_stale,
)
from conformance.cluster.steady import restart_failed, settle_stream_coordinator, wait_caught_up
from conformance.protocol.wire import URL
from conformance.targets import rabbitnode
from conformance.targets.base import SECOND_VHOST, free_port
from conformance.targets.rabbitnode import EvalError

__all__ = ["RUN_ENV", "LocalCluster", "leftovers", "sweep_stale"]

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
PARTITION_HANDLING = "pause_minority"
NET_TICKTIME = 5
# Set (not "0"): the cluster's folder (nodes' data and logs) is kept when it is stopped, for a post-mortem.
KEEP_ENV = "AMQP_CONFORMANCE_KEEP_CLUSTER"
#: as the single-node local target: small, so the limits cases can cross it
MAX_MESSAGE_SIZE = 1048576


@dataclass
class _LocalNode:
    index: int
    name: str
    port: int
    dist_port: int
    base: Path
    env: dict[str, str]
    cgroup: Path | None
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False
    inner: dict[str, str] | None = None  # the node's own environment when it runs in a root

    @property
    def url(self) -> URL:
        return URL(host="127.0.0.1", port=self.port)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class LocalCluster:
    """``size`` local RabbitMQ nodes, started and joined by :meth:`start` (use as a context manager).

    ``workdir``: parent folder of the run's data (a temp folder by default). ``on_log``: where
    progress lines go (``print`` to stderr by default in the CLI; silent here)."""

    size: int = 3
    workdir: Path | None = None
    host: str = "127.0.0.1"
    start_timeout: float = 180.0
    on_log: Callable[[str], None] | None = None
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    partition_handling: str = PARTITION_HANDLING
    net_ticktime: int = NET_TICKTIME
    #: run the RabbitMQ of this root filesystem under chroot (conformance.targets.roots: a suite
    #: name or a directory); "" = the installed rabbitmq-server
    root: str = ""

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ClusterError(f"--cluster-size must be at least 1, not {self.size}")
        self._nodes: list[_LocalNode] = []
        self.base: Path | None = None
        self.home: Path | None = None
        self.epmd_port = 0
        self._epmd: subprocess.Popen[bytes] | None = None
        self._cgroup_run: Path | None = None
        self._chain: str | None = None
        self._partition_reason: str | None = None
        self._mark = 0
        self._plugins: Path | None = None
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix=f"amqpc-cluster-{self.run_id}")
        self._closed = False
        self._lock = threading.Lock()
        self.second_vhost: str | None = None
        self.restricted_problem: str | None = None
        self._root: Any = None  # conformance.targets.roots.Root
        self._mount_token: Path | None = None

    # -- public view -------------------------------------------------------------------------

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(Node(n.index, n.name, n.url) for n in self._nodes)

    @property
    def urls(self) -> list[URL]:
        return [n.url for n in self._nodes]

    def supports(self, action: str) -> str | None:
        if action in ("partition", "heal"):
            return self._partition_reason
        return None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        self._old_term = None
        if threading.current_thread() is threading.main_thread():
            # SIGTERM's default ends the process without unwinding: turn it into SystemExit so
            # ``with`` and atexit tear the nodes down. Only when nobody else handles SIGTERM.
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                self._old_term = signal.signal(signal.SIGTERM, _raise_exit)
        try:
            self.start_cluster()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)

    def _log(self, line: str) -> None:
        if self.on_log is not None:
            self.on_log(line)

    def start_cluster(self) -> None:
        """Start all nodes in parallel, join them to node 0, add users and vhosts, check clustering."""
        if self.root:
            from conformance.targets import roots
            from conformance.targets.base import TargetError

            try:
                self._root = roots.resolve(self.root)
            except TargetError as exc:
                raise ClusterError(str(exc)) from exc
        else:
            server = RABBITMQ_SERVER if Path(RABBITMQ_SERVER).exists() else shutil.which("rabbitmq-server")
            if not server or not Path(server).exists():
                raise ClusterError(
                    "rabbitmq-server is not installed; install it with: apt-get install -y rabbitmq-server"
                )
        atexit.register(self.close)
        t0 = time.monotonic()
        sweep_stale()
        workdir = self.workdir
        if self._root is not None:
            from conformance.targets import roots

            self._mount_token = roots.acquire(self._root)
            workdir = self._root.outside("/tmp")  # the nodes' folders are where they see them
        self.base = Path(tempfile.mkdtemp(prefix=f"amqpc-cluster-{self.run_id}-", dir=workdir))
        self.home = self.base / "home"
        self.home.mkdir()
        cookie = self.home / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(16).upper())
        cookie.chmod(0o400)
        if self._root is not None:
            from conformance.targets import roots

            self._plugins = rabbitnode.boot_plugins_dir(
                self.base / "plugins", (), lib=self._root.outside(roots.LIB), rebase=self._root.path)
        else:
            self._plugins = rabbitnode.boot_plugins_dir(self.base / "plugins")
        self._setup_cgroups()
        self._start_epmd()
        for i in range(self.size):
            self._nodes.append(self._make_node(i))
        for node in self._nodes:
            self._spawn(node)
        deadline = time.monotonic() + self.start_timeout
        for node in self._nodes:
            wait_amqp(self.host, node.port, deadline, node.alive, f"node {node.name}")
            # AMQP answers before the boot ends; joining and the set-up need the application
            self._call(node.index, rabbitnode.await_running, timeout=max(1.0, deadline - time.monotonic()))
        self._log(f"cluster {self.run_id}: {self.size} nodes up in {time.monotonic() - t0:.0f} s")
        first = self._nodes[0].name
        for node in self._nodes[1:]:
            self._call(node.index, rabbitnode.join_cluster, first)
        running = self.running_nodes(0)
        if sorted(running) != sorted(n.name for n in self._nodes):
            raise ClusterError(f"nodes did not cluster: node 0 sees {running}")
        self._setup_users()
        self._setup_partitions()
        settle_stream_coordinator(self._nodes, self.run_id, self._log)
        self._log(f"cluster {self.run_id}: joined in {time.monotonic() - t0:.0f} s total")

    def _make_node(self, i: int) -> _LocalNode:
        assert self.base is not None and self.home is not None
        port, dist = free_port(self.host), free_port(self.host)
        name = f"amqpc{self.run_id}n{i}@localhost"
        base = self.base / f"n{i}"
        base.mkdir()
        (base / "enabled_plugins").write_text("[].\n")
        (base / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = {self.host}:{port}\n"
            "loopback_users.guest = true\n"
            f"max_message_size = {MAX_MESSAGE_SIZE}\n"
            f"cluster_partition_handling = {self.partition_handling}\n"
        )
        octets = ",".join(self.host.split("."))
        (base / "advanced.config").write_text(
            f"[{{kernel, [{{net_ticktime, {self.net_ticktime}}},\n"
            f"            {{inet_dist_use_interface, {{{octets}}}}}]}}].\n"
        )
        env = dict(os.environ)
        env.update(
            {
                "HOME": str(self.home),
                RUN_ENV: self.run_id,
                "ERL_EPMD_PORT": str(self.epmd_port),
                "ERL_EPMD_ADDRESS": self.host,
                "RABBITMQ_NODENAME": name,
                "RABBITMQ_NODE_IP_ADDRESS": self.host,
                "RABBITMQ_NODE_PORT": str(port),
                "RABBITMQ_DIST_PORT": str(dist),
                "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
                "RABBITMQ_LOG_BASE": str(base / "log"),
                "RABBITMQ_LOGS": str(base / "log" / "rabbit.log"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
                "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
                "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
                "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-start_epmd false",
                # every other erl of the run too (rabbitmqctl during start): one it spawns after this process
                # was SIGKILLed would otherwise start an `epmd -daemon` nobody stops
                "ERL_FLAGS": "-start_epmd false",
            }
        )
        if self._plugins is not None:
            env["RABBITMQ_PLUGINS_DIR"] = str(self._plugins)
        inner: dict[str, str] | None = None
        if self._root is not None:
            from conformance.targets import roots

            (base / "log").mkdir()
            (base / "mnesia").mkdir()
            self._root.own(self.base)
            # the node sees in-root paths and nothing of the host's environment; the host's erl_call
            # (env) reaches it with HOME = the shared home as the host sees it
            inner = {k: (self._root.inside(Path(v)) if v.startswith(str(self.base)) else v)
                     for k, v in env.items() if k.startswith(("RABBITMQ_", "ERL_", "HOME")) or k == RUN_ENV}
            inner.update({"PATH": roots.PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})
        cgroup = None
        if self._cgroup_run is not None:
            cgroup = self._cgroup_run / f"n{i}"
            cgroup.mkdir(exist_ok=True)
        return _LocalNode(i, name, port, dist, base, env, cgroup, inner=inner)

    def _popen(
        self, argv: list[str], env: dict[str, str], log: Path, cgroup: Path | None, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Spawn from the controller's one long-lived thread, so PR_SET_PDEATHSIG (which follows
        the spawning *thread*) fires only when the controller's process dies."""

        def spawn() -> subprocess.Popen[bytes]:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("ab") as out:
                return subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                    preexec_fn=_preexec(cgroup, os.getpid()),
                )

        try:
            return self._spawner.submit(spawn).result()
        except OSError as exc:
            raise ClusterError(f"cannot start {argv[0]}: {exc}") from exc

    def _start_epmd(self) -> None:
        assert self.base is not None
        epmd = shutil.which("epmd") or "/usr/lib/erlang/bin/epmd"
        self.epmd_port = free_port(self.host)
        env = {**os.environ, "ERL_EPMD_PORT": str(self.epmd_port), RUN_ENV: self.run_id}
        argv = [epmd, "-port", str(self.epmd_port), "-address", self.host]
        if self._root is not None:  # the root's epmd: the release its nodes come with
            from conformance.targets import roots

            argv = self._root.command({"ERL_EPMD_PORT": str(self.epmd_port), RUN_ENV: self.run_id},
                                      [roots.EPMD, "-port", str(self.epmd_port), "-address", self.host])
        self._epmd = self._popen(
            argv,
            env,
            self.base / "epmd.log",
            self._cgroup_run / "epmd" if self._cgroup_run else None,
        )
        deadline = time.monotonic() + 10
        import socket

        while True:
            try:
                with socket.create_connection((self.host, self.epmd_port), timeout=0.5):
                    return
            except OSError:
                if self._epmd.poll() is not None or time.monotonic() > deadline:
                    raise ClusterError(f"epmd did not listen on {self.host}:{self.epmd_port}") from None
                time.sleep(0.05)  # epmd binds within milliseconds; no event to wait on

    def _spawn(self, node: _LocalNode) -> None:
        # A node's working directory is its own folder, as the packaged unit's WorkingDirectory
        # (/var/lib/rabbitmq): a node started together with another runs part of its boot with
        # Mnesia's dir unset (rabbit_mnesia:with_running_or_clean_mnesia), and a schema update from
        # the other node then writes Mnesia.<node> in the working directory. Under chroot that was the
        # root's /, unwritable: "Cannot create Mnesia dir ... eacces", BOOT FAILED (docs/findings.md).
        if self._root is not None and node.inner is not None:
            from conformance.targets import roots

            argv = self._root.command(node.inner, [roots.SERVER], cwd=self._root.inside(node.base))
            node.proc = self._popen(argv, node.env, node.base / "stdout.log", node.cgroup)
            return
        server = RABBITMQ_SERVER if Path(RABBITMQ_SERVER).exists() else str(shutil.which("rabbitmq-server"))
        node.proc = self._popen([server], node.env, node.base / "stdout.log", node.cgroup, cwd=node.base)

    # -- node calls (conformance.targets.rabbitnode: erl_call, rabbitmqctl's calls) -----------

    def _call(self, index: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(node name, node env, *args)`` of :mod:`conformance.targets.rabbitnode` on node
        ``index``; ClusterError (one line) when the node does not answer or refuses."""
        node = self._nodes[index]
        try:
            return fn(node.name, node.env, *args, **kwargs)
        except EvalError as exc:
            raise ClusterError(str(exc)) from exc

    def running_nodes(self, index: int) -> list[str]:
        """The running nodes node ``index`` sees (what ``rabbitmqctl cluster_status`` prints)."""
        return list(self._call(index, rabbitnode.running_nodes))

    def wait_running(self, timeout: float = 120.0) -> None:
        """Wait until some answering node sees every node running (after a kill, a partition);
        ClusterError naming what it last saw when the deadline passes. Then, within the same
        deadline, until every quorum queue's restarted members have heard from their leader
        (:func:`~conformance.cluster.steady.wait_caught_up`). A node whose process ended on its own
        meanwhile (its boot failed) is started again (:func:`~conformance.cluster.steady.restart_failed`)."""
        deadline = time.monotonic() + timeout
        last: object = "no node answered"
        restarts: dict[int, int] = {}
        while True:
            restart_failed(self._nodes, restarts, self._spawn, self._log)
            for index in self._answering():
                try:
                    nodes = self.running_nodes(index)
                except ClusterError as exc:
                    last = exc
                    continue
                # and each answers AMQP: a view can still list a node just killed and started again
                silent = [n.name for n in self._nodes if not self.answers(n.index)]
                if len(nodes) == len(self._nodes) and not silent:
                    wait_caught_up(partial(self._call, index, rabbitnode.lagging_quorum_queues), deadline,
                                   lambda line: self._log(f"cluster {self.run_id}: {line}"))
                    return
                last = f"node {self._nodes[index].name} sees {nodes} running; not answering AMQP: {silent}"
                break
            if time.monotonic() > deadline:
                raise ClusterError(f"the cluster did not get all {len(self._nodes)} nodes running: {last}")
            # membership changes send no event a controller outside the cluster can wait on; a
            # look costs one erl_call (milliseconds), so look often
            time.sleep(0.2)

    def _setup_users(self) -> None:
        """The second vhost and the restricted user the other areas need (as the single-node local
        target makes them; definitions are cluster-wide, so node 0 is enough)."""
        try:
            self._call(0, rabbitnode.add_second_vhost)
            self.second_vhost = SECOND_VHOST
        except ClusterError as exc:
            self.restricted_problem = str(exc)
        try:
            self._call(0, rabbitnode.add_restricted_user)
        except ClusterError as exc:
            self.restricted_problem = f"the restricted user could not be created: {exc}"

    # -- node actions --------------------------------------------------------------------------

    def _signal(self, node: _LocalNode, sig: int) -> None:
        if node.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(node.proc.pid, sig)
        for pid in _cgroup_pids(node.cgroup):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def kill(self, index: int) -> None:
        node = self._nodes[index]
        self._signal(node, signal.SIGKILL)
        node.paused = False
        if node.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.proc.wait(timeout=10)
        _wait_empty(node.cgroup, 10)

    def start(self, index: int, timeout: float | None = None) -> None:
        node = self._nodes[index]
        if node.alive():
            return
        self._spawn(node)
        wait_amqp(
            self.host,
            node.port,
            time.monotonic() + (timeout or self.start_timeout),
            node.alive,
            f"node {node.name}",
        )

    def pause(self, index: int) -> None:
        node = self._nodes[index]
        self._signal(node, signal.SIGSTOP)
        node.paused = True

    def resume(self, index: int) -> None:
        node = self._nodes[index]
        self._signal(node, signal.SIGCONT)
        node.paused = False

    def alive(self, index: int) -> bool:
        return self._nodes[index].alive() and not self._nodes[index].paused

    def answers(self, index: int) -> bool:
        return answers_amqp(self.host, self._nodes[index].port)

    # -- partitions --------------------------------------------------------------------------

    def _setup_cgroups(self) -> None:
        if os.geteuid() != 0:
            self._partition_reason = "partition needs root (iptables and cgroups); this run is not root"
            return
        if not shutil.which("iptables"):
            self._partition_reason = "partition needs iptables, which is not installed"
            return
        root = _cgroup2_root()
        if root is None:
            self._partition_reason = (
                "partition needs a cgroup v2 hierarchy (for iptables -m cgroup); none is mounted"
            )
            return
        try:
            run = root / f"amqpc-{self.run_id}"
            run.mkdir()
            self._cgroup_run = run
            (run / "epmd").mkdir()
        except OSError as exc:
            self._partition_reason = f"partition: cannot create a cgroup under {root}: {exc}"

    def _iptables(self, *args: str) -> None:
        done = subprocess.run(["iptables", "-w", "5", *args], capture_output=True, timeout=30)
        if done.returncode != 0:
            raise ClusterError(f"iptables {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")

    def _setup_partitions(self) -> None:
        if self._partition_reason is not None or self._cgroup_run is None:
            return
        chain = f"AMQPC-{self.run_id}"
        try:
            self._iptables("-N", chain)
            self._chain = chain
            self._iptables("-I", "OUTPUT", "-j", chain)
            # probe: is the cgroup match usable here?
            self._iptables(
                "-A", chain, "-p", "tcp", "-m", "cgroup", "--path", self._cgpath(0), "-j", "RETURN"
            )
            self._iptables("-F", chain)
        except (ClusterError, OSError, subprocess.TimeoutExpired) as exc:
            self._partition_reason = f"partition: iptables cannot filter by cgroup here ({exc})"

    def _cgpath(self, index: int) -> str:
        return f"amqpc-{self.run_id}/n{index}"

    def partition(self, index: int) -> None:
        """Cut node ``index`` off from every other node (distribution traffic only)."""
        if self._partition_reason is not None or self._chain is None:
            raise Unsupported(self._partition_reason or "partition is not set up")
        node = self._nodes[index]
        others = [n for n in self._nodes if n.index != index]
        # a new mark per partition, so connections marked by an earlier one are not dropped again
        self._mark += 1
        mark = hex(0x0A3C0000 + self._mark)
        chain = self._chain
        for rule in [
            [
                "-p",
                "tcp",
                "-m",
                "cgroup",
                "--path",
                self._cgpath(index),
                "-m",
                "multiport",
                "--dports",
                ",".join(str(n.dist_port) for n in others),
            ],
            *[
                ["-p", "tcp", "-m", "cgroup", "--path", self._cgpath(n.index), "--dport", str(node.dist_port)]
                for n in others
            ],
        ]:
            self._iptables("-A", chain, *rule, "-j", "CONNMARK", "--set-mark", mark)
        self._iptables("-A", chain, "-m", "connmark", "--mark", mark, "-j", "DROP")

    def heal(self) -> None:
        if self._chain is not None:
            self._iptables("-F", self._chain)

    # -- queues and policies ---------------------------------------------------------------

    def _answering(self) -> list[int]:
        return [n.index for n in self._nodes if n.alive() and not n.paused]

    def leader(self, queue: str, vhost: str = "/") -> Leader:
        """Ask a running node where ``queue`` lives (:func:`conformance.targets.rabbitnode.queue_home`,
        what ``rabbitmqctl list_queues name type leader members pid slave_pids`` shows): a quorum
        queue's or stream's ``leader`` and ``members``; a classic queue's master (the node of its
        ``pid``) and mirrors (of its ``slave_pids``)."""
        last = "no node running"
        for index in self._answering():
            node = self._nodes[index]
            try:
                home = self._call(index, rabbitnode.queue_home, queue, vhost, timeout=30)
            except ClusterError as exc:
                last = str(exc)
                continue
            if home is None:
                last = f"node {node.name} does not list queue {queue!r}"
                continue
            how = f"{rabbitnode.transport()} -n {node.name}: "
            if home.queue_type in ("quorum", "stream") and home.leader:
                how += "rabbit_amqqueue:info leader members (as list_queues name type leader members)"
                return Leader(queue, home.queue_type, home.leader, home.members, how)
            return Leader(queue, home.queue_type, home.master, (home.master, *home.mirrors),
                          how + "the queue record's pid and slave_pids (as list_queues name pid slave_pids)")
        raise ClusterError(f"cannot say where {queue!r} leads: {last}")

    def set_policy(self, name: str, pattern: str, definition: str, vhost: str = "/") -> None:
        self._call(self._answering()[0], rabbitnode.set_policy, vhost, name, pattern, definition)

    def clear_policy(self, name: str, vhost: str = "/") -> None:
        self._call(self._answering()[0], rabbitnode.clear_policy, vhost, name)

    # -- teardown ----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        chain = self._chain
        for rule in () if chain is None else (("-D", "OUTPUT", "-j", chain), ("-F", chain), ("-X", chain)):
            with contextlib.suppress(Exception):
                self._iptables(*rule)
        for node in self._nodes:
            # SIGCONT first: a stopped process does not act on signals other than SIGKILL/SIGCONT
            self._signal(node, signal.SIGCONT)
            self._signal(node, signal.SIGKILL)
        for node in self._nodes:
            if node.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.proc.wait(timeout=10)
            _wait_empty(node.cgroup, 10)
        if self._epmd is not None:
            self._epmd.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._epmd.wait(timeout=10)
        if self._cgroup_run is not None:
            for pid in _cgroup_pids(self._cgroup_run / "epmd"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _wait_empty(self._cgroup_run / "epmd", 5)
            _remove_cgroups(self._cgroup_run, time.monotonic() + 30)
        self._spawner.shutdown(wait=False)
        if self._root is not None and self._mount_token is not None:
            from conformance.targets import roots

            with contextlib.suppress(Exception):
                roots.release(self._root, self._mount_token)
        if self.base is not None:
            if os.environ.get(KEEP_ENV, "") not in ("", "0"):
                print(f"local cluster: kept {self.base} ({KEEP_ENV} set)", file=sys.stderr)
            else:
                shutil.rmtree(self.base, ignore_errors=True)
