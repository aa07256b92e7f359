"""The cluster section's tables: the ``faults`` workload's records and the ``cluster`` area's verdicts.

``faults`` records (``faults.summary``, ``faults.bucket``, ``faults.event``; the schema is in
:mod:`conformance.faults.command`) arrive as raw lines (:func:`conformance.report.parsing.workload_lines`)
and are parsed here against explicit schemas; a line of another kind parses to nothing and is left out.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from conformance.report import edges

LATENCY = ("p50", "p99")
COUNTS = ("ok", "lost", "recovered", "unconfirmed", "unexpected", "duplicated", "duplicated_unflagged")

SUMMARY_SCHEMA = T.StructType([
    T.StructField("record", T.StringType()),
    T.StructField("run_id", T.StringType()),
    T.StructField("time", T.StringType()),
    T.StructField("target", T.StringType()),
    T.StructField("broker_product", T.StringType()),
    T.StructField("broker_version", T.StringType()),
    T.StructField("cluster_size", T.LongType()),
    T.StructField("queue_type", T.StringType()),
    T.StructField("promise", T.StringType()),
    T.StructField("nemesis", T.ArrayType(T.StringType())),
    T.StructField("duration_s", T.DoubleType()),
    T.StructField("events", T.LongType()),
    T.StructField("faults", T.LongType()),
    T.StructField("published", T.LongType()),
    T.StructField("confirmed", T.LongType()),
    T.StructField("counts", T.StructType([T.StructField(c, T.LongType()) for c in COUNTS])),
    T.StructField("confirm_latency_ms", T.StructType([T.StructField(k, T.DoubleType()) for k in LATENCY])),
    T.StructField("injected", T.StringType()),
    T.StructField("verdict", T.StringType()),
])

BUCKET_SCHEMA = T.StructType([
    T.StructField("record", T.StringType()),
    T.StructField("run_id", T.StringType()),
    T.StructField("queue_type", T.StringType()),
    T.StructField("t", T.DoubleType()),
    T.StructField("width_s", T.DoubleType()),
    T.StructField("published", T.LongType()),
    T.StructField("confirmed", T.LongType()),
    T.StructField("consumed", T.LongType()),
    T.StructField("lost", T.LongType()),
    T.StructField("faults", T.ArrayType(T.StringType())),
])

EVENT_SCHEMA = T.StructType([
    T.StructField("record", T.StringType()),
    T.StructField("run_id", T.StringType()),
    T.StructField("queue_type", T.StringType()),
    T.StructField("phase", T.StringType()),
    T.StructField("t", T.DoubleType()),
    T.StructField("action", T.StringType()),
    T.StructField("node", T.LongType()),
    T.StructField("node_name", T.StringType()),
    T.StructField("ok", T.BooleanType()),
    T.StructField("detail", T.StringType()),
])


def empty_lines(spark: SparkSession) -> DataFrame:
    return edges.local_frame(spark, [], T.StructType([T.StructField("value", T.StringType())]))


def _records(lines: DataFrame, kind: str, schema: T.StructType) -> DataFrame:
    rec = F.from_json(F.col("value"), schema).alias("r")
    return lines.select(rec).where(F.col("r.record") == kind).select("r.*").drop("record")


def _broker(r: Column) -> Column:
    """``product@version`` as the suite's results name a broker; the target when the run had none."""
    named = F.concat_ws("@", F.col("broker_product"), F.col("broker_version"))
    return F.when(F.col("broker_product").isNotNull(), named).otherwise(F.coalesce(r, F.lit("?")))


def fault_runs(lines: DataFrame) -> DataFrame:
    """One row per ``faults`` run (its summary), flat."""
    s = _records(lines, "faults.summary", SUMMARY_SCHEMA)
    nemesis = F.concat_ws(",", F.col("nemesis"))
    return s.select(
        "run_id",
        F.try_to_timestamp(F.col("time")).alias("ts"),
        _broker(F.col("target")).alias("broker"),
        "target", "cluster_size", "queue_type", "promise",
        # A run through the loss injector is the checker's proof, not the broker's figure: its own row.
        F.when(F.col("injected").isNotNull(), F.concat(nemesis, F.lit(" + injected loss")))
        .otherwise(F.when(nemesis == "", F.lit("none")).otherwise(nemesis)).alias("nemesis"),
        "duration_s", "events", "faults", "published", "confirmed",
        *[F.col(f"counts.{c}").alias(c) for c in COUNTS],
        F.col("confirm_latency_ms.p50").alias("p50_ms"), F.col("confirm_latency_ms.p99").alias("p99_ms"),
        "injected", "verdict",
    )


def fault_summary(runs: DataFrame) -> DataFrame:
    """Per broker × queue type × nemesis: the runs' counts summed (and the worst verdict)."""
    return runs.groupBy("broker", "queue_type", "nemesis").agg(
        F.count(F.lit(1)).alias("n_runs"),
        F.count(F.when(F.col("verdict") == "FAIL", 1)).alias("n_fail"),
        *[F.sum(c).alias(c) for c in ("events", "faults", "published", "confirmed", *COUNTS)],
        F.max("p99_ms").alias("max_p99_ms"),
        F.max("ts").alias("last_ts"),
    )


def fault_timeline(lines: DataFrame) -> DataFrame:
    """Throughput per time bucket of every run, with the faults active in it."""
    return _records(lines, "faults.bucket", BUCKET_SCHEMA)


def fault_events(lines: DataFrame) -> DataFrame:
    """The nemesis' actions of every run."""
    return _records(lines, "faults.event", EVENT_SCHEMA)


def cluster_cases(latest: DataFrame) -> DataFrame:
    """The ``cluster`` area's latest verdicts (the matrix has them too; this is the section's table)."""
    return latest.where(F.col("area") == "cluster").select(
        "broker", "case_id", "level", "verdict", "expected", "observed", "message"
    )
