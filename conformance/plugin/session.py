"""Session state and the target's lifecycle: start and probe it once, hand it to xdist workers."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conformance.model.results import ResultsWriter, new_run_id
from conformance.model.verdicts import Verdict
from conformance.plugin.context import CleanupNotes
from conformance.plugin.settings import Settings
from conformance.protocol.wire import URL
from conformance.targets import Target, TargetError, open_target
from conformance.targets.probe import ProbeError, ServerInfo, probe
from conformance.targets.spec import parse_url, with_tls_options
from conformance.verify.queue_types import offered

SCENARIOS_DIR = Path(__file__).resolve().parent.parent / "scenarios"
SECOND_VHOST_ENV = "AMQP_CONFORMANCE_SECOND_VHOST"
RUN_ID_ENV = "AMQP_CONFORMANCE_RUN_ID"
WORKER_INPUT_KEY = "amqp_conformance"


@dataclass
class SessionState:
    """What one pytest process knows about the run (controller or xdist worker)."""

    settings: Settings
    run_id: str
    worker: str = "main"
    target_name: str = ""
    url: URL | None = None
    server: ServerInfo | None = None
    target: Target | None = None  # only in the process that started it
    hang_note: str | None = None  # where the post-mortem of a broker that stopped answering went
    private: dict[str, Target] = field(default_factory=dict)  # restartable brokers of this worker
    writer: ResultsWriter | None = None
    rows: list[tuple[str, str, Verdict]] = field(default_factory=list)  # (case id, area, verdict)
    started: float = field(default_factory=time.monotonic)
    failed_to_start: str | None = None
    # The access cases' restricted user: its URL, or why there is none (one line).
    restricted_url: URL | None = None
    restricted_unsupported: str | None = None
    restricted_skipped: int = 0  # cases needing the restricted user deselected (reported once)
    # The target's limits a client cannot discover on the wire (Target.limits, or the
    # --amqp-max-message-size of a url target); handed to xdist workers.
    limits: dict[str, int] = field(default_factory=dict)
    # Selected queue types the broker refused to declare, with what it answered (asked once).
    unoffered: dict[str, str] = field(default_factory=dict)
    # What the broker left unanswered in the cases' clean-ups (the workers' merged in the controller).
    cleanup_notes: CleanupNotes = field(default_factory=CleanupNotes)

    # Shorthands for the settings most code reads.
    @property
    def profile(self) -> str:
        return self.settings.profile

    @property
    def release(self) -> tuple[str, str] | None:
        """(release, basis) the rabbitmq profile applies (:mod:`conformance.profiles.releases`):
        named, else the server's, else the default; None under another profile or before the probe."""
        if self.settings.profile != "rabbitmq" or self.server is None:
            return None
        from conformance.profiles.releases import applied_release

        return applied_release(self.server.product, self.server.version, self.settings.release)

    @property
    def case_timeout(self) -> float:
        return self.settings.case_timeout

    @property
    def fail_on(self) -> frozenset[Verdict]:
        return self.settings.fail_on

    @property
    def results_dir(self) -> Path:
        return self.settings.results_dir

    @property
    def restart_cmd(self) -> str | None:
        return self.settings.restart_cmd

    @property
    def ready(self) -> bool:
        return self.server is not None

    @property
    def results_file(self) -> Path:
        return self.results_dir / f"{self.run_id}.jsonl"


def release_note(release: tuple[str, str] | None) -> str:
    """`` as RabbitMQ 4.0.5 (server-properties)`` for the target line; empty without a release."""
    return "" if release is None else f" as RabbitMQ {release[0]} ({release[1]})"


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def new_state(config: pytest.Config, settings: Settings) -> SessionState:
    """The controller's state, or a worker's from what the controller handed over."""
    state = SessionState(settings=settings, run_id=os.environ.get(RUN_ID_ENV) or new_run_id())
    if is_worker(config):
        # pytest-xdist sets config.workerinput on a worker; pytest.Config does not declare it
        workerinput: dict[str, Any] = config.workerinput  # type: ignore[attr-defined]
        info = json.loads(workerinput[WORKER_INPUT_KEY])
        state.worker = workerinput.get("workerid", "gw")
        state.run_id = info["run_id"]
        if info.get("url"):
            # the one parse of the URL a worker is handed (the controller probed it)
            state.url = parse_url(info["url"])
            state.target_name = info["target"]
            state.server = ServerInfo.from_json(info["server"])
            state.restricted_url = parse_url(info["restricted_url"]) if info.get("restricted_url") else None
            state.restricted_unsupported = info.get("restricted_unsupported")
            state.limits = dict(info.get("limits") or {})
            state.unoffered = dict(info.get("unoffered") or {})
    return state


def worker_input(state: SessionState) -> str:
    """xdist controller → worker: the run id and the probed target, so workers never re-probe."""
    return json.dumps({
        "run_id": state.run_id,
        "url": str(state.url) if state.url is not None else "",
        "target": state.target_name,
        "server": state.server.to_json() if state.server else None,
        "restricted_url": str(state.restricted_url) if state.restricted_url is not None else None,
        "restricted_unsupported": state.restricted_unsupported,
        "limits": state.limits,
        "unoffered": state.unoffered,
    })


