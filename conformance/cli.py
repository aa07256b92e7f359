"""``amqp-conformance``: run, cases, broker, report, gate, bench.

``amqp-conformance run`` is the main job: it runs the suite (default target: the built-in
reference broker), writes results, prints the area × verdict table, builds the compliance report
of the run and exits per ``--fail-on``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from conformance import __version__
from conformance.argparsing import command_parser
from conformance.profiles import DEFAULT_PROFILE, PROFILE_DESCRIPTIONS

if TYPE_CHECKING:
    from conformance.cases import Case

EXIT_BAD_INPUT = 2


def _err(message: str) -> None:
    print(f"amqp-conformance: {message}", file=sys.stderr)


# -- run -------------------------------------------------------------------------------------


def _run_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "run",
        "Run the conformance suite and build the report of the run.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 no verdict listed in --fail-on; 1 some were; 2 bad arguments; 3 internal "
        "error or the report failed; "
        "4 the target "
        "could not be\nstarted or probed; 5 no case selected; 6 the broker stopped answering during the "
        "run (the\ncases not yet run are recorded NOT_RUN; results, JUnit and report are still written)",
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument("--broker", default=None,
                        help="reference (default) | local:rabbitmq | local:garagemq | container:IMAGE")
    target.add_argument("--broker-url", default=None, help="any broker: amqp://user:pass@host:port/vhost")
    p.add_argument("-n", "--workers", default="0",
                   help="parallel workers (pytest-xdist): a number or 'auto' (default 0: in-process)")
    p.add_argument(
        "--profile",
        default=None,
        help=" | ".join(f"{n} (default)" if n == DEFAULT_PROFILE else n for n in PROFILE_DESCRIPTIONS),
    )
    p.add_argument("--case-timeout", default=None, help="seconds per wait before TIMEOUT (default 10)")
    p.add_argument("--case-ceiling", default=None,
                   help="hard ceiling per case, a multiple of --case-timeout (default 6; 0 disables): a case "
                        "still running then is interrupted and recorded TIMEOUT with where it was stuck")
    p.add_argument("--fail-on", default=None, help="verdicts that fail the run (default FAIL,TIMEOUT,ERROR)")
    p.add_argument("--restart-cmd", default=None, help="command that restarts the --broker-url broker")
    p.add_argument("--restricted-url", default=None,
                   help="URL of a second user with restricted permissions, for the access area (spawned "
                        "targets make one; see the scenarios README for the permissions it needs)")
    p.add_argument(
        "--tls",
        action="store_true",
        help="--broker reference|local:rabbitmq listen with TLS (certificates made for the run) and "
        "the suite connects over amqps",
    )
    p.add_argument("--tls-ca", default=None, help="PEM CA bundle that verifies the broker's certificate")
    p.add_argument("--tls-cert", default=None, help="PEM client certificate sent to the broker")
    p.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert")
    p.add_argument("--tls-insecure", action="store_true", help="do not verify the broker's certificate")
    p.add_argument("--queue-type", default=None,
                   help="queue type(s) the queue-declaring cases declare: classic (default), quorum, or "
                        "classic,quorum (each such case once per type; other types' ids suffixed [type])")
    p.add_argument("--results", default="reports/results", help="results folder (default reports/results)")
    p.add_argument(
        "--report-out", default="reports", help="where the run's report folder goes (default reports)"
    )
    p.add_argument("--no-report", action="store_true", help="skip the compliance report")
    p.add_argument("--master", default=None, help="Spark master for the report (default local[*])")
    p.add_argument(
        "--case",
        default=None,
        help="only the cases whose id matches one of these comma separated globs, e.g. 'confirms.*'",
    )
    p.add_argument(
        "--rule",
        default=None,
        help="only the cases checking a spec rule that matches one of these globs, e.g. 'basic.ack/*'",
    )
    p.add_argument("--expected-failures", default=None, metavar="TOML",
                   help="triage file (the gate's format, e.g. fixtures/baselines/garagemq.triage.toml): "
                        "verdicts it explains are reported as known and do not fail the run; listed cases "
                        "that pass are reported as fixed")
    p.add_argument("-k", dest="keyword", default=None,
                   help="only cases matching this pytest -k expression (case ids and markers work)")
    p.add_argument("--area", action="append", default=[],
                   help="only these areas (scenario modules), e.g. --area confirms --area tx")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    return p


def run_main(argv: Sequence[str]) -> int:
    args = _run_parser().parse_args(list(argv))
    import pytest

    from conformance.results import new_run_id

    run_id = new_run_id()
    os.environ["AMQP_CONFORMANCE_RUN_ID"] = run_id
    results_dir = Path(args.results).resolve()
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
    pyargs = ["-p", "no:cacheprovider", "-o", "console_output_style=count", "-rN"]
    targets = [f"conformance.scenarios.test_{a}" for a in args.area] or ["conformance.scenarios"]
    pyargs += ["--pyargs", *targets]
    for name, value in (
        ("broker", args.broker),
        ("broker-url", args.broker_url),
        ("profile", args.profile),
        ("case-timeout", args.case_timeout),
        ("case-ceiling", args.case_ceiling),
        ("fail-on", args.fail_on),
        ("restart-cmd", args.restart_cmd),
        ("restricted-url", args.restricted_url),
        ("case", args.case),
        ("rule", args.rule),
        ("expected-failures", args.expected_failures),
        ("queue-type", args.queue_type),
        ("tls-ca", args.tls_ca),
        ("tls-cert", args.tls_cert),
        ("tls-key", args.tls_key),
    ):
        if value is not None:
            pyargs += [f"--amqp-{name}", str(value)]
    pyargs += [
        f"--amqp-{name}" for name, on in (("tls", args.tls), ("tls-insecure", args.tls_insecure)) if on
    ]
    pyargs += ["--amqp-results", str(results_dir)]
    reports = Path(args.report_out).resolve()
    pyargs += ["--junitxml", str(reports / "junit" / f"{run_id}.xml"),
               "--alluredir", str(reports / "allure-results"), "--clean-alluredir"]  # this run's results only
    if args.workers not in ("0", ""):
        pyargs += ["-n", args.workers]
    if args.keyword:
        pyargs += ["-k", args.keyword]
    pyargs += args.pytest_args
    started = time.monotonic()
    threads_before = set(threading.enumerate())
    code = int(pytest.main(pyargs))
    # Non-daemon threads a case left behind (a client library's, after a timed-out call).
    left_behind = [t for t in threading.enumerate() if t not in threads_before and not t.daemon]
    code = _run_rest(args, code, results_dir, run_id, reports, started)
    if any(t.is_alive() for t in left_behind):
        # Python would wait for them at exit: the results and report are written, end here.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _run_rest(args: argparse.Namespace, code: int, results_dir: Path, run_id: str, reports: Path,
              started: float) -> int:
    """After the suite: the exit code and, unless --no-report, the run's report."""
    results_file = results_dir / f"{run_id}.jsonl"
    if code in (2, 3, 4) or not results_file.exists():
        if code == 5 or (code == 0 and not results_file.exists()):
            _err("no case ran (check --area / --case / --rule / -k)")
            return 5
        return code or 1
    print(f"suite finished in {time.monotonic() - started:.1f}s; results {results_file}", file=sys.stderr)
    if not args.no_report:
        rc = _build_run_report(results_file, reports / run_id, args.master)
        if rc != 0:
            return rc
    return code


