"""The fixtures a case can ask for (registered by the plugin, see ``FIXTURE_MODULES``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from conformance.model.cases import Case, Level, case_of
from conformance.model.sources import cite_all
from conformance.model.verdicts import CaseTimeout
from conformance.plugin.context import CaseContext, Cleanup, Connections
from conformance.plugin.qtypes import item_queue_type
from conformance.plugin.session import CTX, STATE, SessionState, start_target
from conformance.protocol.wire import URL
from conformance.targets import Target, TargetError, spawn_private
from conformance.targets.kinds import kind_of
from conformance.targets.probe import ServerInfo
from conformance.verify.queue_types import CLASSIC, run_case_id
from conformance.verify.unsupported import Unsupported


@pytest.fixture(scope="session")
def conformance_state(pytestconfig: pytest.Config) -> SessionState:
    state = pytestconfig.stash[STATE]
    if not state.ready:
        start_target(state)
        if state.failed_to_start:
            pytest.exit(state.failed_to_start, returncode=4)
    return state


@pytest.fixture(scope="session")
def broker_url(conformance_state: SessionState) -> URL:
    """The target's parsed URL (TLS options folded in): pass it on, never format and parse it."""
    assert conformance_state.url is not None  # the session fixture exits unless the target is up
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


@pytest.fixture
def queue_type(request: pytest.FixtureRequest, conformance_state: SessionState) -> str:
    """The queue type this case declares (``--amqp-queue-type``; parametrized when several)."""
    return item_queue_type(request.node, conformance_state.settings.queue_types) or CLASSIC


@pytest.fixture
def ctx(request: pytest.FixtureRequest, conformance_state: SessionState) -> CaseContext:
    c = case_of(request.node)
    context = CaseContext(
        c,
        conformance_state.profile,
        conformance_state.case_timeout,
        conformance_state.worker,
        queue_type=item_queue_type(request.node, conformance_state.settings.queue_types),
        release=(conformance_state.release or (None, ""))[0],
    )
    request.node.stash[CTX] = context
    return context


@pytest.fixture
def cleanup(request: pytest.FixtureRequest, conformance_state: SessionState) -> Iterator[Cleanup]:
    assert conformance_state.url is not None
    c = Cleanup(conformance_state.url, conformance_state.case_timeout, conformance_state.cleanup_notes)
    yield c
    c.run(request.node.stash.get(RECORD_ID, request.node.nodeid))


@pytest.fixture
def amqp(broker_url: URL, case_timeout: float, cleanup: Cleanup) -> Iterator[Connections]:
    # Depends on ``cleanup`` so that, whatever order a case names its fixtures in, the case's
    # connections are closed *before* its entities are deleted: deleting a queue while the case's
    # own consumer still holds unacked deliveries is a different scenario (and wedges garagemq).
    conns = Connections(broker_url, case_timeout)
    yield conns
    conns.close_all()


RESTRICTED_MARK = "restricted_user"


@pytest.fixture
def restricted_url(conformance_state: SessionState) -> URL:
    """The URL of the second, restricted user (the access cases; ``--restricted-url`` or the user
    a spawned target made); UNSUPPORTED, with the reason, when there is none."""
    state = conformance_state
    if state.restricted_url:
        return state.restricted_url
    reason = state.restricted_unsupported or "no restricted user (--restricted-url)"
    if state.restricted_skipped:
        reason += f"; {state.restricted_skipped} further case(s) that need it were not run"
    raise Unsupported(reason, expected="a restricted user", observed="none")


def _private_broker(state: SessionState, kind: str, purpose: str, *, restricted: bool = True) -> Target:
    """This worker's private broker of the target's ``kind``, spawned on first use (restart and
    alarm cases share it); TIMEOUT, saying what for, when it cannot be started."""
    if kind not in state.private:
        try:
            state.private[kind] = spawn_private(kind, tls=state.settings.target.tls, restricted=restricted)
        except TargetError as exc:
            raise CaseTimeout(f"a private {kind} broker for {purpose}", state.case_timeout,
                              observed=str(exc)) from exc
    target = state.private[kind]
    if getattr(target.controller, "running", True) is False:
        # An earlier case left it down (its ceiling interrupted a restart, which kills the half-started
        # broker): start it again here, so that case's fault costs that case only.
        assert target.controller is not None
        try:
            target.controller.start()
        except TargetError as exc:
            raise CaseTimeout(f"the private {kind} broker for {purpose}, started again", state.case_timeout,
                              observed=str(exc)) from exc
    return target


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

            assert state.url is not None
            return url_target(state.url, state.restart_cmd)
        raise Unsupported("restart cases need a broker the suite controls: use --broker reference|local:* "
                          "or give --restart-cmd with --broker-url")
    k = kind_of(kind)
    if k is None or not k.restart:
        raise Unsupported(f"restart cases are not available for {kind.split(':')[0]} targets")
    return _private_broker(state, kind, "restart cases", restricted=False)


