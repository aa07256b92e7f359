"""The registered plugin object: every hook of a suite session, as methods over its state."""

from __future__ import annotations

import fnmatch
import gc
import os
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest

from conformance.gate.triage import InvariantFacts
from conformance.model.cases import Case, case_of
from conformance.model.results import recorded_case_ids
from conformance.model.sources import cite_all
from conformance.model.verdicts import CeilingExceeded, Decision, Verdict, decide
from conformance.plugin import qtypes, schedule
from conformance.plugin.ceiling import ceiling
from conformance.plugin.context import delete_wait
from conformance.plugin.fixtures import RESTRICTED_MARK, allure_title, mark_allure_description
from conformance.plugin.interrupted import (
    WRITE_COLLECTED_ENV,
    collected_path,
    give_line_numbers,
    record_not_run,
    selected_of,
    write_collected,
)
from conformance.plugin.liveness import (
    CHECK_MAX_S,
    EXIT_UNRESPONSIVE,
    Unresponsive,
    broker_answers,
    check_timeout,
    marker_path,
    post_mortem,
    read_marker,
    write_marker,
)
from conformance.plugin.records import (
    STATUS,
    area_table,
    close_results,
    name_junit_suite,
    slowest_cases,
    unsupported_groups,
    write_allure_environment,
    write_record,
)
from conformance.plugin.session import (
    CTX,
    WORKER_INPUT_KEY,
    SessionState,
    close_all,
    is_worker,
    release_note,
    restore_sigterm,
    results_writable,
    sigterm_as_interrupt,
    start_target,
    threads_left_behind,
    wants_target,
    worker_input,
)
from conformance.profiles.releases import beyond_verified, beyond_verified_note
from conformance.protocol import invariants, trace
from conformance.protocol.raw import redact
from conformance.verify.unsupported import case_ending

VERDICT_KEY = "verdict"
TRACE_KEY = "frame_trace"  # a report's user property carrying the trace text to JUnit (not a JUnit property)
INVARIANTS_KEY = "invariants"  # broken wire invariants of a case, comma separated (report property)
CASE_VERDICT_KEY = "case_verdict"  # the case's own verdict beside broken invariants (report property)
CLEANUP_NOTES_KEY = "amqp_conformance_cleanup"  # an xdist worker's clean-up notes (workeroutput)
DEADLINE = pytest.StashKey[float]()
LIVENESS_DUE = pytest.StashKey[str]()  # a TIMEOUT: checked after the teardown (it may restart node 0)
WAIT_TICK_S = 0.2
# The verdicts reported as failures to pytest (JUnit, allure, -x), whatever --fail-on says.
FAILURES: frozenset[Verdict] = frozenset({Verdict.FAIL, Verdict.TIMEOUT, Verdict.ERROR})


def verdict_of(report: pytest.TestReport | pytest.CollectReport) -> Verdict | None:
    """The verdict a setup/call report carries (teardown reports repeat it for JUnit only)."""
    if report.when == "teardown":
        return None
    # A CollectReport (a module that failed to import) has no user_properties: pytest asks the
    # status hook about it too, in any suite of an environment where this plugin is installed.
    for key, value in getattr(report, "user_properties", ()):
        if key == VERDICT_KEY and isinstance(value, str):
            return Verdict(value)
    return None


def case_markers(c: Case) -> tuple[str, ...]:
    """The markers a case carries, for ``-m``: its area, level, client, and restart/wedges."""
    names = [c.area, c.level.value.lower(), c.client.replace("-", "_")]
    if c.needs_restart:
        names.append("restart")
    if c.wedges:
        names.append("wedges")
    return tuple(names)


def label(config: pytest.Config, item: pytest.Item, c: Case, known: set[str], run_id: str) -> None:
    """Make a case selectable by its id (``-k``) and by its markers (``-m``); ``known`` holds the
    marker names registered so far (registered here, so --strict-markers accepts them)."""
    item.extra_keyword_matches.add(c.id)
    item.extra_keyword_matches.add(run_id)
    mark_allure_description(item, c)
    for name in case_markers(c):
        if name not in known:
            config.addinivalue_line("markers", f"{name}: conformance cases ({name})")
            known.add(name)
        item.add_marker(name)


