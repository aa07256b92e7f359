"""The registered plugin object: every hook of a suite session, as methods over its state."""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conformance.cases import case_of
from conformance.clients.raw import redact
from conformance.plugin.ceiling import ceiling
from conformance.plugin.records import STATUS, area_table, write_record
from conformance.plugin.session import (
    CTX,
    WORKER_INPUT_KEY,
    SessionState,
    close_all,
    is_worker,
    start_target,
    wants_target,
    worker_input,
)
from conformance.results import merge_parts
from conformance.verdicts import CeilingExceeded, Verdict, decide

VERDICT_KEY = "verdict"
DEADLINE = pytest.StashKey[float]()


def verdict_of(report: pytest.TestReport) -> Verdict | None:
    for key, value in report.user_properties:
        if key == VERDICT_KEY:
            return Verdict(value)
    return None


class ConformancePlugin:
    """One per pytest process (controller or xdist worker); holds the session's state."""

    def __init__(self, config: pytest.Config, state: SessionState) -> None:
        self.config = config
        self.state = state

    # -- selection -------------------------------------------------------------------------------

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """``--case GLOBS``: keep only the conformance cases whose id matches (others deselected)."""
        wanted = self.state.settings.case_globs
        if not wanted:
            return
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            c = case_of(item)
            matched = c is not None and any(fnmatch.fnmatchcase(c.id, g) for g in wanted)
            (keep if matched else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    # -- the target ------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        if is_worker(config) or not wants_target(config, self.state.settings):
            return
        start_target(self.state)
        if self.state.failed_to_start:
            # pytest prints a UsageError once, as "ERROR: <line>", and exits 4 before any case.
            raise pytest.UsageError(self.state.failed_to_start)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_INPUT_KEY] = worker_input(self.state)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        close_all(self.state)

    # -- the hard ceiling: setup and body share one deadline, teardown has its own -----------

    def _bounded(self, item: pytest.Item, phase: str) -> Any:
        limit = self.state.settings.case_ceiling
        if case_of(item) is None or limit <= 0:
            return ceiling(0, phase)
        if phase == "setup":
            item.stash[DEADLINE] = time.monotonic() + limit
        elif phase == "call":
            # The body gets what setup left, but never less than a second to start.
            limit = max(1.0, item.stash.get(DEADLINE, time.monotonic() + limit) - time.monotonic())
        return ceiling(limit, phase)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        with self._bounded(item, "setup"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        with self._bounded(item, "call"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        with self._bounded(item, "teardown"):
            return (yield)

    # -- verdicts --------------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        rep: pytest.TestReport = outcome.get_result()
        c = case_of(item)
        if c is None or call.when == "teardown" or (call.when == "setup" and rep.passed):
            return
        ctx = item.stash.get(CTX, None)
        decision = decide(c, call.excinfo, ctx, call.when)
        if decision.verdict is Verdict.UNSUPPORTED:
            rep.outcome = "skipped"
            rep.longrepr = (str(item.path), item.location[1] or 0, f"UNSUPPORTED: {decision.message}")
        else:
            rep.outcome = "failed" if decision.verdict in self.state.fail_on else "passed"
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
        extra: dict[str, Any] = {}
        if call.excinfo is not None and isinstance(call.excinfo.value, CeilingExceeded):
            extra["stuck_stack"] = list(call.excinfo.value.stack)
        write_record(self.state, c, ctx, decision, rep.duration if call.when == "call" else 0.0, item.nodeid,
                     extra)

    def pytest_report_teststatus(self, report: pytest.TestReport,
                                 config: pytest.Config) -> tuple[str, str, str] | None:
        verdict = verdict_of(report)
        return None if verdict is None else STATUS[verdict]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        verdict = verdict_of(report)
        if verdict is None:
            return
        props = dict(report.user_properties)
        self.state.rows.append((str(props.get("case_id")), str(props.get("area")), verdict))

    # -- the end ---------------------------------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.state
        if is_worker(session.config):
            return
        if state.writer is not None:
            state.writer.close()
            state.writer = None
        if state.results_dir.exists() and any(state.results_dir.glob(f"{state.run_id}.*.part.jsonl")):
            merge_parts(state.results_dir, state.run_id)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        state = self.state
        if is_worker(config) or not state.rows:
            return
        tr = terminalreporter
        server = state.server
        tr.write_sep("=", "amqp-conformance verdicts")
        if server is not None:
            tr.write_line(f"target {state.target_name} at {redact(state.url)}: {server.product} {server.version} "
                          f"({server.platform}); profile {state.profile}")
        for line in area_table(state.rows):
            tr.write_line(line)
        tr.write_line(f"total time {time.monotonic() - state.started:.1f}s; results {state.results_file}")
        bad = [r for r in state.rows if r[2] in state.fail_on]
        if bad:
            tr.write_line(f"fail-on {','.join(sorted(v.value for v in state.fail_on))}: {len(bad)} case(s): "
                          + ", ".join(f"{cid} {v.value}" for cid, _a, v in bad[:20])
                          + (" …" if len(bad) > 20 else ""))
