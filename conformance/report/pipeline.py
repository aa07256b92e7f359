"""The report: inputs → stages → Parquet tables, ``summary.json`` and ``index.html``.

Only bounded, aggregated data reaches the driver: per-file counts, top-N rows for the page and
the summary, and the small aggregate tables (scores, tx table, profile inference).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from conformance.report import arrow_ingest, edges, page, sparkstats, store
from conformance.report.gather import gather, write_parquet
from conformance.report.inputs import SMALL_INPUT_BYTES
from conformance.report.schema import VERDICTS
from conformance.report.session import EarlySession
from conformance.report.tables import TABLES, Collect, Frames, count_of, empty_view

Progress = Callable[[str], None]

def _noop(_: str) -> None:
    pass


@dataclass
class Timer:
    progress: Progress
    timings: dict[str, float] = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)
    # Spark's own numbers per stage (jobs, stages, tasks, shuffle bytes), once ``spark`` is set.
    spark: SparkSession | None = None
    spark_stats: dict[str, dict[str, int]] = field(default_factory=dict)

    def stage(self, name: str, fn: Callable[[], int | None], what: str = "rows") -> int | None:
        before = sparkstats.snapshot(self.spark) if self.spark is not None else None
        start = time.perf_counter()
        self.progress(f"report: {name} …")
        n = fn()
        secs = time.perf_counter() - start
        self.timings[name] = round(secs, 3)
        count = f"{n:,} {what}, " if n is not None else ""
        self.progress(f"report: {name}: {count}{secs:.1f}s")
        if before is not None and self.spark is not None:
            spent = sparkstats.snapshot(self.spark).since(before)
            self.spark_stats[name] = spent.as_dict()
            self.progress(f"report: {name}: {spent.line()}")
        return n


def rows(df: DataFrame, limit: int) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.limit(limit).collect()]


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def run_report(
    spark: SparkSession | EarlySession,
    inputs: list[str],
    out_dir: Path,
    *,
    name: str | None = None,
    progress: Progress | None = None,
    small: bool | None = None,
    release: Callable[[], None] | None = None,
    stats: bool = False,
) -> dict[str, Any]:
    """Build the whole report with ``spark``; return the summary (also written as summary.json).

    A small input (one run: :func:`small_input`, whatever the master) is a handful of Spark jobs: its records
    parsed in the driver (or by Spark when a line needs Spark's judgement) and handed over as an
    Arrow table, then every table of :data:`~conformance.report.tables.TABLES` and every bounded
    view of the page computed in ONE action (:func:`conformance.report.gather.gather`), and the
    small tables' Parquet files written from the driver. Anything else: parsed once and cached,
    every table derived from the cached frames and written by the executors (side by side), then
    the page's views and every table's row count gathered in one action. ``small``: which of
    the two (None: :func:`small_input` decides; the tests compare them).

    ``spark`` may be a session still starting (:class:`EarlySession`): a small input's records
    are parsed in Python while its JVM starts, and the report waits for it only then.
    ``release``: called once Spark's part is done (the summary and the page are Python), e.g. to
    stop the session meanwhile.
    """
    say = progress or _noop
    timer = Timer(say)
    plain, stores = store.split_inputs(inputs)
    files = edges.resolve_inputs(plain) if plain or not stores else []
    say(f"report: {len(files)} input file(s)" + (f", {len(stores)} store(s)" if stores else ""))
    out_dir.mkdir(parents=True, exist_ok=True)
    name = name or out_dir.name
    early = spark if isinstance(spark, EarlySession) else None
    if small is None:
        small = small_input(files, stores)
    holder: dict[str, Any] = {}

    def parse() -> int | None:
        # Plain Python, beside the JVM's start when it is still starting (the page's catalogue
        # and templates too, then).
        holder["per_file"] = per_file = arrow_ingest.plan_by_file(files, say, who="report") if small else None
        if early is not None:
            page.prepare()
        return sum(len(rows) for rows in per_file) if per_file is not None else None

    def wait() -> None:
        holder["spark"] = _session(spark)

    def load() -> int:
        per_file, session = holder["per_file"], holder["spark"]
        if per_file is not None and any(per_file):
            holder["loaded"] = edges.load_rows(session, files, per_file)
        else:
            # A small input's lines read by the driver even when Spark parses them.
            holder["loaded"] = store.load_inputs(session, files, stores, in_driver=small)
        return int(holder["loaded"].n_valid)

    timer.stage("parse", parse)
    if early is not None:
        timer.stage("spark start (not hidden)", wait, "")
    else:
        wait()
    session: SparkSession = holder["spark"]
    timer.spark = session if stats else None
    # Tuned before the first job: reading and parsing are small-input jobs too.
    restore = tune(session, SMALL_INPUT_CONF) if small else {}
    try:
        timer.stage("read", load)
        loaded = holder["loaded"]
        if loaded.n_malformed:
            say(f"report: {loaded.n_malformed:,} malformed line(s), first: "
                + "; ".join(f"{e['file']}:{e['line']}: {e['reason']}" for e in loaded.examples[:3]))
        frames = Frames(session, loaded, small=small)
        try:
            build = _build_small if small else _build_large
            tables, view = build(frames, out_dir, timer)
        finally:
            frames.unpersist()
            loaded.close()
    finally:
        _restore(session, restore)
    rules = frames.rules
    if release is not None:
        release()
    summary = make_summary(
        name, files + [str(s) for s in stores], loaded, tables, view, len(rules), len({r.id for r in rules})
    )
    summary["timings_s"] = dict(timer.timings)
    summary.update({"spark_stats": dict(timer.spark_stats)} if stats else {})
    timer.spark = None  # the page is Python (and the session may be stopping)

    def render() -> int:
        text = page.render_report(summary, view)
        (out_dir / "index.html").write_text(text, encoding="utf-8")
        return len(text.encode("utf-8"))

    timer.stage("html", render, "bytes")
    summary["timings_s"] = dict(timer.timings)
    summary["total_s"] = round(time.perf_counter() - timer.t0, 3)
    (out_dir / "summary.json").write_text(
        json.dumps(_jsonable(summary), indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    say(
        f"report: wrote {out_dir}/index.html, summary.json and {len(tables)} tables in "
        f"{summary['total_s']:.1f}s"
    )
    return _jsonable(summary)


TABLE_PREFIX = "#table:"


def _build_small(frames: Frames, out_dir: Path, timer: Timer) -> tuple[dict[str, int], dict[str, Any]]:
    """Every table and view in one action; the tables written from the driver with pyarrow."""
    built: dict[str, DataFrame] = {}
    found: dict[str, Any] = {}

    def compute() -> int:
        # Planning is the JVM's work on the thread each call comes from: in lanes, the two
        # cores plan side by side (tables, then views, then two gathers of half the frames each).
        with ThreadPoolExecutor(max_workers=SMALL_LANES) as pool:
            names = [t.name for t in TABLES]
            built.update(zip(names, pool.map(frames.__getitem__, names), strict=True))
            collects: dict[str, Collect] = {}
            shown = [t for t in TABLES if t.view is not None]
            for part in pool.map(lambda t: t.view(built[t.name], frames),
                                 [t for t in shown if not frames.known_empty(t.name)]):
                collects.update(part)
            # A known-empty table's view is a constant: recorded, and checked against the real view.
            for t in shown:
                if frames.known_empty(t.name):
                    found.update(empty_view(t.name))
            collects.update({f"{TABLE_PREFIX}{n}": Collect(df, None, aware=True) for n, df in built.items()})
            keys = list(collects)
            halves = [{k: collects[k] for k in keys[i::SMALL_LANES]} for i in range(SMALL_LANES)]
            for part in pool.map(lambda h: gather(h, one_task=True), halves):
                found.update(part)
        return len(built)

    def write() -> int:
        for n, df in built.items():
            write_parquet(df.schema, found[f"{TABLE_PREFIX}{n}"], out_dir / "tables" / n)
        return sum(len(found[f"{TABLE_PREFIX}{n}"]) for n in built)

    timer.stage("tables", compute, "tables")
    timer.stage("write", write, "rows")
    tables = {n: len(found.pop(f"{TABLE_PREFIX}{n}")) for n in built}
    return tables, found


def _build_large(frames: Frames, out_dir: Path, timer: Timer) -> tuple[dict[str, int], dict[str, Any]]:
    """Every table cached and written by the executors; the views and counts in one action."""
    built: dict[str, DataFrame] = {}
    tables: dict[str, int] = {}
    view: dict[str, Any] = {}

    def write_all() -> int:
        built.update({t.name: frames[t.name] for t in TABLES})  # cached (planned) here
        # Each write is its own Spark job; side by side they overlap each job's fixed costs.
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            list(pool.map(lambda n: edges.write_only(built[n], out_dir, n), built))
        return len(built)

    def collect() -> int:
        found = collect_all(page_collects(frames, built))
        tables.update({n: int(found.pop(f"{COUNT_PREFIX}{n}")) for n in built})
        view.update(found)
        return sum(len(v) for v in view.values() if isinstance(v, list))

    timer.stage("tables", write_all, "tables")
    timer.stage("collect", collect, "rows for the page")
    return tables, view


WRITERS = 4
# Threads that plan a small input's tables and views, and gather them (one action each): one per
# core, 2 to 4 (planning is CPU work on the JVM thread serving each; more lanes than cores only
# contend).
SMALL_LANES = min(4, max(2, os.cpu_count() or 2))
# For a small input (one run, a few hundred rows) the fixed costs of each stage dominate: one
# shuffle partition, and no whole-stage code generation (compiling each plan costs more than
# running it interpreted). Large inputs keep the session's settings.
SMALL_INPUT_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    # Expressions interpreted too: generating and compiling a class per projection costs far
    # more than evaluating it on a few hundred rows.
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    # Adaptive plans re-plan after every shuffle stage (more jobs, more planning): on one
    # partition there is nothing to coalesce or skew-split.
    "spark.sql.adaptive.enabled": "false",
    # Every frame is one partition (Frames.small): a join of two needs no exchange, while a
    # broadcast (a hint in the views, or chosen by size) is a job of its own.
    "spark.sql.optimizer.disableHints": "true",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    # A sort with a limit as a plain sort and limit, not a TakeOrderedAndProject: that compiles its
    # ordering to Java (planning it, and again in the task) whatever factoryMode says, while a sort
    # of one partition is interpreted and needs no exchange (the same stages: measured 13 → 7
    # compiles per one-run report, the same tables).
    "spark.sql.execution.topKSortFallbackThreshold": "0",
}


def _session(spark: SparkSession | EarlySession) -> SparkSession:
    return spark.get() if isinstance(spark, EarlySession) else spark


def small_input(files: list[str], stores: list[Path]) -> bool:
    """True for local files of at most SMALL_INPUT_BYTES (one run's results, a few of them):
    fixed costs dominate, and every table fits in the driver, whatever the master. The driver
    reads the files and writes the tables into ``--out``, a folder of its own: on a cluster the
    executors then need neither the inputs nor the output folder, only the rows each task gets."""
    if stores or not files:
        return False
    try:
        size = sum(Path(f).stat().st_size for f in files)
    except OSError:  # not a local path (hdfs://, s3a://)
        return False
    return size <= SMALL_INPUT_BYTES


def tune(spark: SparkSession, conf: Mapping[str, str]) -> dict[str, str]:
    """Apply ``conf`` to the session; return what to restore."""
    restore = {k: str(spark.conf.get(k)) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    return restore


def _restore(spark: SparkSession, restore: dict[str, str]) -> None:
    for key, value in restore.items():
        spark.conf.set(key, value)


COUNT_PREFIX = "#rows:"


def page_collects(frames: Frames, built: dict[str, DataFrame], *, counts: bool = True) -> dict[str, Collect]:
    """The page's bounded views (and every table's row count, ``counts``), keyed as the page
    reads them."""
    out: dict[str, Collect] = {}
    if counts:
        out.update({f"{COUNT_PREFIX}{n}": count_of(df) for n, df in built.items()})
    for t in TABLES:
        if t.view is not None:
            out.update(t.view(built[t.name], frames))
    return out


def collect_all(collects: Mapping[str, Collect]) -> dict[str, Any]:
    """Gather every bounded frame in one action: one task in local mode (each task would
    deserialise the plan of every frame; one core or two gain nothing from fifty tasks), one
    per frame on a cluster."""
    if not collects:
        return {}
    master = next(iter(collects.values())).frame.sparkSession.sparkContext.master or ""
    return gather(collects, one_task=master.startswith("local"))


def make_summary(
    name: str,
    files: list[str],
    loaded: edges.Loaded,
    tables: dict[str, int],
    view: dict[str, Any],
    n_rule_elements: int,
    n_rule_ids: int,
) -> dict[str, Any]:
    best = {p["broker"]: p for p in view["profile"] if p["best"]}
    brokers = []
    for b in view["brokers"]:
        p = best.get(b["broker"])
        brokers.append(
            {
                **{
                    k: b[k]
                    for k in (
                        "broker",
                        "broker_product",
                        "broker_version",
                        "n_runs",
                        "n_executions",
                        "n_cases",
                        "n_scored",
                        "score",
                        "n_must_failures",
                        "clients",
                        "last_ts",
                    )
                },
                "verdicts": {v: b[f"n_{v.lower()}"] for v in VERDICTS},
                "tx_profile": None
                if p is None
                else {
                    "column": p["column"],
                    "profile": p["profile"],
                    "score": p["score"],
                    "n_compared": p["n_compared"],
                    "disagreements": p["disagreements"],
                },
            }
        )
    rules = view["rules"]
    in_spec = [r for r in rules if r["in_spec"]]
    return {
        "name": name,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "inputs": {
            "n_files": len(files),
            "files": [
                {"file": f["file"], "n_valid": f["n_valid"], "n_malformed": f["n_malformed"]}
                for f in loaded.files[:100]
            ],
            "n_rows": loaded.n_valid,
            "n_malformed": loaded.n_malformed,
        },
        "malformed": [{"file": e["file"], "line": e["line"], "reason": e["reason"]} for e in loaded.examples],
        "n_brokers": view["n_brokers"],
        "n_cases": view["n_matrix_cases"],
        "brokers": brokers,
        "flaky": {
            "count": view["n_flaky"],
            "top": [
                {k: f[k] for k in ("broker", "broker_platform", "case_id", "n_runs", "verdict_summary")}
                for f in view["flaky"][:20]
            ],
        },
        "regressions": {
            "count": sum(view["regression_kinds"].values()),
            "by_kind": view["regression_kinds"],
            "top": [
                {
                    k: r[k]
                    for k in (
                        "baseline",
                        "candidate",
                        "case_id",
                        "kind",
                        "baseline_verdict",
                        "candidate_verdict",
                    )
                }
                for r in view["regressions"][:50]
            ],
        },
        "rule_coverage": {
            "rule_elements": n_rule_elements,
            "rule_ids": n_rule_ids,
            "covered": sum(1 for r in in_spec if r["n_brokers"] > 0),
            "uncovered": sum(1 for r in in_spec if r["n_brokers"] == 0),
            "cited_not_in_spec": sorted(r["rule_id"] for r in rules if not r["in_spec"]),
        },
        "tables": {k: {"path": f"tables/{k}", "rows": v} for k, v in tables.items()},
        "mutation": mutation_summary(view),
    }


def mutation_summary(view: dict[str, Any]) -> dict[str, Any]:
    """Per target of the mutation runs: mutants, outcomes, the score, per area too."""
    out = []
    for b in view["mutation_brokers"]:
        cats = {
            s["category"]: {
                k: s[k]
                for k in ("n_mutants", "n_killed", "n_survived", "n_no_result", "n_equivalent", "score")
            }
            for s in view["mutation_scores"]
            if s["broker"] == b
        }
        total = {k: sum(int(c[k]) for c in cats.values())
                 for k in ("n_mutants", "n_killed", "n_survived", "n_no_result", "n_equivalent")}
        counted = total["n_mutants"] - total["n_equivalent"]
        survivors = sorted(
            m["mutant"]
            for m in view["mutants"]
            if m["broker"] == b and m["outcome"] in ("SURVIVED", "NO-RESULT")
        )
        out.append({"broker": b, **total, "score": round(total["n_killed"] / counted, 4) if counted else None,
                    "areas": cats, "not_killed": survivors})
    return {"n_mutant_case_results": view["n_mutation_cases"], "brokers": out}
