"""``amqp-conformance run``: the main job. The suite (default target: the built-in reference
broker) runs under pytest with the conformance plugin, results are written, the area × verdict
table printed, the compliance report of the run built (its JVM started while the suite runs), and
the exit code follows ``--fail-on``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from pluggy import HookimplMarker

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.argparsing import command_parser, workers
from conformance.cli import EXIT_BAD_INPUT, EXIT_INTERRUPTED, _err
from conformance.scenarios import areas_of

if TYPE_CHECKING:
    import pytest


# pytest.hookimpl. pytest and the plugin are imported where used: ``report`` starts ~0.2 s sooner.
hookimpl = HookimplMarker("pytest")





#--------------------------------------------------------------------------------


def _run_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "run",
        "Run the conformance suite and build the report of the run.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 no verdict listed in --fail-on; 1 some were; 2 bad arguments; 3 internal "
        "error or the report failed; "
        "4 the target "
        "could not be\nstarted or probed; 5 no case selected; 6 the broker stopped answering during the "
        "run (the\ncases not yet run are recorded NOT_RUN; results, JUnit and report are still written); "
        "130 interrupted (^C: the\ncases not run are recorded NOT_RUN, the results file is kept; no report)",
    )
    p.add_argument("-n", "--workers", default=None, type=workers,
                   help="parallel workers (pytest-xdist): a number, 'auto' or 0 (in-process); default "
                        f"{default_workers()} here: three times the cores, at least 2, at most 8 (0 with "
                        "--restart-cmd / --alarm-cmd)")
    add_table_options(p)
    p.add_argument(
        "--report-out", default="reports", help="where the run's report folder goes (default reports)"
    )
    p.add_argument("--no-report", action="store_true", help="skip the compliance report")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="one line per case (pytest -v) and the report's stages with their times")
    p.add_argument("--master", default=None, help="Spark master for the report (default local[*])")
    p.add_argument("-k", dest="keyword", default=None,
                   help="only cases matching this pytest -k expression (case ids and markers work)")
    p.add_argument("--area", action="append", default=[],
                   help="only these areas (scenario modules), e.g. --area confirms --area tx or "
                        "--area confirms,tx")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    return p


def add_table_options(p: argparse.ArgumentParser) -> None:
    """The plugin's options (:data:`conformance.plugin.options.OPTIONS`) as ``run --NAME``."""
    from conformance.plugin.commandline import add_command_options

    add_command_options(p)


def table_values_as_pytest_args(args: argparse.Namespace, *, skip: Sequence[str] = ()) -> list[str]:
    """The table options given on ``run``'s command line, as the plugin's ``--amqp-NAME``."""
    from conformance.plugin.options import OPTIONS
    out: list[str] = []
    for opt in OPTIONS:
        value = getattr(args, opt.dest, None)
        if opt.name in skip or value is None or value is False:
            continue
        if isinstance(value, list):  # a repeated option (``repeat``): its values as one comma list
            value = ",".join(value)
        out += [opt.flag] if opt.switch else [opt.flag, str(value)]
    return out


def _effective(args: argparse.Namespace, name: str) -> tuple[str | None, str]:
    """An option's value given to ``run`` (else its environment twin) and how the user spelled it."""
    from conformance.plugin.commandline import given

    return given(args, name)


def _pytest_table_args(pytest_args: Sequence[str]) -> list[tuple[str, str, str]]:
    """The plugin's ``--amqp-NAME value`` / ``--amqp-NAME=value`` given after ``--``."""
    from conformance.plugin.options import BY_NAME
    out: list[tuple[str, str, str]] = []
    for i, token in enumerate(pytest_args):
        if not token.startswith("--amqp-"):
            continue
        flag, eq, value = token.partition("=")
        opt = BY_NAME.get(flag.removeprefix("--amqp-"))
        if opt is None or opt.switch:
            continue
        if not eq:
            if i + 1 >= len(pytest_args):
                raise ValueError(f"{flag} takes a value")
            value = pytest_args[i + 1]
        out.append((opt.name, value, flag))
    return out


