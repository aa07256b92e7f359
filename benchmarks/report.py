"""``amqp-conformance bench report``: generate synthetic results, build the full report, time it."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conformance.argparsing import command_parser
from conformance.extras import missing_extra

EXIT_OK = 0
EXIT_BAD_INPUT = 2
GENERATED = "generated.json"  # in --work: the rows and seed of the results generated there


def _err(message: str) -> None:
    print(f"amqp-conformance bench report: {message}", file=sys.stderr, flush=True)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_bench(
    rows: int,
    *,
    master: str | None = None,
    work: Path | None = None,
    seed: int = 7,
    progress: Callable[[str], None] | None = None,
    store: bool = False,
    reuse: bool = False,
    local_cluster: int = 0,
    synthetic_store: bool = False,
) -> dict[str, Any]:
    """Return the figures: startup, generation, per-stage and total report seconds, rows/s.

    With ``store``, the generated files are first ingested into a results store (timed as
    ``ingest_s``) and the report reads the store instead of the files. With ``reuse``, results
    generated earlier in ``work`` with the same rows and seed are used as they are (generate_s 0).
    With ``synthetic_store``, the rows are generated straight into a results store
    (:func:`benchmarks.synth.generate_rows`, :func:`conformance.report.store.ingest_rows`: the
    rows an ingest of the lines would store, without the JSONL; timed as ``generate_s``) and the
    report reads the store: a store of 100M rows without 60 GB of JSONL. The ingest of lines is
    measured by ``store``.
    ``local_cluster``: a Spark standalone cluster of that many 2-core workers is started on
    127.0.0.1 (:mod:`conformance.report.standalone`) and used as the master (stopped at the end).
    Spark's own numbers (jobs, stages, tasks, shuffle bytes) come with each phase (``spark``).
    """
    say = progress or (lambda _: None)
    own_work = work is None
    base = Path(tempfile.mkdtemp(prefix="amqp-conformance-bench-")) if work is None else work
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if local_cluster:
            from conformance.report.standalone import StandaloneCluster

            cluster = stack.enter_context(StandaloneCluster(workers=local_cluster))
            master = cluster.master_url
            say(f"bench: local standalone cluster {master}: {local_cluster} worker(s) of 2 cores "
                f"(up in {time.perf_counter() - t0:.1f}s)")
            t0 = time.perf_counter()
        return _run(rows, master, base, own_work, seed, say, store, reuse, t0, synthetic_store)


def driver_peak_rss_mb(spark: Any) -> float | None:
    """The driver JVM's peak resident memory (VmHWM of the JVM PySpark launched), in MB; None
    when it is not a local process this can read (spark-submit's, or no /proc)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text() if proc is not None else ""
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def _run(rows: int, master: str | None, base: Path, own_work: bool, seed: int, say: Callable[[str], None],
         store: bool, reuse: bool, t0: float, synthetic_store: bool = False) -> dict[str, Any]:
    from benchmarks import synth  # pyspark: imported once the [report] extra is known to be there
    from conformance.report import sparkstats
    from conformance.report.pipeline import run_report
    from conformance.report.session import spark_session

    data, out = base / "results", base / "report"
    spark_stats: dict[str, dict[str, int]] = {}
    try:
        with spark_session(master) as spark:
            startup = time.perf_counter() - t0
            master_url = spark.sparkContext.master
            say(f"bench: Spark up in {startup:.1f}s ({master_url}); generating {rows:,} rows → {data}")
            t1 = time.perf_counter()
            marker, made = base / GENERATED, {"rows": rows, "seed": seed}
            if synthetic_store:
                from conformance.report.store import ingest_rows

                source = base / "store"
                shutil.rmtree(source, ignore_errors=True)
                before = sparkstats.snapshot(spark)
                ingest_rows(spark, synth.generate_rows(spark, rows, seed=seed), source,
                            f"synthetic:rows={rows}:seed={seed}", progress=say)
                spark_stats["generate"] = sparkstats.snapshot(spark).since(before).as_dict()
            elif reuse and marker.exists() and json.loads(marker.read_text()) == made:
                say(f"bench: reusing the results generated in {data}")
            else:
                cores = spark.sparkContext.defaultParallelism
                before = sparkstats.snapshot(spark)
                synth.write_jsonl(synth.generate(spark, rows, seed=seed), data, files=max(1, cores))
                marker.write_text(json.dumps(made))
                spark_stats["generate"] = sparkstats.snapshot(spark).since(before).as_dict()
            generate_s = time.perf_counter() - t1
            files = sorted(data.glob("*.jsonl"))
            size_mb = sum(f.stat().st_size for f in files) / 1e6
            ingest_s = None
            if synthetic_store:
                say(f"bench: generated {rows:,} rows into the store {source} in {generate_s:.1f}s")
            else:
                say(f"bench: generated {size_mb:.0f} MB in {len(files)} files in {generate_s:.1f}s")
                source = data
            if store:
                from conformance.report.store import ingest

                t_ing = time.perf_counter()
                source = base / "store"
                shutil.rmtree(source, ignore_errors=True)  # a fresh store: the ingest is timed whole
                before = sparkstats.snapshot(spark)
                ingest(spark, [str(data)], source, progress=say)
                ingest_s = time.perf_counter() - t_ing
                spark_stats["ingest"] = sparkstats.snapshot(spark).since(before).as_dict()
                say(f"bench: ingested into {source} in {ingest_s:.1f}s")
            say(f"bench: building the report from {source}")
            t2 = time.perf_counter()
            summary = run_report(spark, [str(source)], out, name=f"bench-{rows}", progress=say, stats=True)
            report_s = time.perf_counter() - t2
            spark_stats.update(summary.get("spark_stats", {}))
            peak_mb = driver_peak_rss_mb(spark)
            driver_memory = spark.sparkContext.getConf().get("spark.driver.memory", "1g")
    finally:
        if own_work:
            shutil.rmtree(base, ignore_errors=True)
    n = int(summary["inputs"]["n_rows"])
    return {
        "rows": n,
        "malformed": summary["inputs"]["n_malformed"],
        "files": len(files),
        "input_mb": size_mb,
        "master": master_url,
        "synthetic_store": synthetic_store,
        "driver_memory": driver_memory,
        "driver_peak_rss_mb": peak_mb,
        "startup_s": startup,
        "generate_s": generate_s,
        "ingest_s": ingest_s,
        "stages": summary["timings_s"],
        "report_s": report_s,
        "rows_per_s": n / report_s if report_s > 0 else 0.0,
        "generate_rows_per_s": n / generate_s if synthetic_store and generate_s > 0 else None,
        "total_s": time.perf_counter() - t0,
        "spark": spark_stats,
        "summary": summary,
    }




def bench_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "bench report",
        "Generate synthetic results, then build the full report and time it (this project's own "
        "report pipeline at scale).",
    )
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
    p.add_argument("--local-cluster", type=int, default=0, metavar="WORKERS",
                   help="start a Spark standalone cluster of WORKERS 2-core workers on 127.0.0.1 "
                   "(the wheel's spark-class) and run on it; stopped at the end")
    p.add_argument("--reuse", action="store_true",
                   help="with --work: reuse the results generated there before (same --rows and --seed)")
    p.add_argument("--synthetic-store", action="store_true",
                   help="generate the rows straight into a results store (no JSONL: the rows an ingest "
                   "of the lines would store) and report from it; for stores too big to write as JSONL")
    return p


