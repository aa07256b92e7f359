"""The ``report`` command (``amqp-conformance report …``).

Each ``*_main(argv)`` parses its own arguments (argv excludes the command name) and returns the
exit status: 0 success, 1 the gate found regressions, 2 bad input or an unusable environment.
Progress goes to stderr; stdout carries only the command's result (the gate's table).
"""

from __future__ import annotations

import argparse
import atexit
import gc
import sys
from pathlib import Path

from conformance.argparsing import command_parser
from conformance.extras import missing_extra
from conformance.gate import compare as gate

EXIT_OK = 0
EXIT_REGRESSIONS = 1
EXIT_BAD_INPUT = 2


def _err(prog: str, message: str) -> None:
    print(f"amqp-conformance {prog}: {message}", file=sys.stderr, flush=True)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- report


def report_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "report",
        "Build the compliance report (Parquet tables, summary.json, index.html) from results JSONL.",
    )
    p.add_argument("results", nargs="*", metavar="RESULTS", help="results JSONL files, folders or globs")
    p.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="DIR",
        help="a results store made by 'amqp-conformance ingest' (repeatable; with or without RESULTS)",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder, e.g. reports/nightly")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--name", default=None, help="report name (default: the output folder's name)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def out_dir_problem(out: Path) -> str | None:
    """Why ``out`` cannot be the report's folder (checked before a JVM starts), or None."""
    if out.exists() and not out.is_dir():
        return f"--out {out} is an existing file, not a folder (name a folder for the report)"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create the report folder {out}: {exc.strerror or exc}"
    return None


def report_main(argv: list[str]) -> int:
    args = report_parser().parse_args(argv)
    problem = missing_extra("report", "the compliance report")
    if problem is None:
        from conformance.report.inputs import is_store

        not_stores = [d for d in args.store if not is_store(d)]
        if not_stores:
            problem = (f"--store {not_stores[0]} is not a results store (no store.json; make one with "
                       "'amqp-conformance ingest')")
        elif not (args.results or args.store):
            problem = "give RESULTS files or --store DIR"
    problem = problem or out_dir_problem(args.out)
    if problem is not None:
        _err("report", problem)
        return EXIT_BAD_INPUT
    from conformance.report import build_report
    from conformance.report.inputs import InputProblem
    from conformance.report.session import EnvironmentProblem

    try:
        summary = build_report(
            [*args.results, *args.store],
            args.out,
            master=args.master,
            name=args.name,
            progress=None if args.quiet else _progress,
        )
    except (InputProblem, EnvironmentProblem) as exc:
        _err("report", str(exc))
        return EXIT_BAD_INPUT
    inputs = summary["inputs"]
    print(
        f"report {summary['name']}: {inputs['n_rows']:,} executions, {summary['n_brokers']} broker versions, "
        f"{summary['n_cases']} cases, {inputs['n_malformed']} malformed line(s), "
        f"{summary['regressions']['count']} regression(s), {summary['flaky']['count']} flaky → "
        f"{args.out / 'index.html'}"
    )
    for m in summary.get("mutation", {}).get("brokers", []):
        score = "-" if m["score"] is None else f"{100 * m['score']:.1f}%"
        print(
            f"  suite power on {m['broker']}: {m['n_mutants']} mutants, {m['n_killed']} killed, "
            f"{m['n_survived']} survived, {m['n_no_result']} no result, {m['n_equivalent']} equivalent; "
            f"mutation score {score}"
            + (f"; not killed: {', '.join(m['not_killed'][:10])}" if m["not_killed"] else "")
        )
    # Everything is written and closed: the interpreter's collections at exit need not walk the
    # report's objects again (~0.2-0.4 s of the command's wall time). Frozen at exit only, so an
    # in-process caller (a test) keeps collecting as before.
    atexit.register(gc.freeze)
    return EXIT_OK


# ------------------------------------------------------------------------------------------- gate

# The gate is plain Python (conformance.gate.compare): no JVM, so it answers in well under a second.
parse_selector = gate.parse_selector
Selector = gate.Selector