def beyond_lines(release: tuple[str, str] | None) -> list[str]:
    """The one line a run on a release newer than every verified one says (none otherwise)."""
    return [beyond_verified_note(release[0])] if release is not None and beyond_verified(release[0]) else []


class ConformancePlugin:
    """One per pytest process (controller or xdist worker); holds the session's state."""

    def __init__(self, config: pytest.Config, state: SessionState) -> None:
        self.config = config
        self.state = state
        self.stopped: Unresponsive | None = None  # set once the broker was found silent
        self.first_ids: frozenset[str] = frozenset()  # cases to finish before a wedging case
        self.other_failures = 0  # failed reports that carry no verdict
        self.unsupported: dict[str, list[str]] = {}  # reason → case ids, for the summary
        self.interrupted_not_run: int | None = None  # ^C: how many cases were recorded NOT_RUN
        self.session: pytest.Session | None = None  # the controller's, once its session started
        self.finished = False  # pytest_sessionfinish ran (a ^C while the session starts skips it)
        self.invariant_facts: dict[str, InvariantFacts] = {}  # case id -> broken invariants (for triage)
        self.node_seconds: dict[str, float] = {}  # nodeid -> setup + call + teardown seconds
        self.node_case: dict[str, tuple[str, Verdict]] = {}  # nodeid -> (case id, verdict)
        self.threads_before = {t.ident for t in threading.enumerate()}
        self.previous_sigterm = sigterm_as_interrupt()  # controller and each xdist worker

    # -- never cascade ---------------------------------------------------------------------------

    @property
    def marker(self) -> Path:
        return marker_path(self.state.results_dir, self.state.run_id)

    def unresponsive(self) -> Unresponsive | None:
        """Has any process of this run found the broker silent? (a file: xdist workers share it)"""
        if self.stopped is None and self.marker.exists():
            self.stopped = read_marker(self.marker)
        return self.stopped

    def _after_timeout(self, case_id: str) -> None:
        """A TIMEOUT: check, on a fresh connection, that the broker still answers at all."""
        if not self.state.url or self.unresponsive() is not None:
            return
        cause = broker_answers(self.state.url, check_timeout(self.state.case_timeout))
        if cause is not None:
            write_marker(self.marker, Unresponsive(case_id, cause, self.state.worker))
            self.unresponsive()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """Once the broker stopped answering, a case is not run: it is recorded NOT_RUN at once."""
        c = case_of(item)
        if c is not None and c.wedges and is_worker(item.config):
            self._wait_for_the_others()
        found = self.unresponsive()
        if c is None or found is None:
            return None
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        decision = Decision(Verdict.NOT_RUN, c.expectation, "-", found.message())
        qt = self._queue_type(item)
        # Skipped for pytest and JUnit (it never ran); the exit code is EXIT_UNRESPONSIVE anyway.
        rep = pytest.TestReport(
            item.nodeid, item.location, {k: 1 for k in item.keywords}, "skipped",
            (str(item.path), item.location[1] or 0, f"NOT_RUN: {decision.message}"),
            "call", user_properties=self._properties(self._run_id(item, c), c.area, decision),
        )
        ihook.pytest_runtest_logreport(report=rep)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        write_record(self.state, c, None, decision, 0.0, item.nodeid,
                     {"after_case": found.after_case, "cause": found.cause}, queue_type=qt)
        return True

    def _queue_type(self, item: pytest.Item) -> str | None:
        return qtypes.item_queue_type(item, self.state.settings.queue_types)

    def _run_id(self, item: pytest.Item, c: Case) -> str:
        """The case's id in this run's results: its plain id, ``[type]``-suffixed for other types
        than classic (``conformance.verify.queue_types``)."""
        return qtypes.run_id_of(item, c, self.state.settings.queue_types)

    def _run_id_of(self, item: pytest.Item) -> str | None:
        c = case_of(item)
        return None if c is None else self._run_id(item, c)

    @staticmethod
    def _properties(case_id: str, area: str, decision: Decision) -> list[tuple[str, object]]:
        return [(VERDICT_KEY, decision.verdict.value), ("case_id", case_id), ("area", area),
                ("expected", decision.expected[:300]), ("observed", decision.observed[:300]),
                ("message", decision.message[:300])]

    # -- selection -------------------------------------------------------------------------------

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        qtypes.parametrize(metafunc, self.state.settings.queue_types)

    @pytest.hookimpl(tryfirst=True)  # before -k / -m deselect: they see the ids and markers
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        known = {str(line).split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
        selected = self.state.settings.queue_types
        outside = [item for item in items if not qtypes.runs(item, selected)]
        if outside:
            # A case's premise rules this queue type out (or it is for types not selected): the
            # item is not part of the run (the case runs on the types it holds for).
            config.hook.pytest_deselected(items=outside)
            items[:] = [item for item in items if qtypes.runs(item, selected)]
        for item in items:
            c = case_of(item)
            if c is not None:
                label(config, item, c, known, self._run_id(item, c))
        self._wedging_cases_last(items)
        settings = self.state.settings
        if settings.case_globs or settings.rule_globs:
            self._select(config, items, settings.case_globs, settings.rule_globs)
        self._restricted_once(config, items)  # in collection order: the same case stands for them
        schedule.waits_spread(items, self._run_id_of)
        self._wedging_cases_last(items)  # stable: the order above among each

    def _restricted_once(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Without a restricted user, the cases that need one are UNSUPPORTED once, not one by one:
        the first stays (its ``restricted_url`` fixture says why), the others are deselected. Only
        once the target is known (a worker knows it from the controller), so every process agrees."""
        state = self.state
        if not state.ready or state.restricted_url:
            return
        needing = [item for item in items if item.get_closest_marker(RESTRICTED_MARK) is not None]
        if len(needing) < 2:
            return
        drop = needing[1:]
        state.restricted_skipped = len(drop)
        config.hook.pytest_deselected(items=drop)
        dropped = set(map(id, drop))
        items[:] = [item for item in items if id(item) not in dropped]

    def _select(self, config: pytest.Config, items: list[pytest.Item], case_globs: tuple[str, ...],
                rule_globs: tuple[str, ...]) -> None:
        """``--case GLOBS`` / ``--rule GLOBS``: keep only the cases that match (both, when both given)."""
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            c = case_of(item)
            matched = c is not None
            if c is not None and case_globs:
                ids = (c.id, self._run_id(item, c))  # 'confirms.x' selects every type's run of it
                matched = any(fnmatch.fnmatchcase(i, g) for i in ids for g in case_globs)
            if c is not None and rule_globs:
                matched = matched and any(fnmatch.fnmatchcase(r, g) for r in c.rules for g in rule_globs)
            (keep if matched else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Imports and collected items live as long as the session: out of the cyclic collector's
        # sight, every full collection (pytest runs five at exit, in each worker) skips them.
        gc.freeze()
        self._first_ids(session.items)  # after every deselection (-k, -m, --case)
        writes = not session.config.option.collectonly or bool(os.environ.get(WRITE_COLLECTED_ENV))
        if self.state.worker in ("main", "gw0") and writes:
            # every worker collects the same selection: one of them says what it is (for ^C)
            selected = [s for item in session.items
                        if (c := case_of(item)) is not None
                        and (s := selected_of(item, self._run_id(item, c), self._queue_type(item)))]
            if selected:
                try:
                    write_collected(collected_path(self.state.results_dir, self.state.run_id), selected)
                except OSError:
                    pass  # results not writable: the session start says so; ^C then records nothing extra

    def _wedging_cases_last(self, items: list[pytest.Item]) -> None:
        """On a broker the suite cannot isolate (a URL), cases that may wedge it run last.

        Spawned targets give such cases a private broker (the ``isolated`` fixtures); a shared
        broker cannot be, so a wedge must not come before unrelated cases. The order is a pure
        function of the collection, so every xdist worker computes the same one.
        """
        if not self._shared_target():
            return
        items.sort(key=lambda item: bool((c := case_of(item)) and c.wedges))  # stable

    def _first_ids(self, items: list[pytest.Item]) -> None:
        """Remember the cases that must be finished (by any worker) before a wedging case starts."""
        if self._shared_target() and any((c := case_of(i)) and c.wedges for i in items):
            self.first_ids = frozenset(self._run_id(i, c) for i in items
                                       if (c := case_of(i)) is not None and not c.wedges)

    def _wait_for_the_others(self) -> None:
        """xdist spreads cases over workers: before a wedging case, wait (bounded) until every
        other case of the run has a result, read from the workers' part files. The wait ends when
        all are there or when no new result has come for a whole case ceiling."""
        if not self.first_ids:
            return
        quiet_limit = (self.state.settings.case_ceiling or 6 * self.state.case_timeout) + CHECK_MAX_S
        done: set[str] = set()
        last_progress = time.monotonic()
        tick = threading.Event()
        while time.monotonic() - last_progress < quiet_limit:
            now_done = recorded_case_ids(self.state.results_dir, self.state.run_id)
            if self.first_ids <= now_done or self.unresponsive() is not None:
                return
            if len(now_done) > len(done):
                done, last_progress = now_done, time.monotonic()
            tick.wait(WAIT_TICK_S)

    def _shared_target(self) -> bool:
        state = self.state
        if state.target_name:
            return state.target_name == "url"
        return state.settings.target.url is not None

    # -- the target ------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        if is_worker(config) or not wants_target(config, self.state.settings):
            return
        self.session = session
        # Before the target starts: a run that cannot keep its results must not begin.
        unwritable = results_writable(self.state.results_dir)
        if unwritable:
            raise pytest.UsageError(unwritable)
        start_target(self.state)
        if self.state.failed_to_start:
            # pytest prints a UsageError once, as "ERROR: <line>", and exits 4 before any case.
            raise pytest.UsageError(self.state.failed_to_start)
        name_junit_suite(config, self.state)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_INPUT_KEY] = worker_input(self.state)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        session = self.session
        if session is not None and not self.finished and session.exitstatus == pytest.ExitCode.INTERRUPTED:
            self._interrupted_while_starting(config)
        close_all(self.state)
        restore_sigterm(self.previous_sigterm)
        threads_left_behind(self.threads_before)

    # -- the hard ceiling: setup and body share one deadline, teardown has its own -----------

    def _bounded(self, item: pytest.Item, phase: str) -> Any:
        limit = stated = self.state.settings.case_ceiling
        if case_of(item) is None or limit <= 0:
            return ceiling(0, phase)
        if phase == "setup":
            item.stash[DEADLINE] = time.monotonic() + limit
        elif phase == "call":
            # The body gets what setup left, but never less than a second to start.
            limit = max(1.0, item.stash.get(DEADLINE, time.monotonic() + limit) - time.monotonic())
        return ceiling(limit, phase, stated)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        if case_of(item) is not None:
            trace.begin()  # every connection the case opens (fixtures too) records into it
            invariants.begin()  # and is watched by the wire invariant monitor
        with self._bounded(item, "setup"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        allure_title(item)  # here: allure-pytest sets its own title (the function's name) after setup
        with self._bounded(item, "call"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        try:
            with self._bounded(item, "teardown"):
                return (yield)
        finally:
            trace.end()
            invariants.end()

    # -- verdicts --------------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
        outcome = yield
        rep: pytest.TestReport = outcome.get_result()
        c = case_of(item)
        if c is None or (call.when == "setup" and rep.passed):
            return
        if call.when == "teardown":
            # After a TIMEOUT, or a clean-up stuck past its ceiling: the broker may have stopped answering.
            stuck = call.excinfo is not None and isinstance(call.excinfo.value, CeilingExceeded)
            if stuck or LIVENESS_DUE in item.stash:
                self._after_timeout(item.stash.get(LIVENESS_DUE, None) or self._run_id(item, c))
            return
        ctx = item.stash.get(CTX, None)
        decision, extra = self._decide(c, call, ctx)
        run_id = self._run_id(item, c)
        self._annotate(item, rep, c, run_id, decision, extra)
        write_record(self.state, c, ctx, decision, rep.duration if call.when == "call" else 0.0, item.nodeid,
                     extra, queue_type=self._queue_type(item))
        if decision.verdict is Verdict.TIMEOUT:
            item.stash[LIVENESS_DUE] = run_id

    @staticmethod
    def _decide(c: Case, call: pytest.CallInfo[None], ctx: Any) -> tuple[Decision, dict[str, Any]]:
        """The case's verdict, and what its record carries beside it (``extra``): the stack of a
        case stuck past its ceiling, the wire invariants it broke and its own checks' verdict."""
        monitor = invariants.current()
        violations = list(monitor.violations) if monitor is not None else []
        ending = case_ending(call.excinfo)
        decision = decide(c, ending, ctx, call.when, violations)
        extra: dict[str, Any] = {}
        if call.excinfo is not None and isinstance(call.excinfo.value, CeilingExceeded):
            extra["stuck_stack"] = list(call.excinfo.value.stack)
        if violations:
            extra["invariants"] = sorted({v.invariant for v in violations})
            # What the case's own checks concluded, so a triage entry can excuse the invariant alone.
            extra["case_verdict"] = decide(c, ending, ctx, call.when).verdict.value
        return decision, extra

    def _annotate(self, item: pytest.Item, rep: pytest.TestReport, c: Case, run_id: str, decision: Decision,
                  extra: dict[str, Any]) -> None:
        """Make pytest's report say the verdict: outcome, text, properties (JUnit, allure, xdist), trace."""
        if decision.verdict is Verdict.UNSUPPORTED:
            rep.outcome = "skipped"
            rep.longrepr = (str(item.path), item.location[1] or 0, f"UNSUPPORTED: {decision.message}")
        else:
            # What JUnit/allure show is the verdict: --fail-on decides the exit code only.
            rep.outcome = "failed" if decision.verdict in FAILURES else "passed"
            if rep.outcome == "failed" and decision.verdict in (Verdict.FAIL, Verdict.TIMEOUT):
                rep.longrepr = (
                    f"{decision.verdict.value}: {run_id}\n  {decision.message}\n"
                    f"  expected: {decision.expected}\n  observed: {decision.observed}\n"
                    f"  rules: {', '.join(c.rules) or '-'}  sources: {cite_all(c.sources) or '-'}"
                )
            elif rep.outcome == "passed":
                rep.longrepr = None
        rep.user_properties.extend(self._properties(run_id, c.area, decision))
        # JUnit writes a test case's properties from its teardown report, made from the item's.
        item.user_properties.extend(self._properties(run_id, c.area, decision))
        if "invariants" in extra:
            # The controller (xdist) learns them through the report, for --amqp-expected-failures.
            rep.user_properties.extend([(INVARIANTS_KEY, ",".join(extra["invariants"])),
                                        (CASE_VERDICT_KEY, extra["case_verdict"])])
        if decision.verdict is not Verdict.PASS:
            self._attach_trace(rep, extra)

    @staticmethod
    def _attach_trace(rep: pytest.TestReport, extra: dict[str, Any]) -> None:
        """The case's frame trace as evidence of a non-PASS verdict: in the record (``extra.trace``,
        a list of frames the report's drill-down renders), for JUnit (system-out, written by
        :meth:`_junit_names` from the report, which xdist carries to the controller) and for allure
        (an attachment). PASS records carry none (size)."""
        frames = trace.current()
        if frames is None:
            return
        extra["trace"] = frames.entries()
        text = frames.text()
        rep.user_properties.append((TRACE_KEY, text))
        try:
            import allure
        except ImportError:
            return
        allure.attach(text, name="frame trace", attachment_type=allure.attachment_type.TEXT)

    def pytest_report_teststatus(self, report: pytest.TestReport | pytest.CollectReport,
                                 config: pytest.Config) -> tuple[str, str, str] | None:
        verdict = verdict_of(report)
        return None if verdict is None else STATUS[verdict]

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes the test case
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Every phase's time, also from xdist workers: the suite's own time per case.
        self.node_seconds[report.nodeid] = self.node_seconds.get(report.nodeid, 0.0) + (
            report.duration or 0.0
        )
        verdict = verdict_of(report)
        if verdict is None:
            if report.failed:
                self.other_failures += 1  # not a case (or a case's teardown): pytest's own failure
            return
        props = dict(report.user_properties)
        case_id, area = str(props.get("case_id")), str(props.get("area"))
        self.state.rows.append((case_id, area, verdict))
        if verdict is Verdict.UNSUPPORTED:
            reason = str(props.get("message") or "no reason given").splitlines()[0]
            self.unsupported.setdefault(reason, []).append(case_id)
        self.node_case[report.nodeid] = (case_id, verdict)
        facts = InvariantFacts.of(
            {
                "invariants": str(props.get(INVARIANTS_KEY, "")).split(",")
                if props.get(INVARIANTS_KEY)
                else [],
                "case_verdict": props.get(CASE_VERDICT_KEY),
            }
        )
        if facts is not None:
            self.invariant_facts[case_id] = facts
        self._junit_names(report, case_id, area)

    def _junit_names(self, report: pytest.TestReport, case_id: str, area: str) -> None:
        """JUnit names a case by its id, in a class named by its area (not by the Python
        function and the folder pytest ran from)."""
        from _pytest.junitxml import xml_key  # no public API names a JUnit test case

        xml = self.config.stash.get(xml_key, None)
        if xml is None:
            return
        reporter = xml.node_reporter(report)
        reporter.add_attribute("name", case_id)
        reporter.add_attribute("classname", area)
        text = dict(report.user_properties).get(TRACE_KEY)
        if text:
            # The frame trace as the test case's system-out (JUnit's place for evidence text).
            from _pytest.junitxml import bin_xml_escape

            node = ET.Element("system-out")
            node.text = bin_xml_escape(f"frame trace (last {trace.MAX_FRAMES} frames)\n{text}")
            reporter.append(node)

    # -- the end ---------------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """An xdist worker ended: what its clean-ups left unanswered joins the run's notes."""
        notes = getattr(node, "workeroutput", {}).get(CLEANUP_NOTES_KEY)
        if notes:
            self.state.cleanup_notes.merge(notes)

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter formats the traceback
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        tb = excinfo.value.__traceback__ if give_line_numbers(excinfo.value) else None
        if tb is not None:
            excinfo.traceback = type(excinfo.traceback)(tb)  # the entries pytest's report reads

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.finished = True
        state = self.state
        if is_worker(session.config):
            # xdist's worker sends its workeroutput to the controller after this hook
            session.config.workeroutput[CLEANUP_NOTES_KEY] = state.cleanup_notes.as_dict()  # type: ignore[attr-defined]
            return
        if self.unresponsive() is not None:
            session.exitstatus = EXIT_UNRESPONSIVE
            save = state.target.post_mortem if state.target is not None else None
            state.hang_note = post_mortem(save, state.results_dir, state.run_id)
        elif session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and state.rows:
            # --fail-on decides the exit code (pytest's "failed" follows the verdict, for JUnit).
            bad = self.other_failures or any(v in state.fail_on and not self._known(c, v)
                                             for c, _a, v in state.rows)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if bad else pytest.ExitCode.OK
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            self._record_not_run(session.config)
        if not session.config.option.collectonly:  # a collection for ^C leaves its file to the run
            collected_path(state.results_dir, state.run_id).unlink(missing_ok=True)
        close_results(state)
        alluredir = session.config.getoption("allure_report_dir", None)
        if alluredir and state.rows:
            write_allure_environment(Path(alluredir), state)

    def _interrupted_while_starting(self, config: pytest.Config) -> None:
        """^C while the session started (the target, xdist's workers): pytest skips the session's
        finish, so every selected case is recorded NOT_RUN here, and the table says so."""
        self._record_not_run(config)
        close_results(self.state)
        collected_path(self.state.results_dir, self.state.run_id).unlink(missing_ok=True)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            self.pytest_terminal_summary(reporter, pytest.ExitCode.INTERRUPTED, config)

    def _record_not_run(self, config: pytest.Config) -> None:
        """^C: every selected case without a record gets a NOT_RUN one (and a row in the table)."""
        self.interrupted_not_run = record_not_run(self.state, config)

    def _known(self, case_id: str, verdict: Verdict) -> bool:
        """Is this verdict explained by the --amqp-expected-failures file (so it does not fail the run)?"""
        triage = self.state.settings.expected_failures
        return (triage is not None and verdict is not Verdict.PASS
                and triage.known(case_id, verdict.value, self.invariant_facts.get(case_id)) is not None)

    def _expected_failure_lines(self) -> list[str]:
        triage = self.state.settings.expected_failures
        if triage is None:
            return []
        known = [(c, v) for c, _a, v in self.state.rows if self._known(c, v)]
        fixed = [c for c, _a, v in self.state.rows if v is Verdict.PASS and triage.listed(c) is not None]
        lines = [f"expected failures ({triage.path}): {len(known)} known, not counted for --fail-on"]
        if fixed:
            lines.append(f"fixed (listed there, PASS now): {', '.join(sorted(fixed)[:20])}"
                         + (" …" if len(fixed) > 20 else ""))
        return lines

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        state = self.state
        if is_worker(config) or not state.rows:
            return
        tr = terminalreporter
        server = state.server
        tr.write_sep("=", "amqp-conformance verdicts")
        if server is not None:
            tr.write_line(
                f"target {state.target_name} at {redact(state.url)}: {server.product} {server.version} "
                f"({server.platform}); profile {state.profile}{release_note(state.release)}"
                + "".join(f"\n{line}" for line in beyond_lines(state.release))
            )
        for line in area_table(state.rows, color=bool(getattr(tr, "hasmarkup", False))):
            tr.write_line(line)
        tr.write_line(f"total time {time.monotonic() - state.started:.1f}s; results {state.results_file}")
        for line in slowest_cases(self.node_case, self.node_seconds):
            tr.write_line(line)
        for line in unsupported_groups(self.unsupported):
            tr.write_line(line)
        for line in state.cleanup_notes.lines(delete_wait(state.case_timeout)):
            tr.write_line(line)
        if self.interrupted_not_run is not None:
            tr.write_line(f"INTERRUPTED (^C): {self.interrupted_not_run} case(s) not run, recorded NOT_RUN; "
                          "the verdicts above are a partial run", red=True, bold=True)
        found = self.unresponsive()
        if found is not None:
            not_run = sum(1 for r in state.rows if r[2] is Verdict.NOT_RUN)
            tr.write_line(f"the broker stopped answering after case {found.after_case} ({found.cause}); "
                          f"{not_run} case(s) not run; exit code {EXIT_UNRESPONSIVE}", red=True, bold=True)
            if state.hang_note:
                tr.write_line(state.hang_note)
        for line in self._expected_failure_lines():
            tr.write_line(line)
        bad = [r for r in state.rows if r[2] in state.fail_on and not self._known(r[0], r[2])]
        if bad:
            tr.write_line(f"fail-on {','.join(sorted(v.value for v in state.fail_on))}: {len(bad)} case(s): "
                          + ", ".join(f"{cid} {v.value}" for cid, _a, v in bad[:20])
                          + (" …" if len(bad) > 20 else ""))
