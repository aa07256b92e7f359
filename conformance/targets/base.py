"""Targets: where the suite points. A target gives a URL and, where it can, a controller."""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from conformance.protocol.wire import URL

if TYPE_CHECKING:
    from conformance.targets.tlscerts import TLSFiles

SECOND_VHOST = "amqpc-second"

def with_credentials(url: URL, user: str, password: str) -> URL:
    """``url`` with its user and password replaced (host, port, vhost and query kept)."""
    return url.with_(user=user, password=password)


@dataclass(frozen=True)
class RestrictedUser:
    """A user with RabbitMQ-style permissions: ``configure``, ``write`` and ``read`` are regular
    expressions on resource names, in the vhost "/" only."""

    name: str
    password: str
    configure: str
    write: str
    read: str

    def url(self, url: URL) -> URL:
        """``url`` logged in as this user."""
        return with_credentials(url, self.name, self.password)


# The restricted user the spawned targets create for the access cases (``--restricted-url``).
# Resource names decide what it may do: acc-ok-* everything, acc-c-* configure only, acc-w-*
# write only, acc-r-* read only, any other name (acc-no-*, amq.default, amq.gen-*) nothing -- but
# read on amq.direct: the harness's round-trip probe is a passive declare of amq.direct, and from
# RabbitMQ 4.3.1 a passive declare needs some permission on its resource (any one: release notes
# 4.3.1, #16272; 4.2.6 and 4.3.0 asked for configure, #16085), so without one every round trip
# on the user's channels is refused. It has no permissions in SECOND_VHOST.
RESTRICTED = RestrictedUser(
    name="amqpc-restricted",
    password="amqpc-restricted-pw",
    configure="^acc-(ok|c)-",
    write="^acc-(ok|w)-",
    read="^(acc-(ok|r)-|amq\\.direct$)",
)


class TargetError(Exception):
    """A target could not be started or reached; the message is one line saying what to do."""


class Controller(Protocol):
    """Lifecycle control of a broker process, for the durability cases."""

    def stop(self) -> None: ...  # clean shutdown, data kept
    def kill(self) -> None: ...  # kill -9, data kept as the crash left it
    def start(self) -> None: ...  # start again on the same data dir and port; returns when ready
    def restart(self, *, kill: bool = False) -> None: ...


@dataclass
class Target:
    name: str  # a kind of the registry (conformance.targets.kinds): reference, url, local:rabbitmq …
    url: URL
    controller: Controller | None = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    # A second virtual host the target's user may open, for vhost-separation cases.
    second_vhost: str | None = None
    # A second user with RabbitMQ-style restricted permissions (RESTRICTED), for the access
    # cases; when there is none, ``restricted_unsupported`` says why (one line).
    restricted_url: URL | None = None
    restricted_unsupported: str | None = None
    # Limits the broker was configured with and a client cannot discover on the wire
    # (e.g. {"max_message_size": 1048576}); the limits cases are UNSUPPORTED without them.
    limits: dict[str, int] = field(default_factory=dict)
    # Raises (True) or clears (False) the broker's memory alarm, for the connection.blocked
    # cases; None where the suite cannot reach the broker's controls.
    alarm: Callable[[bool], None] | None = None
    # The same as a shell command ({state} = on | off), for another process (mutate's pytest runs).
    alarm_cmd: str | None = None
    # When the broker stopped answering mid-run: writes what the broker can tell of its own state
    # into the file given and returns one line naming it (None if it had nothing to say).
    post_mortem: Callable[[Path], str | None] | None = None

    def settle_topology(self) -> None:
        """Clean restart, so declarations made so far are on disk before a crash test.

        A crash test checks what a broker promised about *messages* (a publisher confirm,
        a tx.commit-ok). No document promises that a durable queue declared a moment before
        a kill -9 survives it: RabbitMQ 3.10 keeps its definitions in Mnesia, and a
        queue declared about a second before the kill was seen missing after the restart
        (2 of 6 runs under load). A clean stop writes the definitions out first, so the
        crash then tests only the message guarantee.
        """
        if self.controller is None:
            raise TargetError(f"target {self.name} has no controller to restart it")
        self.controller.restart(kill=False)

    def close(self) -> None:
        while self.cleanup:
            fn = self.cleanup.pop()
            try:
                fn()
            except Exception:  # noqa: BLE001 - shutting down: one failed cleanup must not skip the rest
                pass