def default_workers(cores: int | None = None) -> int:
    """``run``'s default ``-n``: three times the cores, at least 2, at most 8.

    Most of the suite's time is in cases that wait (a window proving that nothing more arrives, a
    TTL, a restart: docs/waits.md), not compute, so workers beyond the cores shorten the run as
    long as some of them compute while the others wait (the schedule spreads the waits among the
    computing cases: conformance/plugin/schedule.py). Measured on 2 cores (2026-12-02, 540 cases,
    suite seconds, two runs each): -n 4 12.9 / 12.6, -n 5 11.8 / 12.4, -n 6 10.6 / 10.9, -n 8
    11.3 / 11.5; each worker's start costs ~0.9 s of CPU (it imports and collects the suite).
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(8, max(2, 3 * cores))


def _resolve_workers(args: argparse.Namespace) -> None:
    """Fill in ``-n`` when not given: in-process when a command acts on the one shared broker
    (``--restart-cmd`` / ``--alarm-cmd``: other workers' cases would run while it restarts or
    alarms it) and for a cluster target, else :func:`default_workers`. An explicit ``-n`` is kept
    (and refused with the commands)."""
    if args.workers is not None:
        return
    given = [t.partition("=")[0] for t in args.pytest_args]
    shared_commands = any(_effective(args, name)[0] or f"--amqp-{name}" in given
                          for name in ("restart-cmd", "alarm-cmd"))
    args.workers = "0" if shared_commands or _a_cluster(args) or "-n" in given else str(default_workers())


def _a_cluster(args: argparse.Namespace) -> bool:
    """A cluster target: its node controller lives in the process that started it, so the cases
    run in-process (workers would get only its URL, and every cluster case would be UNSUPPORTED)."""
    from conformance.targets.kinds import kind_of

    broker = _effective(args, "broker")[0]
    k = kind_of(broker) if broker else None
    return bool(_effective(args, "cluster-url")[0]) or (k is not None and k.cluster)


def bad_run_input(args: argparse.Namespace) -> str | None:
    """One line naming the first bad option value or combination of a ``run``, else None. Each
    value goes through the check its option declares (:data:`conformance.plugin.options.OPTIONS`),
    so nothing starts on input the plugin would refuse later."""
    try:
        _check_values(args)
        _check_combinations(args)
    except ValueError as exc:
        return str(exc).splitlines()[0]
    return None


def _check_values(args: argparse.Namespace) -> None:
    from conformance.plugin.options import BY_NAME, OPTIONS, SWITCH_VALUES
    for opt in OPTIONS:
        value, spelled = _effective(args, opt.name)
        if value is None:
            continue
        if opt.switch:
            if value.strip().lower() not in SWITCH_VALUES:
                raise ValueError(f"{spelled} takes 1/0, true/false, yes/no or on/off, not {value!r}")
            continue
        opt.check(value, spelled)
    passed: dict[str, str] = {}  # the plugin's options given after --: the same refusals as their run twins
    for name, value, flag in _pytest_table_args(args.pytest_args):
        BY_NAME[name].check(value, flag)
        passed[name] = flag
    parallel = args.workers not in ("0", "")
    for name in ("restart-cmd", "alarm-cmd"):
        given = f"--{name}" if _effective(args, name)[0] else passed.get(name)
        if parallel and given:
            raise ValueError(f"-n cannot be combined with {given}: it acts on the one shared broker "
                             "while other workers' cases run on it")
    areas_of(args.area)


def _check_combinations(args: argparse.Namespace) -> None:
    """The target options together (:func:`conformance.targets.spec.target_spec`'s rules)."""
    from conformance.plugin.commandline import target_of

    target_of(args)


# The pytest plugins ``run`` loads, by name; no other installed plugin is autoloaded. Each process
# (the controller and every xdist worker) otherwise imports every installed pytest11 plugin and,
# without a bytecode cache, assertion-rewrites its modules: with the dev extra (hypothesis,
# pytest-benchmark, pytest-cov) that was ~1 s of CPU per process, 2.2 s vs 1.2 s to collect the
# suite. Another plugin is still one ``-p NAME`` after ``--`` away.
RUN_PLUGINS = ("xdist.plugin", "allure_pytest.plugin", "conformance.plugin")
NO_AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"


@contextlib.contextmanager
def _no_plugin_autoload() -> Iterator[None]:
    """Plugins named on the command line only, for this process and the workers it starts."""
    before = os.environ.get(NO_AUTOLOAD)
    os.environ[NO_AUTOLOAD] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(NO_AUTOLOAD, None)
        else:
            os.environ[NO_AUTOLOAD] = before


def _pytest_args(args: argparse.Namespace, results_dir: Path, reports: Path, run_id: str) -> list[str]:
    """The pytest command line ``run`` hands to pytest.main."""
    # Only the plugins a run uses are loaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD, see RUN_PLUGINS).
    pyargs = [*(a for name in RUN_PLUGINS for a in ("-p", name)),
              "-p", "no:cacheprovider", "-o", "console_output_style=count", "-rN",
              # no assertion rewriting: a case's verdict is a Mismatch, never an assert's
              # introspection, and rewriting the scenario modules cost every worker ~15% of its
              # start's CPU (0.87 -> 0.75 s to collect the suite, without a bytecode cache)
              "--assert=plain",
              # no conftest.py: the suite has none, and pytest otherwise loads those of the folder
              # run is started in and of its test* subfolders (_try_load_conftest, when the
              # arguments are --pyargs, not paths): in this checkout tests/conftest.py, whose
              # hooks re-sorted the collection and cost every worker ~0.1 s of CPU
              "--noconftest",
              # A pytest config where run is started (this project's checkout: -n 4, -m 'not cluster' for
              # its own tests) must not change which cases run or how: run decides -n and the selection.
              "-o", "addopts="]
    targets = [f"conformance.scenarios.test_{a}" for a in areas_of(args.area)] or ["conformance.scenarios"]
    pyargs += ["--pyargs", *targets]
    pyargs += table_values_as_pytest_args(args, skip=("results",))
    pyargs += ["--amqp-results", str(results_dir)]
    pyargs += ["--junitxml", str(reports / "junit" / f"{run_id}.xml"),
               # a folder per run: two runs at once in one project must not clean each other's results
               "--alluredir", str(reports / "allure-results" / run_id)]
    if args.workers not in ("0", ""):
        pyargs += ["-n", args.workers]
    if args.keyword:
        pyargs += ["-k", args.keyword]
    if args.verbose:
        pyargs += ["-v"]
    pyargs += args.pytest_args
    return pyargs


def run_main(argv: Sequence[str], *, phases: dict[str, float] | None = None) -> int:
    """``amqp-conformance run``; ``phases`` (``bench run``) receives the seconds of each phase."""
    import pytest

    from conformance.plugin.options import BY_NAME
    from conformance.plugin.settings import pytest_refuses
    args = _run_parser().parse_args(list(argv))
    _resolve_workers(args)
    bad = bad_run_input(args)
    if bad is not None:
        _err(bad)
        return EXIT_BAD_INPUT

    from conformance.model.results import new_run_id
    run_id = new_run_id()
    os.environ["AMQP_CONFORMANCE_RUN_ID"] = run_id
    opt = BY_NAME["results"]
    results_dir = Path(args.amqp_results or os.environ.get(opt.env) or str(opt.default)).resolve()
    reports = Path(args.report_out).resolve()
    pyargs = _pytest_args(args, results_dir, reports, run_id)
    with _no_plugin_autoload():
        refused = pytest_refuses(pyargs)  # before anything is written
    if refused is not None:
        _err(refused if not args.pytest_args else f"pytest arguments after --: {refused}")
        return EXIT_BAD_INPUT
    from conformance.plugin.session import results_writable

    unwritable = results_writable(results_dir) or results_writable(Path(args.report_out).resolve())
    if unwritable:
        print(unwritable, file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.no_report:
        from conformance.extras import missing_extra

        # Before the suite runs, not after: a run whose report cannot be built says so up front.
        problem = missing_extra("report", "the run's report (or give --no-report)")
        if problem is not None:
            _err(problem)
            return EXIT_BAD_INPUT
    started = time.monotonic()
    threads_before = set(threading.enumerate())
    early = None if args.no_report else EarlyReport(args.master)  # --no-report: never a JVM
    try:
        with _sigint_seen() as interrupted, _no_plugin_autoload():
            code = int(pytest.main(pyargs, plugins=[early] if early is not None else None))
        suite_end = time.monotonic()
        if phases is not None:
            phases["suite"] = suite_end - started
        # Non-daemon threads a case left behind (a client library's, after a timed-out call).
        left_behind = [t for t in threading.enumerate() if t not in threads_before and not t.daemon]
        if interrupted.is_set():
            # pytest says 2 for ^C, which is this command's "bad arguments": say 130, as a shell does.
            _err("interrupted")
            code = EXIT_INTERRUPTED
        else:
            code = _run_rest(args, code, results_dir, run_id, reports, started, early, phases)
    finally:
        if early is not None:
            early.stop()  # every path: failure, ^C, no case selected (build_report stops it too)
    if phases is not None and early is not None and early.started_at is not None and early.ready_at:
        phases["jvm start (overlapping the suite)"] = early.ready_at - early.started_at
        phases["jvm start not hidden by the suite"] = max(0.0, early.ready_at - suite_end)
    if any(t.is_alive() for t in left_behind):
        # Python would wait for them at exit: the results and report are written, end here.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


@contextlib.contextmanager
def _sigint_seen() -> Iterator[threading.Event]:
    """Notes a ^C (SIGINT) while the suite runs, then lets it interrupt pytest as usual."""
    seen = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def note(signum: int, frame: FrameType | None) -> None:
        seen.set()
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield seen
        return
    signal.signal(signal.SIGINT, note)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


class EarlyReport:
    """A pytest plugin of ``run``: starts the report's Spark session once cases are about to run,
    so the JVM's start-up overlaps the suite and the report costs only its compute.

    Not at once: a target that cannot be started or probed, or a selection of no case, ends the
    run without ever paying for a JVM (the start hooks come after the probe and the collection).
    """

    def __init__(self, master: str | None) -> None:
        self.master = master
        self.session: Any = None  # conformance.report.session.EarlySession, once started
        self.started_at: float | None = None  # monotonic clock: asked to start, and ready
        self.ready_at: float | None = None

    def start(self) -> None:
        if self.session is None:
            from conformance.report import start_session_early

            self.started_at = time.monotonic()
            self.session = start_session_early(self.master)
            threading.Thread(target=self._note_ready, args=(self.session,), name="spark-ready",
                             daemon=True).start()

    def _note_ready(self, session: Any) -> None:
        """When the JVM is up (for ``bench run``'s phases); a failed start is the report's to say."""
        with contextlib.suppress(BaseException):
            session.get()
            self.ready_at = time.monotonic()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items and not session.config.getoption("collectonly", False):  # in-process run
            self.start()

    @hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: Sequence[str]) -> None:
        if ids:  # the xdist controller collects nothing itself: a worker's collection says it
            self.start()

    def take(self) -> Any:
        """The started session for ``build_report`` (which stops it), or None."""
        session, self.session = self.session, None
        return session

    def stop(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.stop()


def _run_rest(args: argparse.Namespace, code: int, results_dir: Path, run_id: str, reports: Path,
              started: float, early: EarlyReport | None = None,
              phases: dict[str, float] | None = None) -> int:
    """After the suite: the exit code and, unless --no-report, the run's report."""
    results_file = results_dir / f"{run_id}.jsonl"
    if code in (2, 3, 4) or not results_file.exists():
        if code == 5 or (code == 0 and not results_file.exists()):
            _err("no case ran (check --area / --case / --rule / -k)")
            return 5
        return code or 1
    print(f"suite finished in {time.monotonic() - started:.1f}s; results {results_file}", file=sys.stderr)
    if not args.no_report:
        session = early.take() if early is not None else None
        rc = _build_run_report(results_file, reports / run_id, args.master, session, phases,
                               verbose=args.verbose)
        if rc != 0:
            return rc
    from conformance.model.results import final_lines

    for line in final_lines(results_file):
        print(line, file=sys.stderr)
    return code


def _build_run_report(results_file: Path, out: Path, master: str | None, session: Any = None,
                      phases: dict[str, float] | None = None, *, verbose: bool = True) -> int:
    began = time.monotonic()
    try:
        report = importlib.import_module("conformance.report")
    except ImportError as exc:
        _err(f"report pipeline not available ({exc}); results kept in {results_file}")
        return 1
    build = getattr(report, "build_report", None)
    if build is None:
        _err(f"report pipeline has no build_report; results kept in {results_file}")
        return 1
    try:
        summary = build([str(results_file)], out, master=master, name=out.name, session=session,
                        progress=(lambda msg: print(f"[report] {msg}", file=sys.stderr, flush=True))
                        if verbose else None)
    except Exception as exc:  # noqa: BLE001 - one clear line; the results file is kept
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _err(f"report failed: {first}; results kept in {results_file}")
        return 3
    if phases is not None:
        phases["report (wall, from the suite's end)"] = time.monotonic() - began
        for stage, secs in (summary.get("timings_s") or {}).items() if isinstance(summary, dict) else ():
            phases[f"report: {stage}"] = float(secs)
    html = out / "index.html"
    print(f"report: {html if html.exists() else out}", file=sys.stderr)
    return 0


# -- cases -----------------------------------------------------------------------------------
