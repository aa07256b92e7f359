"""The compliance tables: the latest verdict per broker version and case (``latest``), the matrix
(``matrix``, ``queue_types``), the scores (``scores_area``, ``scores_level``, ``scores_run``) and the
broker summary (``brokers``).

``results`` are valid result rows of the normal runs (:mod:`conformance.report.parsing`); ``latest``
is :func:`latest_verdicts` of them (:data:`~conformance.report.schema.LATEST_SCHEMA`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from conformance.report.schema import BROKER_KEYS, SCORED_VERDICTS, VERDICTS


def verdict_counts(col: str = "verdict") -> list[Column]:
    """One count column per verdict, ``n_<verdict>`` (lower case), of column ``col``."""
    return [F.count(F.when(F.col(col) == v, 1)).alias(f"n_{v.lower()}") for v in VERDICTS]


# Mergeable aggregates (conformance.report.aggregates): ``*_partial`` of raw rows (bounded: per broker
# version × case, case × build), kept in the store per ingest; ``*_merge`` folds partials of disjoint
# runs; ``*_final`` gives the table. Files: final(partial); store: final(merge(partials)).

_LATEST_PAYLOAD: tuple[str, ...] = (
    "area", "level", "rules", "profile", "verdict", "expected", "observed", "message", "tx_row",
    "tx_observed", "duration_s", "trace")


def latest_partial(results: DataFrame) -> DataFrame:
    """Per broker version and case: the latest execution (``last``, a struct ordered by time, then
    run id) and the number of executions."""
    return results.groupBy(*BROKER_KEYS, "case_id").agg(
        latest_last(), F.count(F.lit(1)).alias("n_executions"))


def latest_last() -> Column:
    """The latest execution of a group (``last``: mergeable by max, :func:`latest_merge`)."""
    return F.max(F.struct("ts", "run_id", *_LATEST_PAYLOAD)).alias("last")


def latest_merge(partials: DataFrame) -> DataFrame:
    """The latest of the latests; executions add."""
    return partials.groupBy(*BROKER_KEYS, "case_id").agg(
        F.max("last").alias("last"), F.sum("n_executions").alias("n_executions"))


def latest_final(partial: DataFrame) -> DataFrame:
    """:data:`~conformance.report.schema.LATEST_SCHEMA` from :func:`latest_partial`."""
    fields = [*_LATEST_PAYLOAD[:8], "run_id", "ts", *_LATEST_PAYLOAD[8:]]
    return partial.select(*BROKER_KEYS, "case_id", *[F.col(f"last.{c}").alias(c) for c in fields],
                          "n_executions")


def latest_verdicts(results: DataFrame) -> DataFrame:
    """The latest execution of each case on each broker version (ties: the greater run id)."""
    return latest_final(latest_partial(results))


# Queue types side by side: ids ``x`` (classic) and ``x[quorum]`` (conformance.verify.queue_types). The type
# is read from the id, so records older than the ``queue_type`` field are classic rows as they were.
QUEUE_TYPE_COLUMNS: tuple[str, ...] = ("classic", "quorum")
_SUFFIX = r"^(.*)\[([a-z]+)\]$"


def queue_type_matrix(latest: DataFrame) -> DataFrame:
    """Per broker version and case, the latest verdict (and observed) on each queue type, for the
    cases that ran on more than the classic type; ``differs`` when the verdicts are not all equal."""
    typed = latest.select(
        *BROKER_KEYS,
        F.when(F.col("case_id").rlike(_SUFFIX), F.regexp_extract("case_id", _SUFFIX, 1))
        .otherwise(F.col("case_id")).alias("base_id"),
        F.when(F.col("case_id").rlike(_SUFFIX), F.regexp_extract("case_id", _SUFFIX, 2))
        .otherwise(F.lit("classic")).alias("queue_type"),
        "area", "verdict", "observed",
    )
    other = typed.where(F.col("queue_type") != "classic").select(*BROKER_KEYS, "base_id").distinct()
    cols = []
    for qt in QUEUE_TYPE_COLUMNS:
        cols.append(F.max(F.when(F.col("queue_type") == qt, F.col("verdict"))).alias(f"verdict_{qt}"))
        cols.append(F.max(F.when(F.col("queue_type") == qt, F.col("observed"))).alias(f"observed_{qt}"))
    grouped = typed.join(other, [*BROKER_KEYS, "base_id"]).groupBy(*BROKER_KEYS, "base_id").agg(
        F.first("area").alias("area"), F.array_sort(F.collect_set("verdict")).alias("_vs"), *cols)
    return grouped.select(*BROKER_KEYS, "base_id", "area", *[c for qt in QUEUE_TYPE_COLUMNS
                                                            for c in (f"verdict_{qt}", f"observed_{qt}")],
                          (F.size("_vs") > 1).alias("differs"))


def compliance_matrix(latest: DataFrame) -> DataFrame:
    """Case × broker version: the latest verdict with expected vs observed (long form), and what
    the page's drill-down shows of it (rules, duration, frame trace)."""
    return latest.select(
        "case_id",
        "area",
        "level",
        *BROKER_KEYS,
        "verdict",
        "expected",
        "observed",
        "message",
        "profile",
        "run_id",
        "ts",
        "rules",
        "duration_s",
        "trace",
    )