def _removed_on_release(request: pytest.FixtureRequest, state: SessionState) -> str | None:
    """Why the case cannot run on the applied RabbitMQ release (a feature the release removed,
    profile data keyed by release), or None."""
    c = case_of(request.node)
    release = state.release
    if c is None or release is None:
        return None
    from conformance.profiles.releases import expectation

    row = expectation(c.id, item_queue_type(request.node, state.settings.queue_types), release[0])
    return row.unsupported if row is not None else None


CLUSTER_NODES = 3  # the cluster cases kill one node and need a majority left: three nodes


@pytest.fixture
def cluster(request: pytest.FixtureRequest, conformance_state: SessionState,
            cleanup: Cleanup) -> Iterator[Any]:
    """The target's cluster controller (``conformance.cluster.base.ClusterController``) for the
    cluster cases; UNSUPPORTED with one reason on a single-node target. After the case every node
    is brought back (resumed, started) and seen running, so the next case starts whole. Depends on
    ``cleanup``: the nodes are back before the case's queues and policies are deleted."""
    from conformance.cluster.target import SINGLE_NODE

    state = conformance_state
    handle = getattr(state.target, "cluster", None)
    if handle is None:
        k = kind_of(state.target_name or "")
        if k is not None and k.cluster:
            # xdist workers get the target's URL, not its controller (it lives in the main process)
            raise Unsupported("the cluster cases run in the process that started the cluster: use -n 0",
                              expected="the cluster controller", observed=f"worker {state.worker}")
        raise Unsupported(SINGLE_NODE, expected="a cluster target", observed=f"{state.target_name}: one node")
    size = len(handle.nodes)
    if size < CLUSTER_NODES:
        raise Unsupported(f"the cluster cases need {CLUSTER_NODES} nodes; the target has {size} "
                          "(--cluster-size, or one --cluster-url per node)",
                          expected=f"{CLUSTER_NODES} nodes", observed=f"{size}")
    removed = _removed_on_release(request, state)
    if removed is not None:
        raise Unsupported(removed, expected="the feature the case tests",
                          observed=f"RabbitMQ {(state.release or ('?', ''))[0]}")
    yield handle
    _restore_nodes(handle, state.case_timeout)


def _restore_nodes(handle: Any, case_timeout: float) -> None:
    """Resume and start every node that does not answer (all at once: nodes boot independently,
    and a case that took two down then waits for one boot, not two), then wait until all run (a
    case's fault must not leak into the next case)."""
    from concurrent.futures import ThreadPoolExecutor

    from conformance.cluster.base import ClusterError

    def bring_back(index: int) -> None:
        for action in ("resume", "start"):
            if handle.supports(action) is None:
                try:
                    getattr(handle, action)(index)
                except ClusterError as exc:
                    raise CaseTimeout(f"node {index + 1} back after the case", case_timeout,
                                      observed=str(exc)) from exc

    down = [n.index for n in handle.nodes if not handle.answers(n.index)]
    if down:
        with ThreadPoolExecutor(len(down), thread_name_prefix="amqpc-restore") as pool:
            for done in [pool.submit(bring_back, index) for index in down]:
                done.result()  # every start has its own deadline (the controller's start timeout)
    if down and hasattr(handle, "wait_running"):
        try:
            handle.wait_running(timeout=max(60.0, 6 * case_timeout))
        except ClusterError as exc:
            raise CaseTimeout("every node running after the case", case_timeout, observed=str(exc)) from exc


@pytest.fixture
def target_limits(conformance_state: SessionState) -> dict[str, int]:
    """The target's configured limits a client cannot read from the wire (e.g.
    ``max_message_size``): spawned targets know theirs, a url target has
    ``--amqp-max-message-size``."""
    return conformance_state.limits


@pytest.fixture
def alarm_target(conformance_state: SessionState) -> Target:
    """A target whose memory alarm the case can raise and clear (``target.alarm(True/False)``),
    for the connection.blocked cases; UNSUPPORTED where there is none.

    Spawned targets give each worker a private broker of the same kind (the one restart cases
    use), so an alarm never blocks publishers of cases running in parallel. A url target needs
    --amqp-alarm-cmd and raises the alarm of the shared broker (do not combine with -n).
    """
    state = conformance_state
    kind = state.target_name
    if kind == "url":
        if state.settings.alarm_cmd:
            from conformance.targets.base import shell_alarm

            assert state.url is not None
            return Target(name="url", url=state.url, alarm=shell_alarm(state.settings.alarm_cmd))
        raise Unsupported("the connection.blocked cases need a memory alarm the suite can raise: use "
                          "--broker reference|local:rabbitmq or give --amqp-alarm-cmd with --broker-url")
    k = kind_of(kind)
    if k is None or not k.restart:
        raise Unsupported(f"the connection.blocked cases are not available for {kind.split(':')[0]} targets")
    if not k.alarm:
        raise Unsupported(f"the suite cannot raise the memory alarm of a {kind} broker")
    target = _private_broker(state, kind, "the alarm cases")
    if target.alarm is None:
        raise Unsupported(f"the suite cannot raise the memory alarm of a {kind} broker")
    return target


