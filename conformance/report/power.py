"""Suite-power stages: mutation runs (``amqp-conformance mutate``, records with ``extra.mutant``)
judged in Spark exactly as the mutate command judges them, kept apart from the normal runs that
compliance, the matrix, flaky cases and regressions read (:func:`parsing.normal_runs`)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from conformance.report.schema import BROKER_KEYS

# How ``amqp-conformance mutate`` judges a mutant (conformance.mutate.runner.judge), in Spark.
MUTATION_BASELINE = "none"  # extra.mutant of the fault-free run every session starts with
KILLING: tuple[str, ...] = ("FAIL", "TIMEOUT")
MUTANT_OUTCOMES: tuple[str, ...] = ("KILLED", "SURVIVED", "NO-RESULT", "EQUIVALENT", "EQUIVALENT-KILLED")


def mutation_runs(results: DataFrame) -> DataFrame:
    """Records of mutation runs (a case run through an injected fault, or the fault-free baseline
    of a mutate session): another kind of run, only for the suite-power tables."""
    return results.where(F.col("mutant").isNotNull())


def mutation_cases(mutation: DataFrame, catalogue: DataFrame) -> DataFrame:
    """Per mutate session × mutant × case: the verdict through the mutant, the same session's
    fault-free verdict of the case, and whether it kills the mutant.

    ``catalogue`` is :data:`~conformance.report.schema.MUTANTS_SCHEMA`. A kill is FAIL or
    TIMEOUT where the baseline was neither, or NON_STRICT for a SHOULD/MAY mutant where the
    baseline was none of the three; ERROR never kills; a run whose fault failed (tainted) kills
    nothing. A mutant the catalogue does not know (an older or newer suite) is judged as a MUST
    mutant of the category its id starts with.
    """
    session = F.coalesce(F.col("mutate_session"), F.lit("?")).alias("mutate_session")
    last = mutation.groupBy(session, "mutant", "case_id").agg(
        F.max(F.struct("ts", "run_id", "verdict", *BROKER_KEYS, "area", "level", "expected", "observed",
                       "message")).alias("l"))
    runs = mutation.groupBy(session, "mutant").agg(
        F.max(F.coalesce(F.col("mutant_tainted") == "true", F.lit(False))).alias("tainted"),
        F.max("mutant_problem").alias("problem"))
    base = last.where(F.col("mutant") == MUTATION_BASELINE).select(
        "mutate_session", "case_id", F.col("l.verdict").alias("baseline_verdict"))
    cases = (
        last.where(F.col("mutant") != MUTATION_BASELINE)
        .join(runs, ["mutate_session", "mutant"], "left")
        .join(base, ["mutate_session", "case_id"], "left")
        .join(F.broadcast(catalogue.select("mutant", "category", "should", "equivalent")), "mutant", "left")
    )
    v, was = F.col("l.verdict"), F.coalesce(F.col("baseline_verdict"), F.lit("-"))
    should = F.coalesce(F.col("should"), F.lit(False))
    kills = ~F.col("tainted") & (
        (v.isin(*KILLING) & ~was.isin(*KILLING))
        | ((v == "NON_STRICT") & should & ~was.isin(*KILLING, "NON_STRICT")))
    return cases.select(
        *[F.col(f"l.{k}").alias(k) for k in BROKER_KEYS],
        "mutate_session",
        "mutant",
        F.coalesce(F.col("category"), F.substring_index("mutant", ".", 1)).alias("category"),
        should.alias("should"),
        F.coalesce(F.col("equivalent"), F.lit(False)).alias("equivalent"),
        "case_id",
        F.col("l.area").alias("area"),
        F.col("l.level").alias("level"),
        v.alias("verdict"),
        F.col("baseline_verdict"),
        kills.alias("kills"),
        "tainted",
        "problem",
        F.col("l.ts").alias("ts"),
        F.col("l.expected").alias("expected"),
        F.col("l.observed").alias("observed"),
        F.col("l.message").alias("message"),
    )


def mutant_outcomes(cases: DataFrame) -> DataFrame:
    """Per broker × mutate session × mutant (from :func:`mutation_cases`): cases run, the
    killing cases with their verdicts, ERRORs, and the outcome as ``mutate`` prints it
    (KILLED, SURVIVED, NO-RESULT, EQUIVALENT, EQUIVALENT-KILLED); ``latest`` marks each broker's
    most recent session of the mutant."""
    counted = ~F.col("tainted")
    kill = F.when(
        F.col("kills"),
        F.struct("case_id", "verdict", F.coalesce("baseline_verdict", F.lit("-")).alias("baseline")),
    )
    per = cases.groupBy(*BROKER_KEYS, "mutate_session", "mutant", "category", "should", "equivalent").agg(
        F.count(F.when(counted, 1)).alias("n_cases"),
        F.array_sort(F.collect_list(kill)).alias("kills"),
        F.array_sort(F.collect_set(F.when(counted & (F.col("verdict") == "ERROR"), F.col("case_id")))).alias(
            "errors"
        ),
        F.array_sort(F.collect_set("area")).alias("areas"),
        F.max("tainted").alias("tainted"),
        F.max("problem").alias("problem"),
        F.max("ts").alias("ts"),
    )
    killed = F.size("kills") > 0
    outcome = (
        F.when(F.col("problem").isNotNull() & ~killed, F.lit("NO-RESULT"))
        .when(F.col("equivalent") & killed, F.lit("EQUIVALENT-KILLED"))
        .when(F.col("equivalent"), F.lit("EQUIVALENT"))
        .when(killed, F.lit("KILLED"))
        .otherwise(F.lit("SURVIVED"))
    )
    recent = Window.partitionBy(*BROKER_KEYS, "mutant").orderBy(
        F.col("ts").desc(), F.col("mutate_session").desc()
    )
    return (
        per.withColumn("n_kills", F.size("kills"))
        .withColumn("killed", killed)
        .withColumn("outcome", outcome)
        .withColumn("latest", F.row_number().over(recent) == 1)
    )


def mutation_scores(outcomes: DataFrame) -> DataFrame:
    """Per broker × category (the mutant's area), over each mutant's latest session: mutants,
    killed, survived, no result, equivalent, and the mutation score killed / (mutants -
    equivalent), as ``mutate`` prints it."""
    o = F.col("outcome")
    latest = outcomes.where(F.col("latest"))
    n = {
        "n_killed": F.count(F.when(o == "KILLED", 1)),
        "n_survived": F.count(F.when(o == "SURVIVED", 1)),
        "n_no_result": F.count(F.when(o == "NO-RESULT", 1)),
        "n_equivalent": F.count(F.when(o.startswith("EQUIVALENT"), 1)),
    }
    counted = F.col("n_mutants") - F.col("n_equivalent")
    return latest.groupBy(*BROKER_KEYS, "category").agg(
        F.count(F.lit(1)).alias("n_mutants"), *[c.alias(k) for k, c in n.items()],
        F.max("ts").alias("last_ts"),
    ).withColumn("score", F.when(counted > 0, F.round(F.col("n_killed") / counted, 4)))