def _build_run_report(results_file: Path, out: Path, master: str | None) -> int:
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
        summary = build([str(results_file)], out, master=master, name=out.name,
                        progress=lambda msg: print(f"[report] {msg}", file=sys.stderr, flush=True))
    except Exception as exc:  # noqa: BLE001 - one clear line; the results file is kept
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _err(f"report failed: {first}; results kept in {results_file}")
        return 3
    html = out / "index.html"
    print(f"report: {html if html.exists() else out}", file=sys.stderr)
    if isinstance(summary, dict) and summary.get("brokers"):
        print(json.dumps({"brokers": summary.get("brokers")}, default=str)[:2000], file=sys.stderr)
    return 0


# -- cases -----------------------------------------------------------------------------------


def cases_main(argv: Sequence[str]) -> int:
    p = command_parser("cases", "List the suite's cases.")
    p.add_argument("--rules", action="store_true", help="spec-rule coverage: every rule against its cases")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--area", default=None, help="only this area")
    p.add_argument("--invariants", action="store_true",
                   help="the wire invariants checked under every case (a violation makes the case FAIL)")
    args = p.parse_args(list(argv))
    if args.invariants:
        return _print_invariants(as_json=args.json)
    from conformance.cases import all_cases

    cases = [c for c in all_cases() if args.area in (None, c.area)]
    if args.rules:
        return _print_rule_coverage(cases, as_json=args.json)
    if args.json:
        print(json.dumps([c.as_dict() for c in cases], indent=1))
        return 0
    width = max((len(c.id) for c in cases), default=10)
    for c in cases:
        print(f"{c.id:<{width}}  {c.level.value:<9} {','.join(c.rules) or '-'}")
    areas = sorted({c.area for c in cases})
    print(f"{len(cases)} cases in {len(areas)} areas: {', '.join(areas)}")
    return 0