def run_scores(results: DataFrame) -> DataFrame:
    """Per broker version and run: when it ran, its verdict counts and its score (the trend).

    A run's score uses its own executions (latest per case within the run), so a run that
    re-ran a case counts it once.
    """
    per_case = results.groupBy(*BROKER_KEYS, "run_id", "case_id").agg(
        F.max(F.struct("ts", "verdict")).alias("_last"))
    scored = F.count(F.when(F.col("_last.verdict").isin(*SCORED_VERDICTS), 1))
    passed = F.count(F.when(F.col("_last.verdict") == "PASS", 1))
    return per_case.groupBy(*BROKER_KEYS, "run_id").agg(
        F.min("_last.ts").alias("ts"),
        F.count(F.lit(1)).alias("n_cases"),
        passed.alias("n_pass"),
        scored.alias("n_scored"),
        F.when(scored > 0, F.round(passed / scored, 4)).alias("score"),
    )


def scores(latest: DataFrame, by: str) -> DataFrame:
    """Per broker version and ``by`` (``area`` or ``level``): verdict counts and the score.

    score = PASS / (PASS + FAIL + NON_STRICT + TIMEOUT); UNSUPPORTED and INFORMATIONAL state no
    requirement and ERROR is the harness's fault, so none of them counts either way.
    """
    scored = F.count(F.when(F.col("verdict").isin(*SCORED_VERDICTS), 1))
    passed = F.count(F.when(F.col("verdict") == "PASS", 1))
    return latest.groupBy(*BROKER_KEYS, by).agg(
        F.count(F.lit(1)).alias("n_cases"),
        *verdict_counts(),
        scored.alias("n_scored"),
        F.when(scored > 0, F.round(passed / scored, 4)).alias("score"),
    )


def broker_runs_partial(results: DataFrame) -> DataFrame:
    """Per broker version: runs, executions, the last execution, the clients (a sorted array)."""
    return results.groupBy(*BROKER_KEYS).agg(
        F.count_distinct("run_id").alias("n_runs"), F.count(F.lit(1)).alias("n_executions"),
        F.max("ts").alias("last_ts"), F.array_sort(F.collect_set("client")).alias("clients"))


def broker_runs_merge(partials: DataFrame) -> DataFrame:
    """Runs and executions add (the partials hold disjoint runs), clients unite."""
    return partials.groupBy(*BROKER_KEYS).agg(
        F.sum("n_runs").alias("n_runs"), F.sum("n_executions").alias("n_executions"),
        F.max("last_ts").alias("last_ts"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("clients")))).alias("clients"))


def broker_summary(results: DataFrame, latest: DataFrame) -> DataFrame:
    return broker_summary_of(broker_runs_partial(results), latest)


def broker_summary_of(runs: DataFrame, latest: DataFrame) -> DataFrame:
    """One row per broker version: runs, last run, cases, verdict counts, score, MUST failures
    (``runs``: :func:`broker_runs_partial`)."""
    runs = runs.select(*BROKER_KEYS, "n_runs", "n_executions", "last_ts",
                       F.array_join("clients", ", ").alias("clients"))
    scored = F.count(F.when(F.col("verdict").isin(*SCORED_VERDICTS), 1))
    passed = F.count(F.when(F.col("verdict") == "PASS", 1))
    per_case = latest.groupBy(*BROKER_KEYS).agg(
        F.count(F.lit(1)).alias("n_cases"),
        *verdict_counts(),
        F.count(F.when((F.col("level") == "MUST") & F.col("verdict").isin("FAIL", "TIMEOUT"), 1)).alias(
            "n_must_failures"
        ),
        scored.alias("n_scored"),
        F.when(scored > 0, F.round(passed / scored, 4)).alias("score"),
    )
    return runs.join(per_case, list(BROKER_KEYS), "inner")