# The id a case's record carries (with its queue type): allure's title, set after allure-pytest's own.
RECORD_ID = pytest.StashKey[str]()


def allure_title(item: pytest.Item) -> None:
    record_id = item.stash.get(RECORD_ID, None)
    if record_id is None:
        return
    try:
        import allure
    except ImportError:
        return
    allure.dynamic.title(record_id)


@pytest.fixture(autouse=True)
def _conformance_case(request: pytest.FixtureRequest) -> None:
    """Every case: its context, its allure labels, and UNSUPPORTED for a capability not offered."""
    c = case_of(request.node)
    if c is None:
        return
    state: SessionState = request.getfixturevalue("conformance_state")
    request.getfixturevalue("ctx")
    qt = item_queue_type(request.node, state.settings.queue_types)
    request.node.stash[RECORD_ID] = run_case_id(c.id, qt)
    _allure_labels(c, request.node.stash[RECORD_ID])
    assert state.server is not None
    if qt is not None and qt in state.unoffered:
        raise Unsupported(f"the broker does not offer {qt} queues (asked once, before any case: "
                          f"{state.unoffered[qt]})", expected=f"a {qt} queue declared",
                          observed=state.unoffered[qt])
    for cap in c.requires:
        if not state.server.supports(cap):
            raise Unsupported(f"the broker does not advertise capability {cap!r}",
                              expected=f"capability {cap}", observed="not in server-properties")
    # a feature the applied release removed or had not yet (release rows `unsupported`,
    # `unsupported_before`); the cluster cases say it after their own checks (the cluster fixture)
    if "cluster" not in request.fixturenames:
        removed = request.node.stash[CTX].unsupported_on_release
        if removed is not None:
            raise Unsupported(removed, expected="the feature the case tests",
                              observed=f"RabbitMQ {(state.release or ('?', ''))[0]}")


# The AMQP 0-9-1 specification as published (the XML every rule id points into).
SPEC_URL = "https://www.rabbitmq.com/resources/specs/amqp0-9-1.xml"


def _allure_labels(c: Case, record_id: str) -> None:
    """Labels, and the case id (the record's, with its queue type) as a parameter: allure derives
    historyId from the test's name and parameters, so two functions of the same name in two modules
    (``channel.close-stability``, ``connection.close-stability``) stay two tests."""
    try:
        import allure
    except ImportError:
        return
    allure.dynamic.parameter("case_id", record_id)
    allure.dynamic.label("area", c.area)
    allure.dynamic.label("level", c.level.value)
    for rule_id in c.rules:
        allure.dynamic.label("rule", rule_id)
    severity = {Level.MUST: "critical", Level.SHOULD: "normal", Level.MAY: "minor",
                Level.EXTENSION: "normal", Level.INFO: "trivial"}[c.level]
    allure.dynamic.epic(c.area)
    allure.dynamic.story(c.id)
    allure.dynamic.severity(severity)
    for rule_id in c.rules:
        allure.dynamic.tag(rule_id)
        # A real URL; allure's --allure-link-pattern can still rewrite links of type "spec-rule".
        allure.dynamic.link(SPEC_URL, name=f"spec rule {rule_id}", link_type="spec-rule")


def allure_description(c: Case) -> str:
    """What allure shows as a case's description: what it does, expects, and the rules' text."""
    from conformance.model.spec import load_rules

    rules = {r.id: r for r in load_rules()}
    lines = [c.description, "", f"Expectation: {c.expectation}", f"Level: {c.level.value}"]
    for rule_id in c.rules:
        rule = rules.get(rule_id)
        lines += ["", f"Rule {rule_id}: {rule.doc if rule else '(not in the spec XML)'}"]
    if c.sources:
        lines += ["", "Sources: " + cite_all(c.sources)]
    return "\n".join(lines)


def mark_allure_description(item: pytest.Item, c: Case) -> None:
    """allure-pytest reads the description from a marker after setup (a dynamic one set by a
    fixture is overwritten), so the case's description is a marker set at collection."""
    try:
        from allure_pytest.utils import ALLURE_DESCRIPTION_MARK
    except ImportError:
        return
    item.add_marker(getattr(pytest.mark, ALLURE_DESCRIPTION_MARK)(allure_description(c)))
