"""The report: inputs → stages → Parquet tables, ``summary.json`` and ``index.html``.

Only bounded, aggregated data reaches the driver: per-file counts, top-N rows for the page and
the summary, and the small aggregate tables (scores, tx table, profile inference).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from conformance.report import edges, page, power, stages, store, tx_table
from conformance.report.schema import VERDICTS
from conformance.spec import load_rules

Progress = Callable[[str], None]

# Bounds on what the page and the summary show (the Parquet tables hold everything).
MAX_BROKERS = 200  # broker versions in the summary table / summary.json
MAX_MATRIX_BROKERS = 30  # most recent broker versions shown as matrix columns
MAX_MATRIX_CASES = 400
MAX_CHART_BROKERS = 24
MAX_TX_BROKERS = 24
MAX_ROWS = 200  # flaky cases, regressions, malformed lines
MAX_TREND_RUNS = 300  # runs on the score trend
MAX_MUTATION_BROKERS = 6  # most recent targets of mutation runs on the suite-power section
MAX_MUTANTS = 500  # per target
MAX_KILLS_SHOWN = 12  # killing cases listed per mutant (the table holds all)
MAX_TRACE_CHARS = 20_000  # of one cell's frame trace on the page (the table keeps it whole)


def _noop(_: str) -> None:
    pass


@dataclass
class Timer:
    progress: Progress
    timings: dict[str, float] = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)

    def stage(self, name: str, fn: Callable[[], int | None], what: str = "rows") -> int | None:
        start = time.perf_counter()
        self.progress(f"report: {name} …")
        n = fn()
        secs = time.perf_counter() - start
        self.timings[name] = round(secs, 3)
        count = f"{n:,} {what}, " if n is not None else ""
        self.progress(f"report: {name}: {count}{secs:.1f}s")
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
    spark: SparkSession,
    inputs: list[str],
    out_dir: Path,
    *,
    name: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Build the whole report with ``spark``; return the summary (also written as summary.json)."""
    say = progress or _noop
    timer = Timer(say)
    plain, stores = store.split_inputs(inputs)
    files = edges.resolve_inputs(plain) if plain or not stores else []
    say(f"report: {len(files)} input file(s)" + (f", {len(stores)} store(s)" if stores else ""))
    out_dir.mkdir(parents=True, exist_ok=True)
    name = name or out_dir.name
    tables: dict[str, int] = {}

    holder: dict[str, edges.Loaded] = {}

    def load() -> int:
        holder["loaded"] = store.load_inputs(spark, files, stores)
        return holder["loaded"].n_valid

    timer.stage("read+parse", load)
    loaded = holder["loaded"]
    if loaded.n_malformed:
        say(f"report: {loaded.n_malformed:,} malformed line(s), first: "
            + "; ".join(f"{e['file']}:{e['line']}: {e['reason']}" for e in loaded.examples[:3]))
    try:
        # Mutation runs are another kind of run: compliance, flaky cases and regressions leave
        # them out; only the suite-power tables read them.
        results = stages.normal_runs(loaded.results)
        latest = stages.latest_verdicts(results).persist(StorageLevel.MEMORY_AND_DISK)

        def write(table: str, df: DataFrame) -> Callable[[], int]:
            def go() -> int:
                tables[table] = edges.write_table(df, out_dir, table)
                return tables[table]

            return go

        timer.stage("latest verdicts", write("latest", latest))
        history = stages.case_history(results)
        timer.stage("case history", write("history", history))
        timer.stage("compliance matrix", write("matrix", stages.compliance_matrix(latest)))
        timer.stage("queue types", write("queue_types", stages.queue_type_matrix(latest)))
        timer.stage("broker summary", write("brokers", stages.broker_summary(results, latest)))
        timer.stage("scores per area", write("scores_area", stages.scores(latest, "area")))
        timer.stage("scores per level", write("scores_level", stages.scores(latest, "level")))
        timer.stage("scores per run", write("scores_run", stages.run_scores(results)))
        seed = edges.tx_seed_frame(spark)
        tx_obs = stages.tx_observations(latest)
        timer.stage("tx table", write("tx_table", stages.tx_comparison(tx_obs, seed)))
        timer.stage("profile inference", write("profile_inference", stages.profile_inference(tx_obs, seed)))
        timer.stage(
            "flaky cases",
            write("flaky", stages.flaky_cases(spark.read.parquet(str(out_dir / "tables" / "history")))),
        )
        timer.stage("regressions", write("regressions", stages.release_regressions(latest)))
        rules = load_rules()
        coverage = stages.rule_coverage(edges.rules_frame(spark, rules), latest)
        timer.stage("rule coverage", write("rule_coverage", coverage))
        timer.stage("malformed lines", write("malformed", loaded.malformed))
        mutation = power.mutation_cases(power.mutation_runs(loaded.results), edges.mutants_frame(spark))
        timer.stage("mutation cases", write("mutation_cases", mutation))
        outcomes = power.mutant_outcomes(spark.read.parquet(str(out_dir / "tables" / "mutation_cases")))
        timer.stage("mutants", write("mutants", outcomes))
        scores_m = power.mutation_scores(spark.read.parquet(str(out_dir / "tables" / "mutants")))
        timer.stage("mutation scores", write("mutation_scores", scores_m))
        latest.unpersist()
    finally:
        loaded.close()

    view: dict[str, Any] = {}

    def collect() -> int:
        view.update(collect_view(spark, out_dir))
        return sum(len(v) for v in view.values() if isinstance(v, list))

    timer.stage("collect top-N", collect, "rows for the page")
    summary = make_summary(
        name, files + [str(s) for s in stores], loaded, tables, view, len(rules), len({r.id for r in rules})
    )
    summary["timings_s"] = dict(timer.timings)

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


