"""^C mid-run: the cases that never ran are recorded NOT_RUN, so a results file says it is partial.

The process that collects the cases (the only one without xdist, the first worker with it) writes
the run's selection to ``<run_id>.collected.json`` beside the results. When the session ends
interrupted, the controller compares that list with what was recorded and writes a NOT_RUN record
for every case that has none. Under xdist the controller itself never collects, hence the file.

A ^C before any worker finished collecting leaves no file: the controller then collects the same
selection itself, in a ``--collect-only`` pytest of the run's own arguments without xdist (no
target is started for a collection; :func:`collect_selection`), bounded in time, so every
selected case still gets its record.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import pytest

from conformance.model.cases import REGISTRY, Case, case_of
from conformance.model.results import recorded_case_ids
from conformance.model.verdicts import Decision, Verdict
from conformance.plugin.records import write_record
from conformance.plugin.session import RUN_ID_ENV, SessionState

INTERRUPTED_MESSAGE = "interrupted (^C) before this case ran"
#: set for the --collect-only pytest that writes a selection (a collection alone writes none)
WRITE_COLLECTED_ENV = "AMQP_CONFORMANCE_WRITE_COLLECTED"
#: seconds the controller gives that collection (a second ^C ends it sooner)
COLLECT_TIMEOUT = 60.0
# Options the collection leaves out, each with its value: xdist's (it runs in one process) and the
# report writers' (a collection must not overwrite the interrupted run's JUnit XML or allure files).
_XDIST_WITH_VALUE = ("-n", "--numprocesses", "--dist", "--maxprocesses", "--max-worker-restart", "--tx",
                     "--junitxml", "--junit-xml", "--alluredir")


@dataclass(frozen=True)
class Selected:
    nodeid: str
    module: str
    case_id: str  # the case's own id
    run_id: str  # the id its record carries (with a queue type suffix)
    queue_type: str | None


def collected_path(results_dir: Path, run_id: str) -> Path:
    return results_dir / f"{run_id}.collected.json"


def write_collected(path: Path, selected: list[Selected]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([s.__dict__ for s in selected]), encoding="utf-8")
    tmp.replace(path)  # whole or absent: a ^C during collection leaves no half list


def without_xdist(args: list[str]) -> list[str]:
    """The run's pytest arguments without xdist's (and its plugin's ``-p xdist.plugin``) and the
    report writers' options."""
    out: list[str] = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        flag = a.partition("=")[0]
        if flag in _XDIST_WITH_VALUE or (a.startswith("-n") and a[2:].isdigit()):
            skip = "=" not in a and flag == a and not (a.startswith("-n") and a[2:])
            continue
        if a == "-p" and i + 1 < len(args) and args[i + 1].startswith("xdist"):
            skip = True
            continue
        out.append(a)
    return out


def collect_selection(args: list[str], run_id: str, cwd: Path, env_var: str,
                      timeout: float = COLLECT_TIMEOUT) -> bool:
    """Collect the run's selection in a --collect-only pytest (no target started) that writes
    ``<run_id>.collected.json``; False when it could not (timeout, error, another ^C)."""
    env = {**os.environ, env_var: run_id, WRITE_COLLECTED_ENV: "1"}
    cmd = [sys.executable, "-m", "pytest", *without_xdist(args), "--collect-only", "-q", "-p", "no:randomly"]
    try:
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired, KeyboardInterrupt):
        return False
    return done.returncode == 0


def selected_of(item: pytest.Item, run_id: str, queue_type: str | None) -> Selected | None:
    c = case_of(item)
    if c is None:
        return None
    module = getattr(getattr(item, "module", None), "__name__", "")
    return Selected(item.nodeid, module, c.id, run_id, queue_type)


def not_run(path: Path, results_dir: Path, run_id: str,
            reported: set[str]) -> list[tuple[Case, Selected]]:
    """The selected cases with no record yet (none reported to this process, none in any part file)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # interrupted before collection finished: nothing was selected yet
    done = reported | recorded_case_ids(results_dir, run_id)
    out: list[tuple[Case, Selected]] = []
    for row in raw:
        s = Selected(**row)
        if s.run_id in done:
            continue
        if s.case_id not in REGISTRY and s.module:
            importlib.import_module(s.module)  # the controller under xdist never imported the scenarios
        c = REGISTRY.get(s.case_id)
        if c is not None:
            out.append((c, s))
    return out


def give_line_numbers(exc: BaseException) -> bool:
    """Give every traceback entry of ``exc`` and of the exceptions chained to it a line number;
    True when one had none.

    Python 3.11 leaves ``tb_lineno`` None where a frame stopped at an instruction without a source
    line (code the compiler adds: an ``except ... as`` clean-up, a ``with`` exit). A ^C that lands
    there made pytest's report of the interrupt raise (``TracebackEntry.lineno``: None - 1): the
    session never learnt it was interrupted, no NOT_RUN was recorded and ``run`` exited 1, not 130.
    Such an entry gets the line of the nearest instruction before it that has one (else the
    function's first line).
    """
    fixed = False
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        todo += [e.__cause__, e.__context__]
        tb = e.__traceback__
        entries: list[TracebackType] = []
        while tb is not None:
            entries.append(tb)
            tb = tb.tb_next
        if all(t.tb_lineno is not None for t in entries):
            continue
        rebuilt: TracebackType | None = None
        for t in reversed(entries):
            line = t.tb_lineno if t.tb_lineno is not None else _line_before(t)
            rebuilt = TracebackType(rebuilt, t.tb_frame, t.tb_lasti, line)
        e.__traceback__ = rebuilt
        fixed = True
    return fixed


def _line_before(tb: TracebackType) -> int:
    code = tb.tb_frame.f_code
    line = code.co_firstlineno
    for start, _end, lineno in code.co_lines():
        if start > tb.tb_lasti:
            break
        if lineno is not None:
            line = lineno
    return line


def record_not_run(state: SessionState, config: pytest.Config) -> int:
    """^C: every selected case without a record gets a NOT_RUN one (and a row in the table);
    returns how many. With no selection on file yet, it is collected first."""
    reported = {case_id for case_id, _a, _v in state.rows}
    collected = collected_path(state.results_dir, state.run_id)
    if not collected.exists():  # interrupted before any worker finished collecting
        collect_selection(list(config.invocation_params.args), state.run_id,
                          Path(config.invocation_params.dir), RUN_ID_ENV)
    missing = not_run(collected, state.results_dir, state.run_id, reported)
    for c, s in missing:
        decision = Decision(Verdict.NOT_RUN, c.expectation, "-", INTERRUPTED_MESSAGE)
        write_record(state, c, None, decision, 0.0, s.nodeid, queue_type=s.queue_type)
        state.rows.append((s.run_id, c.area, Verdict.NOT_RUN))
    return len(missing)
