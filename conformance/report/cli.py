"""The ``report``, ``gate`` and ``bench`` commands (``amqp-conformance <command> …``).

Each ``*_main(argv)`` parses its own arguments (argv excludes the command name) and returns the
exit status: 0 success, 1 the gate found regressions, 2 bad input or an unusable environment.
Progress goes to stderr; stdout carries only the command's result (the gate's table).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance import gate
from conformance.argparsing import command_parser
from conformance.extras import missing_extra

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
    return EXIT_OK


# ------------------------------------------------------------------------------------------- gate

# The gate is plain Python (conformance.gate): no JVM, so it answers in well under a second.
parse_selector = gate.parse_selector
Selector = gate.Selector


def gate_main(argv: list[str]) -> int:
    return gate.main(argv)


# ------------------------------------------------------------------------------------------ bench


def bench_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "bench",
        "Benchmarks. 'report': generate synthetic results, then build the full report and time it.",
    )
    p.add_argument("what", choices=["report"], help="what to benchmark")
    p.add_argument("--rows", type=int, default=1_000_000, help="synthetic result rows (default 1,000,000)")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument(
        "--work",
        type=Path,
        default=None,
        help="folder for the data and the report (default: a temp folder, removed)",
    )
    p.add_argument("--seed", type=int, default=7, help="generator seed")
    p.add_argument("--store", action="store_true",
                   help="ingest the generated results into a results store and report from the store")
    return p


def bench_main(argv: list[str]) -> int:
    args = bench_parser().parse_args(argv)
    if args.rows < 1:
        _err("bench", "--rows must be at least 1")
        return EXIT_BAD_INPUT
    problem = missing_extra("report", "bench report")
    if problem is not None:
        _err("bench", problem)
        return EXIT_BAD_INPUT
    from conformance.report.bench import run_bench
    from conformance.report.session import EnvironmentProblem

    try:
        figures = run_bench(args.rows, master=args.master, work=args.work, seed=args.seed, progress=_progress,
                            store=args.store)
    except EnvironmentProblem as exc:
        _err("bench", str(exc))
        return EXIT_BAD_INPUT
    print(
        f"bench report: {figures['rows']:,} rows ({figures['input_mb']:.0f} MB JSONL, "
        f"{figures['files']} files) on {figures['master']}"
    )
    print(f"  spark startup        {figures['startup_s']:7.1f} s")
    print(f"  generate             {figures['generate_s']:7.1f} s")
    if figures.get("ingest_s") is not None:
        print(f"  ingest into store    {figures['ingest_s']:7.1f} s")
    for stage, secs in figures["stages"].items():
        print(f"  {stage:<20} {secs:7.1f} s")
    print(f"  report total         {figures['report_s']:7.1f} s  → {figures['rows_per_s']:,.0f} rows/s")
    print(f"  overall              {figures['total_s']:7.1f} s")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """``python -m conformance.report <report|gate|bench> …``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"report": report_main, "gate": gate_main, "bench": bench_main}
    if not argv or argv[0] not in commands:
        print("usage: python -m conformance.report {report,gate,bench} …", file=sys.stderr)
        return EXIT_BAD_INPUT
    return commands[argv[0]](argv[1:])