def collect_view(spark: SparkSession, out_dir: Path) -> dict[str, Any]:
    """The bounded data the page shows, read back from the written tables."""

    def t(name: str) -> DataFrame:
        return spark.read.parquet(str(out_dir / "tables" / name))

    brokers_df = t("brokers").orderBy(F.col("last_ts").desc(), "broker")
    brokers = rows(brokers_df, MAX_BROKERS)
    recent = [b["broker"] for b in brokers]
    chart_brokers = recent[:MAX_CHART_BROKERS]
    matrix_brokers = recent[:MAX_MATRIX_BROKERS]
    # Cases with a non-PASS verdict somewhere come first, so a bounded matrix shows the news.
    matrix = t("matrix").where(F.col("broker").isin(matrix_brokers))
    case_rank = (
        matrix.groupBy("case_id")
        .agg(F.count(F.when(F.col("verdict") != "PASS", 1)).alias("bad"))
        .orderBy(F.col("bad").desc(), "case_id")
        .limit(MAX_MATRIX_CASES)
    )
    matrix_rows = rows(
        matrix.join(case_rank.select("case_id"), "case_id").select(
            "case_id", "area", "level", "broker", "verdict", "expected", "observed", "message", "rules",
            "duration_s", "run_id",
            # Traces of non-PASS cells only, cut: the page stays small enough to open.
            F.when(F.col("verdict") != "PASS", F.substring("trace", 1, MAX_TRACE_CHARS)).alias("trace"),
        ),
        MAX_MATRIX_CASES * MAX_MATRIX_BROKERS,
    )
    n_matrix_cases = t("matrix").select("case_id").distinct().count()
    profile = t("profile_inference").orderBy("broker", "rank")
    return {
        "brokers": brokers,
        "n_brokers": t("brokers").count(),
        "scores_area": rows(
            t("scores_area").where(F.col("broker").isin(chart_brokers)).orderBy("broker", "area"), 10_000
        ),
        "scores_level": rows(
            t("scores_level").where(F.col("broker").isin(chart_brokers)).orderBy("broker", "level"), 10_000
        ),
        "chart_brokers": chart_brokers,
        # The trend: the most recent runs of every broker version, oldest first on the page.
        "scores_run": rows(t("scores_run").orderBy(F.col("ts").desc()), MAX_TREND_RUNS),
        "matrix_brokers": matrix_brokers,
        "matrix": matrix_rows,
        "n_matrix_cases": n_matrix_cases,
        "tx": rows(
            t("tx_table").where(F.col("broker").isin(recent[:MAX_TX_BROKERS])).orderBy("broker", "row_order"),
            10_000,
        ),
        "profile": rows(profile.where(F.col("broker").isin(recent)), MAX_BROKERS * len(tx_table.COLUMNS)),
        "rules": rows(stages.rules_summary(t("rule_coverage")).orderBy("rule_id"), 1_000),
        "flaky": rows(t("flaky").orderBy(F.col("n_runs").desc(), "broker", "case_id"), MAX_ROWS),
        "n_flaky": t("flaky").count(),
        "regressions": rows(t("regressions").orderBy("kind", "candidate", "case_id"), MAX_ROWS),
        "regression_kinds": {
            r["kind"]: r["count"] for r in t("regressions").groupBy("kind").count().collect()
        },
        "malformed": rows(t("malformed").orderBy("file", "line"), MAX_ROWS),
        # classic vs quorum side by side: differences first
        "queue_types": rows(
            t("queue_types")
            .where(F.col("broker").isin(matrix_brokers))
            .orderBy(F.col("differs").desc(), "base_id", "broker"),
            MAX_ROWS,
        ),
        "n_malformed": t("malformed").count(),
        **mutation_view(t),
    }


def mutation_view(t: Callable[[str], DataFrame]) -> dict[str, Any]:
    """The suite-power section's data: each broker's latest outcome per mutant, scores per area."""
    mutants = t("mutants").where(F.col("latest"))
    brokers = [r["broker"] for r in mutants.groupBy("broker").agg(F.max("ts").alias("ts"))
               .orderBy(F.col("ts").desc(), "broker").limit(MAX_MUTATION_BROKERS).collect()]
    mine = mutants.where(F.col("broker").isin(brokers))
    return {
        "mutation_brokers": brokers,
        "mutants": rows(
            mine.select(
                "broker",
                "mutate_session",
                "mutant",
                "category",
                "should",
                "equivalent",
                "outcome",
                "n_cases",
                "n_kills",
                F.slice("kills", 1, MAX_KILLS_SHOWN).alias("kills"),
                "errors",
                "problem",
                "ts",
            ).orderBy("broker", "category", "mutant"),
            MAX_MUTANTS * MAX_MUTATION_BROKERS,
        ),
        "mutation_scores": rows(
            t("mutation_scores").where(F.col("broker").isin(brokers)).orderBy("broker", "category"), 10_000
        ),
        "n_mutation_cases": t("mutation_cases").count(),
    }


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
