"""The tables across runs and versions: each case's history per broker build (``history``), flaky
cases (``flaky``) and regressions between consecutive versions (``regressions``), plus the gate's
comparison of two sides in Spark (:func:`gate_regressions`, kept equal to ``conformance.gate.compare``).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from conformance.report.schema import BAD_AFTER_PASS, BROKER_KEYS, VERDICTS


def _verdict_is(verdict: str) -> Callable[[Column], Column]:
    # One-argument lambdas only: Spark passes the element index to a second parameter.
    return lambda x: x["verdict"] == verdict


HISTORY_KEYS: tuple[str, ...] = (*BROKER_KEYS, "broker_platform", "case_id", "area", "level")


RECENT = 10  # verdicts in a history's ``recent_verdicts``
_COUNTS: tuple[str, ...] = ("n_executions", "n_runs", *[f"n_{v.lower()}" for v in VERDICTS])


def _last_n(ordered: Column, n: int) -> Column:
    # slice() with a start before the first element gives an empty array, so clamp it.
    return F.slice(ordered, F.greatest(F.size(ordered) - n + 1, F.lit(1)), F.lit(n))


def history_partial(results: DataFrame) -> DataFrame:
    """Per case and broker build (product, version, platform): executions, runs, verdict counts,
    the sorted set of verdicts seen, first and last execution, and the :data:`RECENT` latest
    executions (``recent``: (ts, run_id, verdict), oldest first).

    One aggregation collecting (ts, run, verdict) per group, the rest derived from that list:
    measured 2x faster than count-distinct plus conditional counts at a million rows.
    """
    return history_of_groups(history_groups(results))


def history_groups(results: DataFrame, *more: Column) -> DataFrame:
    """The one aggregation of :func:`history_partial` (``_l``: the (ts, run, verdict) of each
    execution), with ``more`` aggregates over the same groups (:mod:`conformance.report.aggregates`
    computes the latest partial in the same pass: these groups are finer than the latest's)."""
    return results.groupBy(*HISTORY_KEYS).agg(
        F.collect_list(F.struct("ts", "run_id", "verdict")).alias("_l"), *more)


def history_of_groups(groups: DataFrame, *keep: str) -> DataFrame:
    """:func:`history_partial` from :func:`history_groups` (and the columns ``keep`` of it)."""
    ordered = F.array_sort("_l")
    return groups.select(
        *HISTORY_KEYS,
        *keep,
        F.size("_l").cast("long").alias("n_executions"),
        F.size(F.array_distinct(F.transform("_l", lambda x: x["run_id"]))).cast("long").alias("n_runs"),
        *[F.size(F.filter("_l", _verdict_is(v))).cast("long").alias(f"n_{v.lower()}") for v in VERDICTS],
        F.array_sort(F.array_distinct(F.transform("_l", lambda x: x["verdict"]))).alias("verdicts"),
        F.element_at(ordered, 1)["ts"].alias("first_ts"),
        F.element_at(ordered, -1)["ts"].alias("last_ts"),
        _last_n(ordered, RECENT).alias("recent"),
    )


def history_merge(partials: DataFrame) -> DataFrame:
    """Counts add (runs too: the partials hold disjoint runs), verdict sets unite, first/last are
    min/max, and the latest executions are the :data:`RECENT` latest of the merged lists."""
    return partials.groupBy(*HISTORY_KEYS).agg(
        *[F.sum(c).alias(c) for c in _COUNTS],
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("verdicts")))).alias("verdicts"),
        F.min("first_ts").alias("first_ts"),
        F.max("last_ts").alias("last_ts"),
        _last_n(F.array_sort(F.flatten(F.collect_list("recent"))), RECENT).alias("recent"),
    )


def history_final(partial: DataFrame) -> DataFrame:
    return partial.select(
        *HISTORY_KEYS, *[F.col(c).cast("int").alias(c) for c in _COUNTS[:2]], *_COUNTS[2:],
        "verdicts", "first_ts", "last_ts",
        F.array_join(F.transform("recent", lambda x: x["verdict"]), " ").alias("recent_verdicts"))


def case_history(results: DataFrame) -> DataFrame:
    """:func:`history_partial`, the last verdicts as one string (``recent_verdicts``)."""
    return history_final(history_partial(results))


def flaky_cases(history: DataFrame) -> DataFrame:
    """From :func:`case_history`: the same case on the same broker build (product, version,
    platform) with different verdicts across runs."""
    return history.where((F.size("verdicts") > 1) & (F.col("n_runs") > 1)).withColumn(
        "verdict_summary", F.array_join("verdicts", " / ")
    )


def version_sort_key(version: Column) -> Column:
    """Orders ``3.9.2`` before ``3.10.0``: numeric parts zero-padded, others as they are."""
    parts = F.split(version, r"[.\-+_]")
    return F.transform(parts, lambda p: F.when(p.rlike("^[0-9]{1,18}$"), F.lpad(p, 18, "0")).otherwise(p))


