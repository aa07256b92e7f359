"""The report's "Upgrade" section: between consecutive versions of each product, the cases whose
verdict or normalised observed value changed, each marked documented (a change of
``conformance/profiles/rabbitmq_releases.toml`` between the two releases lists the case, with its
source) or UNDOCUMENTED — the Spark form of :mod:`conformance.model.upgrade` (``amqp-conformance
diff``), with the same normalisation and the same profile rows.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from conformance.model.upgrade import FAILING, NORMALISE_JAVA, measured_unstable
from conformance.profiles.releases import RABBITMQ_PRODUCT, changes, default_release, parse_release
from conformance.report import edges
from conformance.report.history import consecutive_versions

_CHANGE_SCHEMA = T.StructType(
    [
        T.StructField("pattern", T.StringType()),
        T.StructField("queue_type", T.StringType()),
        T.StructField("since_num", T.LongType()),
        T.StructField("source", T.StringType()),
    ]
)


def _release_num(version: Column, product: Column) -> Column:
    """A RabbitMQ release as one sortable number (major·10⁶ + minor·10³ + patch): the version when
    the product is RabbitMQ, else the default release (as :func:`applied_release`)."""
    d = parse_release(default_release()[0]) or (0, 0, 0)
    parts = F.split(F.regexp_extract(version, r"^(\d+(\.\d+){0,2})", 1), r"\.")
    num = sum(
        (F.coalesce(parts.getItem(i).cast("long"), F.lit(0)) * (1000 ** (2 - i)) for i in range(3)), F.lit(0)
    )
    return F.when(
        (product == RABBITMQ_PRODUCT) & (F.regexp_extract(version, r"^\d", 0) != ""), num
    ).otherwise(F.lit(d[0] * 1_000_000 + d[1] * 1000 + d[2]))


def _all_unstable() -> Column:
    """Every aspect the row changed (its ``what``) varies between runs of one release, as measured."""
    measured = measured_unstable()

    def varies(aspect: str) -> Column:
        ids = sorted(c for c, a in measured if a == aspect)
        return F.col("case_id").isin(*ids) if ids else F.lit(False)

    return (~F.col("what").contains("verdict") | varies("verdict")) & (
        ~F.col("what").contains("observed") | varies("observed"))


def _normalised(col: Column) -> Column:
    out = F.regexp_replace(F.coalesce(col, F.lit("")), r"\s+", " ")
    for pattern, repl in NORMALISE_JAVA:
        out = F.regexp_replace(out, pattern, repl)
    return out


def _change_rows(spark: object) -> DataFrame:
    rows = []
    for c in changes():
        since = c.since_t
        for r in c.cases:
            rows.append(
                (
                    r.case.replace("*", "%"),
                    r.queue_type,
                    since[0] * 1_000_000 + since[1] * 1000 + since[2],
                    f"{c.since} {c.key}: {c.source}",
                )
            )
    # As an Arrow table (edges.local_frame): a Python list would make a Python RDD, whose tasks
    # start a Python worker on each executor (which need nothing but Spark).
    return edges.local_frame(spark, rows, _CHANGE_SCHEMA)  # type: ignore[arg-type]


def upgrade_changes(latest: DataFrame) -> DataFrame:
    """One row per case whose verdict or normalised observed value differs between consecutive
    versions of a product: baseline, candidate, case_id, what, old/new verdict and observed,
    status (documented | UNDOCUMENTED) and sources."""
    pairs = consecutive_versions(latest)
    side = latest.select(
        "broker_product",
        "broker_version",
        "case_id",
        "verdict",
        _normalised(F.col("observed")).alias("observed"),
    )
    old = side.select(
        "broker_product",
        F.col("broker_version").alias("baseline_version"),
        "case_id",
        F.col("verdict").alias("old_verdict"),
        F.col("observed").alias("old_observed"),
    )
    new = side.select(
        "broker_product",
        F.col("broker_version").alias("candidate_version"),
        "case_id",
        F.col("verdict").alias("new_verdict"),
        F.col("observed").alias("new_observed"),
    )
    joined = pairs.join(old, ["broker_product", "baseline_version"]).join(
        new, ["broker_product", "candidate_version", "case_id"]
    )
    # the version string itself changes by definition
    joined = joined.withColumn(
        "old_observed",
        F.replace("old_observed", F.concat(F.lit("'"), "baseline_version", F.lit("'")), F.lit("'<version>'")),
    )
    joined = joined.withColumn(
        "new_observed",
        F.replace(
            "new_observed", F.concat(F.lit("'"), "candidate_version", F.lit("'")), F.lit("'<version>'")
        ),
    )
    verdict_changed = F.col("old_verdict") != F.col("new_verdict")
    observed_changed = F.col("old_observed") != F.col("new_observed")
    changed = joined.where(verdict_changed | observed_changed).withColumn(
        "what",
        F.concat_ws(
            "+", F.when(verdict_changed, F.lit("verdict")), F.when(observed_changed, F.lit("observed"))
        ),
    )
    changed = (
        changed.withColumn("old_num", _release_num(F.col("baseline_version"), F.col("broker_product")))
        .withColumn("new_num", _release_num(F.col("candidate_version"), F.col("broker_product")))
        .withColumn("base_case", F.regexp_replace("case_id", r"\[\w+\]$", ""))
        .withColumn("qtype", F.regexp_extract("case_id", r"\[(\w+)\]$", 1))
    )
    rows = _change_rows(latest.sparkSession)
    lo, hi = F.least("old_num", "new_num"), F.greatest("old_num", "new_num")
    cond = (
        F.expr("base_case LIKE pattern")
        & (F.col("since_num") > lo)
        & (F.col("since_num") <= hi)
        & (F.col("queue_type").isNull() | (F.col("queue_type") == F.col("qtype")))
    )
    keys = ["broker_product", "baseline_version", "candidate_version", "case_id"]
    documented = (
        changed.select(*keys, "base_case", "qtype", "old_num", "new_num")
        .join(F.broadcast(rows), cond)
        .groupBy(*keys)
        .agg(F.array_join(F.array_sort(F.collect_set("source")), "; ").alias("sources"))
    )
    out = changed.join(documented, keys, "left")
    return out.select(
        F.concat_ws("@", "broker_product", "baseline_version").alias("baseline"),
        F.concat_ws("@", "broker_product", "candidate_version").alias("candidate"),
        "case_id",
        "what",
        "old_verdict",
        "new_verdict",
        "old_observed",
        "new_observed",
        # as conformance.model.upgrade: a change only in what varies between runs of one release
        # (conformance/profiles/unstable.toml) is not stable; as new_failure: a failure the old version
        # did not have is undocumented whatever change lists the case (the report's runs are judged by
        # their own release)
        F.when(_all_unstable(), F.lit("not stable")).when(
            F.col("sources").isNotNull()
            & ~(~F.col("old_verdict").isin(*FAILING) & F.col("new_verdict").isin(*FAILING)),
            F.lit("documented"),
        )
        .otherwise(F.lit("UNDOCUMENTED"))
        .alias("status"),
        F.coalesce("sources", F.lit("")).alias("sources"),
    )