def _print_invariants(*, as_json: bool) -> int:
    from dataclasses import asdict

    from conformance.protocol.invariants import INVARIANTS

    if as_json:
        print(json.dumps([asdict(i) for i in INVARIANTS], indent=1))
        return 0
    for i in INVARIANTS:
        print(f"{i.id}\n    {i.text}\n    rule: {i.rule}")
    print(f"{len(INVARIANTS)} wire invariants, checked on every raw-client frame of every case")
    return 0


def _print_rule_coverage(cases: Sequence[Case], *, as_json: bool) -> int:
    from conformance.coverage import rule_coverage

    rows = rule_coverage(cases)
    checked = sum(1 for r in rows if r.cases)
    uncheckable = sum(1 for r in rows if not r.cases and r.reason)
    missing = [r for r in rows if not r.cases and not r.reason]
    if as_json:
        print(json.dumps([r.as_dict() for r in rows], indent=1))
    else:
        width = max(len(r.rule.id) for r in rows)
        for r in rows:
            status = ", ".join(r.cases[:4]) + (f" (+{len(r.cases) - 4})" if len(r.cases) > 4 else "") \
                if r.cases else (f"not checkable: {r.reason}" if r.reason else "NOT COVERED")
            print(f"{r.rule.id:<{width}}  {r.rule.level:<6} {status}")
        total = len(rows)
        print(f"rules: {total}; checked by cases: {checked} ({100 * checked / total:.0f}%); "
              f"not checkable from a client: {uncheckable}; not covered: {len(missing)}")
    return 1 if missing else 0


# -- dispatch --------------------------------------------------------------------------------


def _lazy(module: str, func: str, extra: str | None = None) -> Callable[[Sequence[str]], int]:
    def call(argv: Sequence[str]) -> int:
        if extra is not None and "-h" not in argv and "--help" not in argv:
            from conformance.extras import missing_extra

            problem = missing_extra(extra, "this command")
            if problem is not None:
                _err(problem)
                return EXIT_BAD_INPUT
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            _err(f"{module} is not available: {exc}")
            return 1
        return int(getattr(mod, func)(list(argv)) or 0)

    return call


COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "run": (run_main, "run the suite (default: against the built-in reference broker) and build its report"),
    "cases": (cases_main, "list cases; --rules prints spec-rule coverage"),
    "broker": (_lazy("conformance.broker.cli", "main"), "run the reference broker"),
    "report": (_lazy("conformance.report.cli", "report_main"), "build the compliance report from results"),
    "ingest": (
        _lazy("conformance.report.store", "ingest_main", extra="report"),
        "append results runs to a Parquet results store (--store DIR)",
    ),
    "gate": (_lazy("conformance.gate", "main"), "release gate: a candidate run against a baseline (no JVM)"),
    "mutate": (
        _lazy("conformance.mutate.runner", "main"),
        "run the suite through injected broker faults (mutants)",
    ),
    "bench": (
        _lazy("conformance.bench.cli", "bench_main"),
        "benchmarks: broker (load generator), report (pipeline at scale), crash (kill -9 soak)",
    ),
    "fuzz": (
        _lazy("conformance.fuzz.cli", "main"),
        "frame-aware fuzzing of a broker (or the reference core)",
    ),
}


def _usage() -> str:
    lines = [f"usage: amqp-conformance COMMAND [options]   (version {__version__})", "", "commands:"]
    lines += [f"  {name:<8} {help_text}" for name, (_f, help_text) in COMMANDS.items()]
    lines += ["", "amqp-conformance COMMAND --help for a command's options"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else EXIT_BAD_INPUT
    if args[0] == "--version":
        print(__version__)
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        _err(f"unknown command {name!r}\n{_usage()}")
        return EXIT_BAD_INPUT
    try:
        return COMMANDS[name][0](rest)
    except KeyboardInterrupt:
        _err("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