def wants_target(config: pytest.Config, settings: Settings) -> bool:
    """Is this session a suite run (so the target must be up before anything runs)?

    Yes when an option or ini key names the suite, or the arguments point at the scenarios;
    never for ``--collect-only``, and not merely because an ``AMQP_CONFORMANCE_*`` variable is
    exported (an unrelated session must not probe a broker).
    """
    if config.getoption("collectonly", False):
        return False
    if settings.asked:
        return True
    args = [str(a) for a in config.args]
    if config.getoption("pyargs", False) and any(a.split("::")[0].startswith("conformance") for a in args):
        return True
    for arg in args:
        path = Path(arg.split("::")[0])
        if not path.is_absolute():
            path = Path(config.invocation_params.dir) / path
        try:
            path.resolve().relative_to(SCENARIOS_DIR)
            return True
        except ValueError:
            continue
    return False


def results_writable(results_dir: Path) -> str | None:
    """None when results can be written to ``results_dir``, else one line saying why not."""
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        probe_file = results_dir / f".amqpc-write-test-{os.getpid()}"
        probe_file.write_bytes(b"")
        probe_file.unlink()
    except OSError as exc:
        return f"amqp-conformance: cannot write results to {results_dir}: {exc.strerror or exc}"
    return None


class _Unusable(Exception):
    """The target started but cannot be used (the message is one line, without the prefix)."""


def start_target(state: SessionState) -> None:
    """Start/probe the target once; on failure remember one line for the caller to exit with."""
    if state.ready or state.failed_to_start:
        return
    settings = state.settings
    try:
        target = open_target(settings.target)
    except TargetError as exc:
        state.failed_to_start = f"amqp-conformance: cannot start target {settings.target.describe()}: {exc}"
        return
    state.target = target
    try:
        _take_target(state, target)
    except _Unusable as exc:
        state.failed_to_start = f"amqp-conformance: {exc}"
        target.close()
        state.target = None


def _with_tls_settings(settings: Settings, url: URL) -> URL:
    """``url`` with --amqp-tls-ca/-cert/-key/-insecure as its own options, so every client (raw,
    pika, aio-pika, probe, private brokers' URLs read from here) honours them alike."""
    return with_tls_options(
        url, ca=settings.tls_ca, cert=settings.tls_cert, key=settings.tls_key, insecure=settings.tls_insecure
    )


def _take_target(state: SessionState, target: Target) -> None:
    """Probe a started target and fill the session state from it; :class:`_Unusable` if it cannot
    be used."""
    settings = state.settings
    try:
        target.url = _with_tls_settings(settings, target.url)
    except ValueError as exc:
        raise _Unusable(str(exc)) from exc
    try:
        state.server = probe(target.url, timeout=min(8.0, settings.case_timeout))
    except ProbeError as exc:
        raise _Unusable(exc.message) from exc
    state.url = target.url
    state.target_name = target.name
    restricted = settings.restricted_url or target.restricted_url
    if restricted:
        try:
            state.restricted_url = _with_tls_settings(settings, restricted)
        except ValueError as exc:
            raise _Unusable(f"--amqp-restricted-url: {exc}") from exc
        if settings.restricted_url:
            # A user-given restricted user is probed like the target: a wrong password is one line
            # before any case, not an ERROR in each access case.
            try:
                probe(state.restricted_url, timeout=min(8.0, settings.case_timeout))
            except ProbeError as exc:
                raise _Unusable(f"--restricted-url: {exc.message}") from exc
    else:
        state.restricted_unsupported = target.restricted_unsupported or "the target offers no restricted user"
    state.limits = dict(target.limits)
    if settings.max_message_size is not None:
        state.limits["max_message_size"] = settings.max_message_size
    if settings.consumer_timeout is not None:
        state.limits["consumer_timeout"] = settings.consumer_timeout
    for queue_type in settings.queue_types:
        # Once per run: a type the broker does not declare makes its cases UNSUPPORTED with this
        # one reason, instead of each failing on its own declare.
        refused = offered(target.url, queue_type, min(8.0, settings.case_timeout))
        if refused is not None:
            state.unoffered[queue_type] = refused
    if target.second_vhost and not os.environ.get(SECOND_VHOST_ENV):
        # Read by the vhost-separation case; xdist workers inherit it (they start after this).
        os.environ[SECOND_VHOST_ENV] = target.second_vhost


def sigterm_as_interrupt() -> Any:
    """Let SIGTERM stop the run the way ^C does, so session clean-up runs: the target, private
    brokers and the results writer are closed, not orphaned (a CI timeout or cancellation sends
    SIGTERM; its default action ends the process at once). Returns the handler it replaced, or
    None where signals cannot be set (not the main thread) or someone else already handles it."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    return signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def restore_sigterm(previous: Any) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)


def close_all(state: SessionState) -> None:
    """Stop what this process started: private brokers, the results writer, the target."""
    for target in state.private.values():
        target.close()
    state.private.clear()
    if state.writer is not None:
        state.writer.close()
        state.writer = None
    if state.target is not None:
        state.target.close()
        state.target = None


STATE = pytest.StashKey[SessionState]()
# The CaseContext of a running case, on its item (the verdict hook reads its observations).
CTX = pytest.StashKey[Any]()


THREAD_JOIN_S = 2.0


def threads_left_behind(before: set[int | None]) -> None:
    """Name the non-daemon threads cases left running (a client library's, after a timed-out
    call): Python waits for them at exit. Each gets a bounded join first."""
    deadline = time.monotonic() + THREAD_JOIN_S
    left = [t for t in threading.enumerate()
            if t.ident not in before and not t.daemon and t is not threading.current_thread()]
    for t in left:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in left if t.is_alive()]
    if alive:
        print(f"amqp-conformance: warning: {len(alive)} non-daemon thread(s) left running by cases "
              f"({', '.join(alive[:5])}); 'amqp-conformance run' ends without them", file=sys.stderr)
