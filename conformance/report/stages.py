"""The pipeline's stages: pure ``DataFrame -> DataFrame`` functions, no I/O, no actions.

Every function here only builds a plan; reading and writing happen at the edges
(:mod:`conformance.report.edges`, :mod:`conformance.report.pipeline`). Inputs are named by what they
must hold:

- ``lines``: :data:`~conformance.report.schema.LINES_SCHEMA` — raw text lines with their file;
- ``results``: valid result rows (:func:`valid_results` of :func:`parse_lines`);
- ``latest``: :func:`latest_verdicts` of ``results`` (:data:`~conformance.report.schema.LATEST_SCHEMA`).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from conformance.model.results import REQUIRED_FIELDS, WORKLOAD_RECORD_PREFIX
from conformance.report import tx_table
from conformance.report.schema import (
    BAD_AFTER_PASS,
    MUTATION_COLUMNS,
    RESULT_SCHEMA,
    RESULTS_COLUMNS,
    SCORED_VERDICTS,
    VERDICTS,
)

# Worst first: the verdict a group of verdicts is summarised by.
SEVERITY: tuple[str, ...] = (
    "FAIL", "TIMEOUT", "ERROR", "NOT_RUN", "NON_STRICT", "UNSUPPORTED", "INFORMATIONAL", "PASS")
BROKER_KEYS: tuple[str, ...] = ("broker", "broker_product", "broker_version")


# ---------------------------------------------------------------------------------------- parse


def is_workload_line(value: Column) -> Column:
    """A ``faults`` record (``"record": "faults.…"``): no case result, read by the cluster section."""
    kind = F.get_json_object(value, "$.record")
    return F.coalesce(kind.startswith(WORKLOAD_RECORD_PREFIX), F.lit(False))


def workload_lines(lines: DataFrame) -> DataFrame:
    """The ``faults`` records among raw lines (column ``value``)."""
    return lines.where(is_workload_line(F.col("value"))).select("value")


def parse_lines(lines: DataFrame) -> DataFrame:
    """Parse each non-blank line against the explicit schema; ``reason`` is null for a valid
    record and says what is wrong otherwise. Keeps ``file``, ``block_start``, ``row_id``. A
    ``faults`` record is neither (:func:`workload_lines` reads those)."""
    rec = F.from_json(F.col("value"), RESULT_SCHEMA)
    parsed = lines.where((F.trim(F.col("value")) != "") & ~is_workload_line(F.col("value"))).select(
        "file", "block_start", "row_id", "value", rec.alias("rec")
    )
    r = F.col("rec")
    missing = [F.when(r[f].isNull(), F.lit(f)) for f in REQUIRED_FIELDS]
    any_missing = F.lit(False)
    all_missing = F.lit(True)
    for f in REQUIRED_FIELDS:
        any_missing = any_missing | r[f].isNull()
        all_missing = all_missing & r[f].isNull()
    ts = F.try_to_timestamp(r["time"])
    is_json_object = F.from_json(F.col("value"), "map<string,string>").isNotNull()
    reason = (
        F.when(all_missing & ~is_json_object, F.lit("not a valid JSON object"))
        .when(all_missing, F.lit("JSON without any result field"))
        .when(any_missing, F.concat(F.lit("missing or mistyped field(s): "), F.concat_ws(", ", *missing)))
        .when(~r["verdict"].isin(*VERDICTS), F.concat(F.lit("unknown verdict "), r["verdict"]))
        .when(ts.isNull(), F.concat(F.lit("time is not an ISO 8601 timestamp: "), r["time"]))
    )
    rec_fields = rec_with_derived(r, ts)
    return parsed.select(
        "file",
        "block_start",
        "row_id",
        # The text is kept only where it is needed: to show what a malformed line said.
        F.when(reason.isNotNull(), F.substring("value", 1, 200)).alias("value"),
        reason.alias("reason"),
        *rec_fields,
    )


def rec_with_derived(r: Column, ts: Column) -> list[Column]:
    """The record's fields, flat, plus ``ts`` (parsed ``time``), ``broker`` and the tx keys."""
    extra = r["extra"]
    return [
        *[r[f].alias(f) for f in RESULT_SCHEMA.fieldNames() if f != "extra"],
        ts.alias("ts"),
        F.concat_ws("@", r["broker_product"], r["broker_version"]).alias("broker"),
        extra.getItem("tx_row").alias("tx_row"),
        F.lower(F.trim(extra.getItem("tx_observed"))).alias("tx_observed"),
        # A list in the record arrives as its JSON text (the map's values are strings).
        extra.getItem("trace").alias("trace"),
        *[extra.getItem(c).alias(c) for c in MUTATION_COLUMNS],
    ]


