"""The tx tables: the seed's tx table per broker with the observed value beside each column
(``tx_table``) and which column, hence which profile, each broker fits best (``profile_inference``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from conformance.report import tx_table
from conformance.report.schema import BROKER_KEYS


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