def main(argv: list[str]) -> int:
    args = bench_parser().parse_args(argv)
    if args.rows < 1:
        _err("--rows must be at least 1")
        return EXIT_BAD_INPUT
    if args.synthetic_store and (args.store or args.reuse):
        _err("--synthetic-store makes the store from generated rows: it takes neither --store nor --reuse")
        return EXIT_BAD_INPUT
    problem = missing_extra("report", "bench report")
    if problem is not None:
        _err(problem)
        return EXIT_BAD_INPUT
    from conformance.report.session import EnvironmentProblem
    from conformance.report.standalone import ClusterProblem

    try:
        figures = run_bench(args.rows, master=args.master, work=args.work, seed=args.seed, progress=_progress,
                            store=args.store, reuse=args.reuse, local_cluster=args.local_cluster,
                            synthetic_store=args.synthetic_store)
    except (EnvironmentProblem, ClusterProblem) as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    if figures["synthetic_store"]:
        print(f"bench report: {figures['rows']:,} rows generated into a store on {figures['master']}")
    else:
        print(
            f"bench report: {figures['rows']:,} rows ({figures['input_mb']:.0f} MB JSONL, "
            f"{figures['files']} files) on {figures['master']}"
        )
    print(f"  spark startup        {figures['startup_s']:7.1f} s")
    if figures["synthetic_store"]:
        print(f"  generate into store  {figures['generate_s']:7.1f} s  → "
              f"{figures['generate_rows_per_s']:,.0f} rows/s")
    else:
        print(f"  generate             {figures['generate_s']:7.1f} s")
    if figures.get("ingest_s") is not None:
        print(f"  ingest into store    {figures['ingest_s']:7.1f} s")
    for stage, secs in figures["stages"].items():
        print(f"  {stage:<20} {secs:7.1f} s")
    print(f"  report total         {figures['report_s']:7.1f} s  → {figures['rows_per_s']:,.0f} rows/s")
    print(f"  overall              {figures['total_s']:7.1f} s")
    peak = figures["driver_peak_rss_mb"]
    print(f"  driver JVM           {figures['driver_memory']} heap, peak RSS "
          + (f"{peak:,.0f} MB" if peak is not None else "unknown"))
    print("Spark's own numbers, per phase:")
    for phase, c in figures["spark"].items():
        print(f"  {phase:<20} {c['jobs']:5} jobs {c['stages']:5} stages {c['tasks']:7} tasks  shuffle "
              f"{c['shuffle_write'] / 1e6:9.1f} MB written {c['shuffle_read'] / 1e6:9.1f} MB read  input "
              f"{c['input_bytes'] / 1e6:9.1f} MB  task time {c['task_ms'] / 1000:8.1f} s")
    return EXIT_OK