def valid_results(parsed: DataFrame) -> DataFrame:
    """The valid records of :func:`parse_lines`, one row per case execution."""
    return parsed.where(F.col("reason").isNull()).select(*RESULTS_COLUMNS)


def malformed_lines(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("reason").isNotNull()).select(
        "file", "block_start", "row_id", "reason", "value"
    )


def split_stats(lines: DataFrame) -> DataFrame:
    """Per file split: how many raw lines it holds and the first row id Spark gave it."""
    return lines.groupBy("file", "block_start").agg(
        F.count(F.lit(1)).alias("n_lines"), F.min("row_id").alias("first_row_id")
    )


def with_line_numbers(malformed: DataFrame, splits: DataFrame) -> DataFrame:
    """1-based line numbers for rows of :func:`malformed_lines`.

    Spark numbers rows per partition; a file split lies wholly in one partition and its rows are
    consecutive there, so a row's line = lines of the file's earlier splits + its offset in its
    own split + 1.
    """
    before = Window.partitionBy("file").orderBy("block_start").rowsBetween(Window.unboundedPreceding, -1)
    offsets = splits.select(
        "file",
        "block_start",
        "first_row_id",
        F.coalesce(F.sum("n_lines").over(before), F.lit(0)).alias("lines_before"),
    )
    return (
        malformed.join(F.broadcast(offsets), ["file", "block_start"], "left")
        .select(
            display_path(F.col("file")).alias("file"),
            (F.col("lines_before") + F.col("row_id") - F.col("first_row_id") + 1).alias("line"),
            "reason",
            "value",
        )
    )


def display_path(uri: Column) -> Column:
    return F.url_decode(F.regexp_replace(uri, "^file:(//)?", ""))


def file_stats(parsed: DataFrame) -> DataFrame:
    """Per input file: valid and malformed line counts."""
    return parsed.groupBy("file").agg(
        F.count(F.when(F.col("reason").isNull(), 1)).alias("n_valid"),
        F.count(F.when(F.col("reason").isNotNull(), 1)).alias("n_malformed"),
    ).select(display_path(F.col("file")).alias("file"), "n_valid", "n_malformed")


# ------------------------------------------------------------------------------------- verdicts


def verdict_counts(col: str = "verdict") -> list[Column]:
    return [F.count(F.when(F.col(col) == v, 1)).alias(f"n_{v.lower()}") for v in VERDICTS]