def consecutive_versions(latest: DataFrame) -> DataFrame:
    """For each product, each version paired with the version before it."""
    versions = latest.select("broker_product", "broker_version").distinct()
    w = Window.partitionBy("broker_product").orderBy(version_sort_key(F.col("broker_version")))
    return (
        versions.withColumn("baseline_version", F.lag("broker_version").over(w))
        .where(F.col("baseline_version").isNotNull())
        .select("broker_product", "baseline_version", F.col("broker_version").alias("candidate_version"))
    )


def classify_transitions(joined: DataFrame) -> DataFrame:
    """Rows with ``baseline_verdict`` (null if the case is new) and ``candidate_verdict``, kept
    when the candidate is worse than the baseline:

    - ``regression``: PASS → FAIL/TIMEOUT/ERROR; FAIL → TIMEOUT (a wrong answer became no
      answer); anything → ERROR (the harness broke where it did not);
    - ``new-failure``: a case the baseline does not have is FAIL/TIMEOUT/ERROR (nobody triaged it);
    - ``new-non-strict``: the candidate is NON_STRICT where the baseline was not.
    """
    b, c = F.col("baseline_verdict"), F.col("candidate_verdict")
    worse = (
        ((b == "PASS") & c.isin(*BAD_AFTER_PASS))
        | ((b == "FAIL") & (c == "TIMEOUT"))
        | (b.isNotNull() & (b != "ERROR") & (c == "ERROR"))
    )
    kind = (
        F.when(worse, F.lit("regression"))
        .when(b.isNull() & c.isin(*BAD_AFTER_PASS), F.lit("new-failure"))
        .when((c == "NON_STRICT") & (b.isNull() | (b != "NON_STRICT")), F.lit("new-non-strict"))
    )
    return joined.withColumn("kind", kind).where(F.col("kind").isNotNull())


_CASE_FIELDS: tuple[str, ...] = ("area", "level", "verdict", "expected", "observed", "message")


def release_regressions(latest: DataFrame) -> DataFrame:
    """Regressions between consecutive versions of each product (the report's view)."""
    pairs = consecutive_versions(latest)
    base = latest.select(
        "broker_product",
        F.col("broker_version").alias("baseline_version"),
        "case_id",
        F.col("verdict").alias("baseline_verdict"),
    )
    cand = latest.select(
        "broker_product",
        F.col("broker_version").alias("candidate_version"),
        "case_id",
        *[F.col(c).alias(f"c_{c}") for c in _CASE_FIELDS],
    )
    joined = pairs.join(cand, ["broker_product", "candidate_version"]).join(
        base, ["broker_product", "baseline_version", "case_id"], "left"
    )
    return _regression_columns(
        classify_transitions(joined.withColumnRenamed("c_verdict", "candidate_verdict")),
        F.concat_ws("@", "broker_product", "baseline_version"),
        F.concat_ws("@", "broker_product", "candidate_version"),
    )


def latest_per_case(results: DataFrame) -> DataFrame:
    """One side of a gate comparison collapsed to the latest execution of each case."""
    last = F.max(F.struct("ts", "run_id", "broker_product", "broker_version", *_CASE_FIELDS)).alias("last")
    return results.groupBy("case_id").agg(last, F.count_distinct("broker").alias("n_brokers")).select(
        "case_id", "last.*", "n_brokers"
    )


def side_label(results: DataFrame) -> DataFrame:
    """One row: the brokers a side of a gate comparison holds, as ``a@1, b@2``."""
    return results.agg(F.array_join(F.array_sort(F.collect_set("broker")), ", ").alias("label"))


def gate_regressions(baseline: DataFrame, candidate: DataFrame) -> DataFrame:
    """Regressions from ``baseline`` results to ``candidate`` results, matched by case id (the
    latest execution of each case on each side)."""
    b = latest_per_case(baseline).select(
        "case_id",
        F.col("verdict").alias("baseline_verdict"),
    )
    c = latest_per_case(candidate).select(
        "case_id",
        "broker_product",
        F.concat_ws("@", "broker_product", "broker_version").alias("_candidate"),
        F.col("verdict").alias("candidate_verdict"),
        *[F.col(x).alias(f"c_{x}") for x in _CASE_FIELDS if x != "verdict"],
    )
    joined = c.join(b, "case_id", "left").crossJoin(
        side_label(baseline).select(F.col("label").alias("_baseline"))
    )
    return _regression_columns(classify_transitions(joined), F.col("_baseline"), F.col("_candidate"))


def _regression_columns(df: DataFrame, baseline: Column, candidate: Column) -> DataFrame:
    return df.select(
        "broker_product",
        baseline.alias("baseline"),
        candidate.alias("candidate"),
        "case_id",
        F.col("c_area").alias("area"),
        F.col("c_level").alias("level"),
        "kind",
        "baseline_verdict",
        "candidate_verdict",
        F.col("c_expected").alias("expected"),
        F.col("c_observed").alias("observed"),
        F.col("c_message").alias("message"),
    )
