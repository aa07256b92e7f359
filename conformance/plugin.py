"""The pytest plugin (entry point ``pytest11``): options, the target, verdicts and results.

``pytest --pyargs conformance --broker-url amqp://…`` runs the suite against any broker. Before
any case runs, the target is started (reference, local:*, container:*) or taken as given (url)
and probed; if it cannot be used the run stops with one line saying why and a non-zero exit.
Each case's outcome becomes one verdict (see ``conformance.verdicts``), shown as pytest's status
word, written as one JSON line to ``reports/results/`` and counted in an area × verdict table.
"""

from __future__ import annotations

import fnmatch
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conformance import __version__
from conformance.cases import MARKER, Case, Level, case_of
from conformance.clients.fixtures import *  # noqa: F403 — fixtures registered with the plugin
from conformance.clients.raw import RawChannel, RawConnection, redact
from conformance.probe import ProbeError, ServerInfo, probe
from conformance.profiles import DEFAULT_PROFILE, PROFILE_DESCRIPTIONS
from conformance.results import (
    ResultRecord,
    ResultsWriter,
    merge_parts,
    new_run_id,
    part_path,
    utc_now_iso,
)
from conformance.targets import Target, TargetError, open_target, spawn_private
from conformance.verdicts import (
    CaseOutcome,
    CaseTimeout,
    Mismatch,
    Unsupported,
    Verdict,
    parse_fail_on,
    render,
)

SCENARIOS_DIR = Path(__file__).parent / "scenarios"
SECOND_VHOST_ENV = "AMQP_CONFORMANCE_SECOND_VHOST"

# option name, env twin, default, help
OPTIONS: tuple[tuple[str, str, str | None, str], ...] = (
    ("--broker-url", "AMQP_CONFORMANCE_BROKER_URL", None,
     "run against the broker at this URL (amqp://user:pass@host:port/vhost)"),
    ("--broker", "AMQP_CONFORMANCE_BROKER", None,
     "target: reference (default) | url | local:rabbitmq | local:garagemq | container:IMAGE"),
    ("--profile", "AMQP_CONFORMANCE_PROFILE", DEFAULT_PROFILE,
     f"expectation profile: {' | '.join(PROFILE_DESCRIPTIONS)} (default {DEFAULT_PROFILE})"),
    ("--case-timeout", "AMQP_CONFORMANCE_CASE_TIMEOUT", "10",
     "seconds any single wait of a case may take before TIMEOUT (default 10)"),
    ("--results", "AMQP_CONFORMANCE_RESULTS", "reports/results",
     "folder for the results JSONL (default reports/results)"),
    ("--fail-on", "AMQP_CONFORMANCE_FAIL_ON", "FAIL,TIMEOUT,ERROR",
     "verdicts that fail the run (default FAIL,TIMEOUT,ERROR; 'none' for none)"),
    ("--restart-cmd", "AMQP_CONFORMANCE_RESTART_CMD", None,
     "shell command that restarts the --broker-url broker (enables restart cases for url targets)"),
    ("--case", "AMQP_CONFORMANCE_CASE", None,
     "only the cases whose id matches one of these comma separated globs (e.g. 'confirms.*,tx.publish.*')"),
)

