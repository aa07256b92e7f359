"""``amqp-conformance bench report``: generate synthetic results, build the full report, time it."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conformance.report import synth
from conformance.report.session import spark_session


def run_bench(
    rows: int,
    *,
    master: str | None = None,
    work: Path | None = None,
    seed: int = 7,
    progress: Callable[[str], None] | None = None,
    store: bool = False,
) -> dict[str, Any]:
    """Return the figures: startup, generation, per-stage and total report seconds, rows/s.

    With ``store``, the generated files are first ingested into a results store (timed as
    ``ingest_s``) and the report reads the store instead of the files.
    """
    from conformance.report.pipeline import run_report

    say = progress or (lambda _: None)
    own_work = work is None
    base = Path(tempfile.mkdtemp(prefix="amqp-conformance-bench-")) if work is None else work
    data, out = base / "results", base / "report"
    t0 = time.perf_counter()
    try:
        with spark_session(master) as spark:
            startup = time.perf_counter() - t0
            master_url = spark.sparkContext.master
            say(f"bench: Spark up in {startup:.1f}s ({master_url}); generating {rows:,} rows → {data}")
            t1 = time.perf_counter()
            cores = spark.sparkContext.defaultParallelism
            synth.write_jsonl(synth.generate(spark, rows, seed=seed), data, files=max(1, cores))
            generate_s = time.perf_counter() - t1
            files = sorted(data.glob("*.jsonl"))
            size_mb = sum(f.stat().st_size for f in files) / 1e6
            say(f"bench: generated {size_mb:.0f} MB in {len(files)} files in {generate_s:.1f}s")
            ingest_s = None
            source = data
            if store:
                from conformance.report.store import ingest

                t_ing = time.perf_counter()
                source = base / "store"
                ingest(spark, [str(data)], source, progress=say)
                ingest_s = time.perf_counter() - t_ing
                say(f"bench: ingested into {source} in {ingest_s:.1f}s")
            say(f"bench: building the report from {source}")
            t2 = time.perf_counter()
            summary = run_report(spark, [str(source)], out, name=f"bench-{rows}", progress=say)
            report_s = time.perf_counter() - t2
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
        "startup_s": startup,
        "generate_s": generate_s,
        "ingest_s": ingest_s,
        "stages": summary["timings_s"],
        "report_s": report_s,
        "rows_per_s": n / report_s if report_s > 0 else 0.0,
        "total_s": time.perf_counter() - t0,
        "summary": summary,
    }