@dataclass
class TLSTarget(Target):
    """A target whose ``url`` is its amqps:// listener (verified against ``tls.ca``); the
    plain listener stays up at ``plain_url`` for the cases that compare the two."""

    plain_url: URL | None = None
    tls: TLSFiles | None = None  # tlscerts.TLSFiles


def spawned_target(name: str, url: URL, ctl: Controller, *, tls: TLSFiles | None, plain_url: URL) -> Target:
    """The target of a broker this process started and stops on close: a :class:`TLSTarget` when
    ``url`` is its TLS listener (made with ``tls``), else a plain :class:`Target`."""
    if tls is None:
        return Target(name=name, url=url, controller=ctl, cleanup=[ctl.stop])
    return TLSTarget(name=name, url=url, controller=ctl, cleanup=[ctl.stop], plain_url=plain_url, tls=tls)


def in_own_folder(prefix: str, workdir: Path | None, start: Callable[[Path], Target]) -> Target:
    """``start(folder)`` in a fresh temp folder (``prefix``, under ``workdir``) the target owns: the
    folder (data, logs, config, certificates) is removed when the start fails and, on ``close()``,
    after the broker is stopped (first in ``cleanup``, which runs last first)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=workdir))
    try:
        target = start(folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    target.cleanup.insert(0, lambda: shutil.rmtree(folder, ignore_errors=True))
    return target


def tls_files(folder: Path) -> TLSFiles:
    """Throw-away certificates for a spawned broker's TLS listener (see tlscerts)."""
    from conformance.targets.tlscerts import make_tls_files

    try:
        return make_tls_files(folder)
    except ImportError as exc:
        raise TargetError(
            "a TLS target needs the trustme package (its test CA): pip install 'amqp-conformance[tls]'"
        ) from exc


def amqp_url(host: str, port: int) -> URL:
    """The guest URL of a spawned broker's plain listener."""
    return URL(host=host, port=port)


def amqps_url(host: str, port: int, files: TLSFiles) -> URL:
    """The guest URL of a spawned broker's TLS listener, verified against the CA of ``files``."""
    return URL(scheme="amqps", host=host, port=port, cacertfile=str(files.ca))


