"""Rule coverage (``rule_coverage``): each spec rule id against the cases that cite it and their
latest verdicts, per broker version, and its per-rule summary for the page."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from conformance.report.compliance import verdict_counts
from conformance.report.schema import BROKER_KEYS, SEVERITY, VERDICTS


def worst_verdict(verdicts: Column) -> Column:
    """The most severe verdict of an array column (by :data:`~conformance.report.schema.SEVERITY`)."""
    expr = F.lit(None).cast("string")
    for v in reversed(SEVERITY):
        expr = F.when(F.array_contains(verdicts, v), F.lit(v)).otherwise(expr)
    return expr


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
