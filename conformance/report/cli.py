"""The ``report``, ``gate`` and ``bench`` commands (``amqp-conformance <command> …``).

Each ``*_main(argv)`` parses its own arguments (argv excludes the command name) and returns the
exit status: 0 success, 1 the gate found regressions, 2 bad input or an unusable environment.
Progress goes to stderr; stdout carries only the command's result (the gate's table).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

EXIT_OK = 0
EXIT_REGRESSIONS = 1
EXIT_BAD_INPUT = 2
DEFAULT_RESULTS = "reports/results/"
SELECTOR_KINDS = ("run", "version", "broker")


def _err(prog: str, message: str) -> None:
    print(f"amqp-conformance {prog}: {message}", file=sys.stderr, flush=True)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- report


def report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="amqp-conformance report",
        description="Build the compliance report (Parquet tables, summary.json, index.html) from results JSONL.",
    )
    p.add_argument("results", nargs="*", metavar="RESULTS", help="results JSONL files, folders or globs")
    p.add_argument("--store", action="append", default=[], metavar="DIR",
                   help="a results store made by 'amqp-conformance ingest' (repeatable; with or without RESULTS)")
    p.add_argument("--out", required=True, type=Path, help="output folder, e.g. reports/nightly")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--name", default=None, help="report name (default: the output folder's name)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def report_main(argv: list[str]) -> int:
    args = report_parser().parse_args(argv)
    from conformance.report.store import is_store

    not_stores = [d for d in args.store if not is_store(d)]
    if not_stores or not (args.results or args.store):
        _err("report", f"--store {not_stores[0]} is not a results store (no store.json; make one with "
             "'amqp-conformance ingest')" if not_stores else "give RESULTS files or --store DIR")
        return EXIT_BAD_INPUT
    from conformance.report import build_report
    from conformance.report.edges import InputProblem
    from conformance.report.session import EnvironmentProblem

    try:
        summary = build_report(
            [*args.results, *args.store], args.out, master=args.master, name=args.name, progress=None if args.quiet else _progress
        )
    except (InputProblem, EnvironmentProblem) as exc:
        _err("report", str(exc))
        return EXIT_BAD_INPUT
    inputs = summary["inputs"]
    print(
        f"report {summary['name']}: {inputs['n_rows']:,} executions, {summary['n_brokers']} broker versions, "
        f"{summary['n_cases']} cases, {inputs['n_malformed']} malformed line(s), "
        f"{summary['regressions']['count']} regression(s), {summary['flaky']['count']} flaky → {args.out / 'index.html'}"
    )
    return EXIT_OK


# ------------------------------------------------------------------------------------------- gate


@dataclass(frozen=True)
class Selector:
    text: str
    kind: str  # path | run | version | broker
    value: str = ""
    product: str = ""


def parse_selector(text: str) -> Selector:
    """``run:<id>``, ``version:<v>``, ``broker:<product>@<version>``, or a file/folder/glob."""
    kind, sep, value = text.partition(":")
    if sep and kind in SELECTOR_KINDS:
        if not value:
            raise ValueError(f"selector {text!r} names no {kind}")
        if kind == "broker":
            product, at, version = value.partition("@")
            if not at or not product or not version:
                raise ValueError(f"selector {text!r} is not broker:<product>@<version>")
            return Selector(text, kind, version, product)
        return Selector(text, kind, value)
    return Selector(text, "path", text)


def gate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="amqp-conformance gate",
        description=(
            "Compare a candidate's results with a baseline's; exit 1 on regressions "
            "(PASS → FAIL/TIMEOUT/ERROR; with --strict also new NON_STRICT), 0 when none, 2 on bad input."
        ),
    )
    p.add_argument("--baseline", required=True, metavar="SELECTOR",
                   help="results file/folder/glob, or run:<run_id> / version:<v> / broker:<product>@<version>")
    p.add_argument("--candidate", required=True, metavar="SELECTOR", help="as --baseline")
    p.add_argument("--results", nargs="+", default=[DEFAULT_RESULTS], metavar="RESULTS",
                   help=f"inputs that run:/version:/broker: selectors apply to (default {DEFAULT_RESULTS})")
    p.add_argument("--strict", action="store_true", help="also fail on new NON_STRICT verdicts")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    return p


def format_table(rows: Sequence[dict[str, object]], out: TextIO) -> None:
    cols = ("kind", "case_id", "baseline_verdict", "candidate_verdict", "baseline", "candidate")
    heads = ("KIND", "CASE", "BASELINE", "CANDIDATE", "BASELINE BROKER", "CANDIDATE BROKER")
    cells = [[str(r.get(c) if r.get(c) is not None else "(new)") for c in cols] for r in rows]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(heads)]
    print("  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip(), file=out)
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def gate_main(argv: list[str]) -> int:
    args = gate_parser().parse_args(argv)
    try:
        base_sel, cand_sel = parse_selector(args.baseline), parse_selector(args.candidate)
    except ValueError as exc:
        _err("gate", str(exc))
        return EXIT_BAD_INPUT
    from conformance.report.edges import InputProblem
    from conformance.report.session import EnvironmentProblem

    try:
        return _gate(args, base_sel, cand_sel)
    except (InputProblem, EnvironmentProblem) as exc:
        _err("gate", str(exc))
        return EXIT_BAD_INPUT


def _gate(args: argparse.Namespace, base_sel: Selector, cand_sel: Selector) -> int:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from conformance.report import edges, stages
    from conformance.report.session import spark_session

    # Resolve every path first, so a typo fails before a JVM starts.
    paths = {s.text: edges.resolve_inputs([s.value]) for s in (base_sel, cand_sel) if s.kind == "path"}
    shared = edges.resolve_inputs(args.results) if any(s.kind != "path" for s in (base_sel, cand_sel)) else []
    _progress("gate: starting Spark")
    with spark_session(args.master) as spark:
        loaded: list[edges.Loaded] = []

        def side(sel: Selector, cache: dict[str, edges.Loaded]) -> DataFrame:
            key = sel.text if sel.kind == "path" else "\0shared"
            if key not in cache:
                cache[key] = edges.load_results(spark, paths[sel.text] if sel.kind == "path" else shared)
                loaded.append(cache[key])
                if cache[key].n_malformed:
                    ex = cache[key].examples[0]
                    _progress(f"gate: {cache[key].n_malformed} malformed line(s) skipped, first {ex['file']}:{ex['line']}: {ex['reason']}")
            df = cache[key].results
            if sel.kind == "run":
                df = df.where(F.col("run_id") == sel.value)
            elif sel.kind == "version":
                df = df.where(F.col("broker_version") == sel.value)
            elif sel.kind == "broker":
                df = df.where((F.col("broker_product") == sel.product) & (F.col("broker_version") == sel.value))
            return df

        try:
            cache: dict[str, edges.Loaded] = {}
            base, cand = side(base_sel, cache), side(cand_sel, cache)
            counts = {}
            for label, sel, df in (("baseline", base_sel, base), ("candidate", cand_sel, cand)):
                n = df.select("case_id").distinct().count()
                if n == 0:
                    where = " ".join(args.results) if sel.kind != "path" else sel.text
                    raise edges.InputProblem(f"{label} selector {sel.text} matched no result records in {where}")
                counts[label] = n
            regressions = stages.gate_regressions(base, cand).orderBy("kind", "case_id")
            rows = [r.asDict() for r in regressions.limit(10_000).collect()]
        finally:
            for ld in loaded:
                ld.close()
    hard = [r for r in rows if r["kind"] in ("regression", "new-failure")]
    soft = [r for r in rows if r["kind"] == "new-non-strict"]
    if rows:
        format_table(rows, sys.stdout)
    failing = len(hard) + (len(soft) if args.strict else 0)
    verdict = "FAIL" if failing else "PASS"
    print(
        f"gate {verdict}: {sum(r['kind'] == 'regression' for r in hard)} regression(s), "
        f"{sum(r['kind'] == 'new-failure' for r in hard)} untriaged new failure(s), {len(soft)} new NON_STRICT"
        f"{' (fail with --strict)' if soft and not args.strict else ''}; "
        f"baseline {base_sel.text} ({counts['baseline']} cases) → candidate {cand_sel.text} ({counts['candidate']} cases)"
    )
    return EXIT_REGRESSIONS if failing else EXIT_OK


# ------------------------------------------------------------------------------------------ bench


def bench_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="amqp-conformance bench",
        description="Benchmarks. 'report': generate synthetic results, then build the full report and time it.",
    )
    p.add_argument("what", choices=["report"], help="what to benchmark")
    p.add_argument("--rows", type=int, default=1_000_000, help="synthetic result rows (default 1,000,000)")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--work", type=Path, default=None, help="folder for the data and the report (default: a temp folder, removed)")
    p.add_argument("--seed", type=int, default=7, help="generator seed")
    p.add_argument("--store", action="store_true",
                   help="ingest the generated results into a results store and report from the store")
    return p


def bench_main(argv: list[str]) -> int:
    args = bench_parser().parse_args(argv)
    if args.rows < 1:
        _err("bench", "--rows must be at least 1")
        return EXIT_BAD_INPUT
    from conformance.report.bench import run_bench
    from conformance.report.session import EnvironmentProblem

    try:
        figures = run_bench(args.rows, master=args.master, work=args.work, seed=args.seed, progress=_progress,
                            store=args.store)
    except EnvironmentProblem as exc:
        _err("bench", str(exc))
        return EXIT_BAD_INPUT
    print(f"bench report: {figures['rows']:,} rows ({figures['input_mb']:.0f} MB JSONL, {figures['files']} files) on {figures['master']}")
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