def shell_alarm(template: str, timeout: float = 60.0) -> Callable[[bool], None]:
    """A ``Target.alarm`` that runs ``template`` with ``{state}`` replaced by on / off;
    TargetError (one line) when the command fails."""

    def run(on: bool) -> None:
        cmd = template.replace("{state}", "on" if on else "off")
        try:
            done = subprocess.run(
                cmd, shell=True, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TargetError(f"alarm command {cmd!r} failed: {exc}") from exc
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace").strip().splitlines()
            raise TargetError(
                f"alarm command {cmd!r} exited with {done.returncode}: {err[-1] if err else ''}"
            )

    return run


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10_000


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default
    return lo, hi


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing is bound to on ``host``, outside the kernel's ephemeral range.

    A broker is restarted on the ports it was given (its clients' URLs, a node's distribution
    port), and the kernel draws the local port of every outgoing connection from the ephemeral
    range: a port from there can be taken by any client between the stop and the start (a local
    RabbitMQ's restart failed once with ``dist_port_already_used``, the port held by a connection
    of a parallel test). Drawn with ``secrets`` (pytest-randomly seeds ``random`` alike in every
    worker); the ephemeral range only when nothing outside it is free.
    """
    lo, hi = _ephemeral_range()
    spans = [(LOWEST_PORT, lo), (hi + 1, 65536)]
    spans = [(a, b) for a, b in spans if b > a]
    total = sum(b - a for a, b in spans)
    for _ in range(200 if total else 0):
        n = secrets.randbelow(total)
        for a, b in spans:
            if n < b - a:
                port = a + n
                break
            n -= b - a
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_port(host: str, port: int, deadline: float, proc: subprocess.Popen[bytes] | None = None,
              what: str = "broker") -> None:
    """Wait until ``host:port`` accepts TCP connections, the process dies, or the deadline passes."""
    while True:
        if proc is not None and proc.poll() is not None:
            raise TargetError(f"{what} exited with code {proc.returncode} before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TargetError(f"{what} did not listen on {host}:{port} in time")
        time.sleep(0.1)  # polling a port that has no event to wait on


class StopStartRestart:
    """``restart`` as a controller that can stop, kill and start does it: stop (or kill), then
    start again."""

    def stop(self) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def restart(self, *, kill: bool = False) -> None:
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> Callable[[], None] | None:
    """On Linux, a function for ``preexec_fn`` that has the kernel send the spawned broker SIGTERM
    when the process that started it dies, however it dies (SIGKILL, an xdist worker torn down
    before its clean-up ran), so no broker outlives its run. None elsewhere.

    The signal follows the *thread* that spawned the child, so it is armed only for a spawn from
    the main thread (session start and fixtures run there), which lives as long as the process; a
    broker started from another thread would otherwise die with that thread."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the call: nobody would signal
            os._exit(1)

    return arm


class ProcessController(StopStartRestart):
    """Runs a broker command in its own process group; stop = SIGTERM, kill = SIGKILL of the group."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, host: str, port: int,
                 log_path: Path, ready: Callable[[float], None], what: str,
                 stop_timeout: float = 30.0, start_timeout: float = 60.0) -> None:
        self.argv = argv
        self.env = env
        self.host = host
        self.port = port
        self.log_path = log_path
        self.ready = ready
        self.what = what
        self.stop_timeout = stop_timeout
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=_die_with_parent(),  # a ctypes call only, see the function
            )
        except OSError as exc:
            raise TargetError(f"cannot start {self.what} ({self.argv[0]}): {exc}") from exc
        finally:
            log.close()
        deadline = time.monotonic() + self.start_timeout
        try:
            wait_port(self.host, self.port, deadline, self.proc, self.what)
            self.ready(deadline)
        except TargetError as exc:
            tail = self.log_tail()
            self.kill()
            raise TargetError(f"{exc}; log {self.log_path}: {tail}") from exc
        except BaseException:
            # the case's ceiling (or ^C) interrupted the wait: nobody owns the process yet, so
            # leaving it running would orphan a broker
            self.kill()
            raise

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

    def dump_state(self, sig: int, dest: Path, timeout: float = 5.0) -> bool:
        """Have a hung broker print its own state, and keep it: ``sig`` goes to the broker process
        alone (a Go program prints every goroutine's stack on SIGQUIT, then exits), its exit is
        awaited up to ``timeout``, and what its log gained meanwhile is copied into ``dest``.
        False when the process was not running or printed nothing."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            start = self.log_path.stat().st_size
        except OSError:
            start = 0
        try:
            os.kill(self.proc.pid, sig)
            os.kill(self.proc.pid, signal.SIGCONT)  # a paused (SIGSTOPped) broker handles it too
            self.proc.wait(timeout=timeout)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            with self.log_path.open("rb") as log:
                log.seek(start)
                printed = log.read()
        except OSError:
            return False
        if not printed.strip():
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(printed)
        return True

    def _signal(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        if self.proc is None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._reap_group()

    def kill(self) -> None:
        if self.proc is None:
            return
        self._signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._reap_group()

    def _reap_group(self) -> None:
        # Children that left the group leader behind (e.g. beam.smp under a shell script).
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    pass
            except OSError:
                return
            time.sleep(0.1)  # the port is released asynchronously by the kernel

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