VERDICT_KEY = "verdict"
STATUS: dict[Verdict, tuple[str, str, str]] = {
    Verdict.PASS: ("passed", ".", "PASS"),
    Verdict.FAIL: ("failed", "F", "FAIL"),
    Verdict.NON_STRICT: ("non_strict", "n", "NON_STRICT"),
    Verdict.UNSUPPORTED: ("unsupported", "u", "UNSUPPORTED"),
    Verdict.INFORMATIONAL: ("informational", "i", "INFORMATIONAL"),
    Verdict.TIMEOUT: ("timeout", "T", "TIMEOUT"),
    Verdict.ERROR: ("error", "E", "ERROR"),
    Verdict.NOT_RUN: ("not_run", "x", "NOT_RUN"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--case GLOBS``: keep only the conformance cases whose id matches (others deselected)."""
    wanted = [g.strip() for g in (config.getoption("--case") or "").split(",") if g.strip()]
    if not wanted:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        c = case_of(item)
        (keep if c is not None and any(fnmatch.fnmatchcase(c.id, g) for g in wanted) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("amqp-conformance", "AMQP 0-9-1 conformance suite")
    for name, env, default, help_text in OPTIONS:
        group.addoption(name, action="store", default=os.environ.get(env, default),
                        help=f"{help_text} [env {env}]")


# -- session state -------------------------------------------------------------------------------


@dataclass
class SessionState:
    """What one pytest process knows about the run (controller or xdist worker)."""

    run_id: str
    profile: str
    case_timeout: float
    fail_on: frozenset[Verdict]
    results_dir: Path
    worker: str
    broker_kind: str
    broker_url_opt: str | None
    restart_cmd: str | None
    target_name: str = ""
    url: str = ""
    server: ServerInfo | None = None
    target: Target | None = None  # only in the process that started it
    private: dict[str, Target] = field(default_factory=dict)  # restartable brokers of this worker
    writer: ResultsWriter | None = None
    rows: list[tuple[str, str, Verdict]] = field(default_factory=list)  # (case id, area, verdict)
    started: float = field(default_factory=time.monotonic)
    failed_to_start: str | None = None

    @property
    def ready(self) -> bool:
        return self.server is not None


STATE = pytest.StashKey[SessionState]()


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(case): the conformance case this test is")
    try:
        fail_on = parse_fail_on(config.getoption("--fail-on") or "")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc
    try:
        case_timeout = float(config.getoption("--case-timeout"))
    except ValueError as exc:
        raise pytest.UsageError("--case-timeout takes a number of seconds") from exc
    if case_timeout <= 0:
        raise pytest.UsageError("--case-timeout must be positive")
    profile = config.getoption("--profile")
    if profile not in PROFILE_DESCRIPTIONS:
        raise pytest.UsageError(f"unknown --profile {profile!r} (known: {', '.join(PROFILE_DESCRIPTIONS)})")
    results = Path(config.getoption("--results"))
    if not results.is_absolute():
        results = Path(config.invocation_params.dir) / results
    state = SessionState(
        run_id=os.environ.get("AMQP_CONFORMANCE_RUN_ID") or new_run_id(),
        profile=profile,
        case_timeout=case_timeout,
        fail_on=fail_on,
        results_dir=results,
        worker="main",
        broker_kind=config.getoption("--broker") or "",
        broker_url_opt=config.getoption("--broker-url"),
        restart_cmd=config.getoption("--restart-cmd"),
    )
    if _is_worker(config):
        info = json.loads(config.workerinput["amqp_conformance"])  # type: ignore[attr-defined]
        state.worker = config.workerinput.get("workerid", "gw")  # type: ignore[attr-defined]
        state.run_id = info["run_id"]
        if info.get("url"):
            state.url = info["url"]
            state.target_name = info["target"]
            state.server = ServerInfo.from_json(info["server"])
    config.stash[STATE] = state
    global _ACTIVE
    _ACTIVE = state


def _wants_target(config: pytest.Config) -> bool:
    """Is this session a suite run (so the target must be up before anything runs)?"""
    state = config.stash[STATE]
    if state.broker_url_opt or state.broker_kind:
        return True
    args = [str(a) for a in config.args]
    if config.getoption("pyargs", False) and any(a.split("::")[0].startswith("conformance") for a in args):
        return True
    for arg in args:
        path = Path(arg.split("::")[0])
        if not path.is_absolute():
            path = Path(config.invocation_params.dir) / path
        try:
            path.resolve().relative_to(SCENARIOS_DIR.resolve())
            return True
        except ValueError:
            continue
    return False


def _start_target(state: SessionState) -> None:
    """Start/probe the target once; on failure remember one line for the caller to exit with."""
    if state.ready or state.failed_to_start:
        return
    try:
        target = open_target(state.broker_kind, state.broker_url_opt, restart_cmd=state.restart_cmd)
    except TargetError as exc:
        state.failed_to_start = f"amqp-conformance: cannot start target {state.broker_kind or 'reference'}: {exc}"
        return
    state.target = target
    try:
        state.server = probe(target.url, timeout=min(8.0, state.case_timeout))
    except ProbeError as exc:
        state.failed_to_start = f"amqp-conformance: {exc.message}"
        target.close()
        state.target = None
        return
    state.url = target.url
    state.target_name = target.name
    if target.second_vhost and not os.environ.get(SECOND_VHOST_ENV):
        # Read by the vhost-separation case; xdist workers inherit it (they start after this).
        os.environ[SECOND_VHOST_ENV] = target.second_vhost


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    state = config.stash[STATE]
    if _is_worker(config) or not _wants_target(config):
        return
    _start_target(state)
    if state.failed_to_start:
        # pytest prints a UsageError once, as "ERROR: <line>", and exits 4 before any case.
        raise pytest.UsageError(state.failed_to_start)


def pytest_configure_node(node: Any) -> None:
    """xdist controller → worker: the run id and the probed target, so workers never re-probe."""
    state: SessionState = node.config.stash[STATE]
    node.workerinput["amqp_conformance"] = json.dumps({
        "run_id": state.run_id,
        "url": state.url,
        "target": state.target_name,
        "server": state.server.to_json() if state.server else None,
    })


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    for target in state.private.values():
        target.close()
    state.private.clear()
    if state.writer is not None:
        state.writer.close()
        state.writer = None
    if state.target is not None:
        state.target.close()
        state.target = None


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def conformance_state(pytestconfig: pytest.Config) -> SessionState:
    state = pytestconfig.stash[STATE]
    if not state.ready:
        _start_target(state)
        if state.failed_to_start:
            pytest.exit(state.failed_to_start, returncode=4)
    return state


@pytest.fixture(scope="session")
def broker_url(conformance_state: SessionState) -> str:
    return conformance_state.url


@pytest.fixture(scope="session")
def server(conformance_state: SessionState) -> ServerInfo:
    assert conformance_state.server is not None
    return conformance_state.server


@pytest.fixture(scope="session")
def profile(conformance_state: SessionState) -> str:
    return conformance_state.profile


@pytest.fixture(scope="session")
def case_timeout(conformance_state: SessionState) -> float:
    return conformance_state.case_timeout


class CaseContext:
    """Per-case helper: the case, its profile's expected value, observations, unique names."""

    def __init__(self, case: Case | None, profile: str, timeout: float, worker: str) -> None:
        self.case = case
        self.profile = profile
        self.timeout = timeout
        self.worker = worker
        self.observed: dict[str, Any] = {}
        self.informational_note: str | None = None
        self.extra: dict[str, Any] = {}
        self.client = case.client if case else "raw"
        self._uid = uuid.uuid4().hex[:8]

    @property
    def expected(self) -> Any:
        """The expected value for this run's profile (the case's per-profile data)."""
        if self.case is None:
            raise RuntimeError("not a conformance case")
        return self.case.expected_for(self.profile)

    def name(self, suffix: str = "q") -> str:
        """A unique, client-chosen entity name for this case execution."""
        slug = (self.case.id if self.case else "adhoc").replace(".", "-")[:60]
        return f"amqpc-{slug}-{self.worker}-{self._uid}-{suffix}"

    def observe(self, key: str, value: Any) -> Any:
        self.observed[key] = value
        return value

    def check(self, observed: Any, expected: Any, what: str) -> None:
        """Compare and record; a difference raises Mismatch (FAIL or NON_STRICT by the level)."""
        self.observed[what] = observed
        if observed != expected:
            raise Mismatch(what, expected=expected, observed=observed)

    def check_profile(self, observed: Any, what: str) -> None:
        """Compare with this profile's expected value; a difference is a FAIL (profile data)."""
        expected = self.expected
        self.observed[what] = observed
        if observed != expected:
            source = self.case.source_for(self.profile) if self.case else ""
            raise Mismatch(f"{what} (profile {self.profile}: {source})", expected=expected,
                           observed=observed, verdict=Verdict.FAIL)

    def informational(self, observed: Any, note: str = "") -> None:
        """Record behaviour where nothing is required: the verdict becomes INFORMATIONAL."""
        self.observed["observed"] = observed
        self.informational_note = note or "recorded"


@pytest.fixture
def ctx(request: pytest.FixtureRequest, conformance_state: SessionState) -> CaseContext:
    c = case_of(request.node)
    context = CaseContext(c, conformance_state.profile, conformance_state.case_timeout, conformance_state.worker)
    request.node.stash[CTX] = context
    return context


CTX = pytest.StashKey[CaseContext]()


class Cleanup:
    """Entities a case created, deleted in reverse order after it (errors ignored, bounded)."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.items: list[tuple[str, str]] = []

    def queue(self, name: str) -> str:
        self.items.append(("queue", name))
        return name

    def exchange(self, name: str) -> str:
        self.items.append(("exchange", name))
        return name

    def run(self) -> None:
        if not self.items:
            return
        from pamqp import commands as spec

        deadline = time.monotonic() + max(2.0, self.timeout)
        try:
            conn = RawConnection.open(self.url, timeout=min(5.0, self.timeout))
        except CaseOutcome:
            return
        try:
            ch: RawChannel | None = None
            for kind, name in reversed(self.items):
                if time.monotonic() > deadline or not conn.is_open:
                    break
                try:
                    if ch is None:
                        ch = conn.channel()
                    method = spec.Queue.Delete(queue=name) if kind == "queue" else spec.Exchange.Delete(exchange=name)
                    ch.rpc(method, timeout=min(3.0, self.timeout))
                except CaseOutcome:
                    ch = None  # a 404 closed the channel; open another for the next one
                except ValueError:
                    continue  # a name the codec refuses to encode was never created by us
        finally:
            conn.close(timeout=1.0)
            self.items.clear()


@pytest.fixture
def cleanup(broker_url: str, case_timeout: float) -> Iterator[Cleanup]:
    c = Cleanup(broker_url, case_timeout)
    yield c
    c.run()


class Connections:
    """Factory of raw connections for one case; every one is closed after the case."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.opened: list[RawConnection] = []

    def __call__(self, url: str | None = None, **kwargs: Any) -> RawConnection:
        kwargs.setdefault("timeout", self.timeout)
        conn = RawConnection.open(url or self.url, **kwargs)
        self.opened.append(conn)
        return conn

    def channel(self, url: str | None = None, **kwargs: Any) -> RawChannel:
        """A new connection with one open channel."""
        return self(url, **kwargs).channel()

    def close_all(self) -> None:
        for conn in reversed(self.opened):
            conn.close(timeout=1.0)
        self.opened.clear()


@pytest.fixture
def amqp(broker_url: str, case_timeout: float, cleanup: Cleanup) -> Iterator[Connections]:
    # Depends on ``cleanup`` so that, whatever order a case names its fixtures in, the case's
    # connections are closed *before* its entities are deleted: deleting a queue while the case's
    # own consumer still holds unacked deliveries is a different scenario (and wedges garagemq).
    conns = Connections(broker_url, case_timeout)
    yield conns
    conns.close_all()


@pytest.fixture
def restartable(request: pytest.FixtureRequest, conformance_state: SessionState) -> Target:
    """A target with a controller, for restart cases; UNSUPPORTED where there is none.

    Spawned targets (reference, local:*) give each worker a private broker of the same kind, so
    a restart never disturbs cases running in parallel. A url target needs --restart-cmd and
    restarts the shared broker (do not combine with -n).
    """
    state = conformance_state
    kind = state.target_name
    if kind == "url":
        if state.restart_cmd:
            from conformance.targets.url import url_target

            return url_target(state.url, state.restart_cmd)
        raise Unsupported("restart cases need a broker the suite controls: use --broker reference|local:* "
                          "or give --restart-cmd with --broker-url")
    if kind.startswith("container:"):
        raise Unsupported("restart cases are not available for container targets")
    if kind not in state.private:
        try:
            state.private[kind] = spawn_private(kind)
        except TargetError as exc:
            raise CaseTimeout(f"a private {kind} broker for restart cases", state.case_timeout,
                              observed=str(exc)) from exc
    return state.private[kind]


# -- the case wrapper: capabilities, labels, verdicts, results -----------------------------------


@pytest.fixture(autouse=True)
def _conformance_case(request: pytest.FixtureRequest) -> None:
    c = case_of(request.node)
    if c is None:
        return
    state: SessionState = request.getfixturevalue("conformance_state")
    request.getfixturevalue("ctx")
    _allure_labels(c)
    assert state.server is not None
    for cap in c.requires:
        if not state.server.supports(cap):
            raise Unsupported(f"the broker does not advertise capability {cap!r}",
                              expected=f"capability {cap}", observed="not in server-properties")


def _allure_labels(c: Case) -> None:
    try:
        import allure
    except ImportError:
        return
    severity = {Level.MUST: "critical", Level.SHOULD: "normal", Level.MAY: "minor",
                Level.EXTENSION: "normal", Level.INFO: "trivial"}[c.level]
    allure.dynamic.epic(c.area)
    allure.dynamic.story(c.id)
    allure.dynamic.severity(severity)
    allure.dynamic.description(f"{c.description}\n\nExpectation: {c.expectation}")
    for rule in c.rules:
        allure.dynamic.link(f"spec:{rule}", name=rule, link_type="spec-rule")


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    expected: str
    observed: str
    message: str


def decide(c: Case, excinfo: pytest.ExceptionInfo[BaseException] | None, ctx: CaseContext | None,
           phase: str = "call") -> Decision:
    """Turn a case's outcome into its verdict. Pure: unit-tested on its own."""
    expected_text = render(c.expected_for(ctx.profile)) if ctx and c.expected else c.expectation
    observed_text = render(ctx.observed) if ctx and ctx.observed else ""
    if excinfo is None:
        if c.level is Level.INFO or (ctx is not None and ctx.informational_note):
            note = ctx.informational_note if ctx and ctx.informational_note else "recorded"
            return Decision(Verdict.INFORMATIONAL, c.expectation, observed_text or "-", note)
        return Decision(Verdict.PASS, expected_text, observed_text or "as expected", "")
    exc = excinfo.value
    if isinstance(exc, Unsupported):
        return Decision(Verdict.UNSUPPORTED, render(exc.expected) if exc.expected is not None else c.expectation,
                        render(exc.observed), exc.message)
    if isinstance(exc, pytest.skip.Exception):
        return Decision(Verdict.UNSUPPORTED, c.expectation, "-", str(exc))
    if isinstance(exc, CaseTimeout):
        return Decision(Verdict.TIMEOUT, render(exc.expected), render(exc.observed), exc.message)
    if isinstance(exc, (Mismatch, AssertionError)) and phase == "call":
        expected = render(getattr(exc, "expected", None)) if getattr(exc, "expected", None) is not None \
            else expected_text
        observed = render(getattr(exc, "observed", None)) if getattr(exc, "observed", None) is not None \
            else (str(exc).splitlines()[0] if str(exc) else observed_text)
        message = getattr(exc, "message", None) or (str(exc).splitlines()[0] if str(exc) else "assertion failed")
        explicit = getattr(exc, "explicit_verdict", None)
        if c.level is Level.INFO:
            return Decision(Verdict.INFORMATIONAL, expected, observed, message)
        if explicit is not None:
            return Decision(explicit, expected, observed, message)
        if c.level in (Level.SHOULD, Level.MAY):
            return Decision(Verdict.NON_STRICT, expected, observed, message)
        return Decision(Verdict.FAIL, expected, observed, message)
    first = str(exc).splitlines()[0] if str(exc) else ""
    return Decision(Verdict.ERROR, c.expectation, f"{type(exc).__name__}: {first}"[:500],
                    f"harness error in {phase}: {type(exc).__name__}: {first}"[:500])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep: pytest.TestReport = outcome.get_result()
    c = case_of(item)
    if c is None:
        return
    if call.when == "setup" and rep.passed:
        return
    if call.when == "teardown":
        return
    ctx = item.stash.get(CTX, None)
    decision = decide(c, call.excinfo, ctx, call.when)
    if decision.verdict is Verdict.UNSUPPORTED:
        rep.outcome = "skipped"
        rep.longrepr = (str(item.path), item.location[1] or 0, f"UNSUPPORTED: {decision.message}")
    else:
        state = item.config.stash[STATE]
        rep.outcome = "failed" if decision.verdict in state.fail_on else "passed"
        if rep.outcome == "failed" and decision.verdict in (Verdict.FAIL, Verdict.NON_STRICT, Verdict.TIMEOUT):
            rep.longrepr = (f"{decision.verdict.value}: {c.id}\n  {decision.message}\n"
                            f"  expected: {decision.expected}\n  observed: {decision.observed}\n"
                            f"  rules: {', '.join(c.rules) or '-'}  sources: {', '.join(c.sources) or '-'}")
        elif rep.outcome == "passed":
            rep.longrepr = None
    rep.user_properties.extend([
        (VERDICT_KEY, decision.verdict.value), ("case_id", c.id), ("area", c.area),
        ("expected", decision.expected[:300]), ("observed", decision.observed[:300]),
    ])
    _write_record(item, c, ctx, decision, rep.duration if call.when == "call" else 0.0)


def _client_version(client: str) -> str:
    try:
        if client == "pika":
            from conformance.clients.libs import pika_version

            return pika_version()
        if client == "aio-pika":
            from conformance.clients.libs import aio_pika_version

            return aio_pika_version()
    except ImportError:
        return "?"
    import pamqp

    return f"pamqp {pamqp.__version__} / amqp-conformance {__version__}"


def _write_record(item: pytest.Item, c: Case, ctx: CaseContext | None, d: Decision, duration: float) -> None:
    state = item.config.stash[STATE]
    if state.writer is None:
        state.writer = ResultsWriter(part_path(state.results_dir, state.run_id, state.worker))
    server = state.server or ServerInfo("?", "?", "?")
    client = ctx.client if ctx else c.client
    extra = dict(ctx.extra) if ctx else {}
    extra.setdefault("url", redact(state.url))
    state.writer.write(ResultRecord(
        run_id=state.run_id, time=utc_now_iso(), target=state.target_name or "?",
        broker_product=server.product, broker_version=server.version, broker_platform=server.platform,
        client=client, client_version=_client_version(client), case_id=c.id, area=c.area,
        rules=list(c.rules), level=c.level.value, profile=state.profile, verdict=d.verdict.value,
        expected=d.expected[:2000], observed=d.observed[:2000], duration_s=round(duration, 4),
        message=d.message[:2000], nodeid=item.nodeid, worker=state.worker, extra=extra,
    ))


def _verdict_of(report: pytest.TestReport) -> Verdict | None:
    for key, value in report.user_properties:
        if key == VERDICT_KEY:
            return Verdict(value)
    return None


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    verdict = _verdict_of(report)
    if verdict is None:
        return None
    return STATUS[verdict]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    verdict = _verdict_of(report)
    if verdict is None or _ACTIVE is None:
        return
    props = dict(report.user_properties)
    _ACTIVE.rows.append((str(props.get("case_id")), str(props.get("area")), verdict))


# The session state of the running pytest session (hooks such as logreport get no config).
_ACTIVE: SessionState | None = None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(STATE, None)
    if state is None or _is_worker(config):
        return
    if state.writer is not None:
        state.writer.close()
        state.writer = None
    if state.results_dir.exists() and any(state.results_dir.glob(f"{state.run_id}.*.part.jsonl")):
        merge_parts(state.results_dir, state.run_id)


def area_table(rows: list[tuple[str, str, Verdict]]) -> list[str]:
    """The area × verdict counts, as text lines."""
    counts: Counter[tuple[str, Verdict]] = Counter((area, v) for _case, area, v in rows)
    areas = sorted({area for _c, area, _v in rows})
    shown = [v for v in Verdict if any(counts[(a, v)] for a in areas)]
    width = max([len("total"), *map(len, areas)])
    head = "area".ljust(width) + "".join(f" {v.value:>13}" for v in shown) + f" {'total':>6}"
    lines = [head, "-" * len(head)]
    for a in areas:
        total = sum(counts[(a, v)] for v in Verdict)
        lines.append(a.ljust(width) + "".join(f" {counts[(a, v)]:>13}" for v in shown) + f" {total:>6}")
    total_line = "total".ljust(width) + "".join(
        f" {sum(counts[(a, v)] for a in areas):>13}" for v in shown) + f" {len(rows):>6}"
    lines.append(total_line)
    return lines


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or _is_worker(config) or not state.rows:
        return
    tr = terminalreporter
    server = state.server
    tr.write_sep("=", "amqp-conformance verdicts")
    if server is not None:
        tr.write_line(f"target {state.target_name} at {redact(state.url)}: {server.product} {server.version} "
                      f"({server.platform}); profile {state.profile}")
    for line in area_table(state.rows):
        tr.write_line(line)
    tr.write_line(f"total time {time.monotonic() - state.started:.1f}s; results "
                  f"{state.results_dir / (state.run_id + '.jsonl')}")
    bad = [r for r in state.rows if r[2] in state.fail_on]
    if bad:
        tr.write_line(f"fail-on {','.join(sorted(v.value for v in state.fail_on))}: {len(bad)} case(s): "
                      + ", ".join(f"{cid} {v.value}" for cid, _a, v in bad[:20]) + (" …" if len(bad) > 20 else ""))


def results_file(config: pytest.Config) -> Path | None:
    state = config.stash.get(STATE, None)
    if state is None:
        return None
    return state.results_dir / f"{state.run_id}.jsonl"