def worst_verdict(verdicts: Column) -> Column:
    """The most severe verdict of an array column (by :data:`SEVERITY`)."""
    expr = F.lit(None).cast("string")
    for v in reversed(SEVERITY):
        expr = F.when(F.array_contains(verdicts, v), F.lit(v)).otherwise(expr)
    return expr


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
        F.max(F.struct("ts", "run_id", *_LATEST_PAYLOAD)).alias("last"),
        F.count(F.lit(1)).alias("n_executions"))


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
    ordered = F.array_sort("_l")
    execs = F.collect_list(F.struct("ts", "run_id", "verdict")).alias("_l")
    return results.groupBy(*HISTORY_KEYS).agg(execs).select(
        *HISTORY_KEYS,
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


# ------------------------------------------------------------------------------------------- tx


def tx_observations(latest: DataFrame) -> DataFrame:
    """Per broker version and tx row: the value its tx cases observed.

    Variants of a row that agree give that value; ``undefined`` (unobservable) gives way to any
    defined observation; variants that disagree give ``conflict: a / b``.
    """
    tx = latest.where(F.col("tx_row").isNotNull() & F.col("tx_observed").isNotNull())
    grouped = tx.groupBy(*BROKER_KEYS, "tx_row").agg(
        F.array_sort(F.collect_set("tx_observed")).alias("values"),
        F.count(F.lit(1)).alias("n_cases"),
        F.array_sort(F.collect_list("case_id")).alias("cases"),
    )
    defined = F.array_remove(F.col("values"), tx_table.UNDEFINED)
    observed = (
        F.when(F.size(defined) == 0, F.lit(tx_table.UNDEFINED))
        .when(F.size(defined) == 1, defined[0])
        .otherwise(F.concat(F.lit("conflict: "), F.array_join(defined, " / ")))
    )
    return grouped.select(*BROKER_KEYS, "tx_row", observed.alias("observed"), "n_cases", "cases")


def tx_comparison(tx_obs: DataFrame, seed: DataFrame) -> DataFrame:
    """The tx table per broker version: every seed row, the observed value beside each column's
    value and whether they match. ``seed`` is :data:`~conformance.report.schema.TX_SEED_SCHEMA`."""
    brokers = tx_obs.select(*BROKER_KEYS).distinct()
    wide_seed = seed.groupBy("tx_row", "row_order").pivot("column", list(tx_table.COLUMNS)).agg(
        F.first("column_value")
    )
    out = brokers.crossJoin(wide_seed).join(tx_obs, [*BROKER_KEYS, "tx_row"], "left")
    cols: list[Column] = []
    for c in tx_table.COLUMNS:
        field = tx_table.COLUMN_FIELD[c]
        value = F.col(f"`{c}`")
        cols.append(value.alias(field))
        cols.append(
            F.when(
                F.col("observed").isNull() | (F.col("observed") == tx_table.UNDEFINED),
                F.lit(None).cast("boolean"),
            )
            .otherwise((value == tx_table.UNDEFINED) | (value == F.col("observed")))
            .alias(f"{field}_match")
        )
    return out.select(
        *BROKER_KEYS,
        "tx_row",
        "row_order",
        "observed",
        F.coalesce("n_cases", F.lit(0)).alias("n_cases"),
        *cols,
    )


def profile_inference(tx_obs: DataFrame, seed: DataFrame) -> DataFrame:
    """Per broker version × tx table column: rows compared, matched, exactly matched, the score,
    the rows that disagree, and which column (and profile) fits best.

    A column's ``undefined`` matches any observation; an observation of ``undefined``
    (unobservable) is no evidence and is not compared. Ties go to more exact matches, then to the
    later column.
    """
    observed = tx_obs.where(F.col("observed") != tx_table.UNDEFINED)
    pairs = observed.join(F.broadcast(seed), "tx_row", "inner")
    is_match = (F.col("column_value") == tx_table.UNDEFINED) | (F.col("column_value") == F.col("observed"))
    disagree = F.when(
        ~is_match,
        F.struct(
            F.col("row_order"),
            F.concat(
                F.col("tx_row"),
                F.lit(": observed "),
                F.col("observed"),
                F.lit(", column says "),
                F.col("column_value"),
            ),
        ),
    )
    per = pairs.groupBy(*BROKER_KEYS, "column", "column_order").agg(
        F.count(F.lit(1)).alias("n_compared"),
        F.count(F.when(is_match, 1)).alias("n_match"),
        F.count(F.when(F.col("column_value") == F.col("observed"), 1)).alias("n_exact"),
        F.array_sort(F.collect_list(disagree)).alias("_dis"),
    )
    rank = Window.partitionBy(*BROKER_KEYS).orderBy(
        F.col("score").desc(), F.col("n_exact").desc(), F.col("column_order").desc()
    )
    profile_map = F.create_map(
        *[x for c, p in tx_table.COLUMN_PROFILE.items() for x in (F.lit(c), F.lit(p).cast("string"))]
    )
    return (
        per.select(
            *BROKER_KEYS,
            "column",
            "column_order",
            profile_map[F.col("column")].alias("profile"),
            "n_compared",
            "n_match",
            "n_exact",
            F.round(F.col("n_match") / F.col("n_compared"), 4).alias("score"),
            F.transform("_dis", lambda s: s["col2"]).alias("disagreements"),
        )
        .withColumn("rank", F.row_number().over(rank))
        .withColumn("best", F.col("rank") == 1)
    )


# -------------------------------------------------------------------------------- flaky, regressions


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


# --------------------------------------------------------------------------------- rule coverage


def rule_coverage(rules: DataFrame, latest: DataFrame) -> DataFrame:
    """Each spec rule id × broker version: the cases citing it and their latest verdicts.

    ``rules`` is :data:`~conformance.report.schema.RULES_SCHEMA` (one row per XML element). A
    rule no case cites appears once with a null broker; a rule a case cites that the spec does
    not have appears with ``in_spec`` false.
    """
    spec = (
        rules.groupBy("rule_id")
        .agg(
            F.first("class_name", ignorenulls=True).alias("class_name"),
            F.first("method", ignorenulls=True).alias("method"),
            F.min(
                F.array_position(
                    F.array(*[F.lit(x) for x in ("MUST", "SHOULD", "MAY", "INFO")]), F.col("rule_level")
                )
            ).alias("_lv"),
            F.count(F.lit(1)).alias("n_elements"),
        )
        .select(
            "rule_id",
            "class_name",
            "method",
            F.element_at(
                F.array(*[F.lit(x) for x in ("MUST", "SHOULD", "MAY", "INFO")]), F.col("_lv").cast("int")
            ).alias("rule_level"),
            "n_elements",
            F.lit(True).alias("in_spec"),
        )
    )
    cited = latest.select(*BROKER_KEYS, "case_id", "verdict", F.explode("rules").alias("rule_id"))
    per = cited.groupBy("rule_id", *BROKER_KEYS).agg(
        F.count_distinct("case_id").alias("n_cases"),
        *verdict_counts(),
        F.array_sort(F.collect_set("case_id")).alias("cases"),
        F.collect_set("verdict").alias("_verdicts"),
    ).withColumn("worst_verdict", worst_verdict(F.col("_verdicts"))).drop("_verdicts")
    out = spec.join(per, "rule_id", "full_outer")
    return out.select(
        "rule_id",
        "class_name",
        "method",
        "rule_level",
        F.coalesce("n_elements", F.lit(0)).alias("n_elements"),
        F.coalesce("in_spec", F.lit(False)).alias("in_spec"),
        *BROKER_KEYS,
        F.coalesce("n_cases", F.lit(0)).alias("n_cases"),
        *[F.coalesce(f"n_{v.lower()}", F.lit(0)).alias(f"n_{v.lower()}") for v in VERDICTS],
        F.coalesce("cases", F.array().cast("array<string>")).alias("cases"),
        "worst_verdict",
    )


def rules_summary(coverage: DataFrame) -> DataFrame:
    """Per rule id: brokers tested, cases, and the worst latest verdict over all brokers."""
    return coverage.groupBy("rule_id", "class_name", "method", "rule_level", "in_spec", "n_elements").agg(
        F.count("broker").alias("n_brokers"),
        F.max("n_cases").alias("n_cases"),
        F.array_join(F.array_sort(F.array_distinct(F.flatten(F.collect_list("cases")))), " ").alias("cases"),
        worst_verdict(F.collect_set("worst_verdict")).alias("worst_verdict"),
        F.sum("n_pass").alias("n_pass"),
        F.sum(sum((F.col(f"n_{v.lower()}") for v in VERDICTS if v != "PASS"), F.lit(0))).alias("n_other"),
    )


def normal_runs(results: DataFrame) -> DataFrame:
    """Records of runs of the suite: what compliance, the matrix, flaky cases and regressions use."""
    return results.where(F.col("mutant").isNull())
