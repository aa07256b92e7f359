"""Explicit Spark schemas of the pipeline's input and of the tables it writes.

The input schema mirrors :class:`conformance.results.ResultRecord` field by field; a test keeps
the two in step.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import types as T

from conformance.verdicts import ALL_VERDICTS, Verdict

STR = T.StringType()

RESULT_SCHEMA: Final = T.StructType(
    [
        T.StructField("run_id", STR),
        T.StructField("time", STR),
        T.StructField("target", STR),
        T.StructField("broker_product", STR),
        T.StructField("broker_version", STR),
        T.StructField("broker_platform", STR),
        T.StructField("client", STR),
        T.StructField("client_version", STR),
        T.StructField("case_id", STR),
        T.StructField("area", STR),
        T.StructField("rules", T.ArrayType(STR)),
        T.StructField("level", STR),
        T.StructField("profile", STR),
        T.StructField("verdict", STR),
        T.StructField("expected", STR),
        T.StructField("observed", STR),
        T.StructField("duration_s", T.DoubleType()),
        T.StructField("message", STR),
        T.StructField("nodeid", STR),
        T.StructField("worker", STR),
        T.StructField("schema", T.IntegerType()),
        # Values that are not strings arrive as their JSON text (Spark's lenient string parsing).
        T.StructField("extra", T.MapType(STR, STR)),
        T.StructField("queue_type", STR),  # absent in older runs: null
    ]
)

# The raw lines as the edge reads them: the text, which file, where the file split starts and a
# per-partition increasing id (see conformance.report.edges for how line numbers come from these).
LINES_SCHEMA: Final = T.StructType(
    [
        T.StructField("value", STR),
        T.StructField("file", STR),
        T.StructField("block_start", T.LongType()),
        T.StructField("row_id", T.LongType()),
    ]
)

MUTATION_COLUMNS: Final[tuple[str, ...]] = ("mutant", "mutate_session", "mutant_problem", "mutant_tainted")

# One valid result row as the stages see it: the record's fields (``extra`` reduced to the two tx
# keys and the frame trace (``extra.trace``, JSON text) the report reads), ``ts`` parsed from
# ``time`` and ``broker`` = "<product>@<version>".
RESULTS_COLUMNS: Final[tuple[str, ...]] = (
    *(f for f in RESULT_SCHEMA.fieldNames() if f != "extra"),
    "ts",
    "broker",
    "tx_row",
    "tx_observed",
    "trace",
    # Mutation runs (``amqp-conformance mutate``): which mutant was active ("none" for the
    # fault-free baseline run; null for a run of the suite), the mutate session, and why the run
    # did not finish cleanly / whether the proxy's fault failed (then no verdict of it counts).
    *MUTATION_COLUMNS,
)
# The columns a store written before the mutation columns existed holds (read as null there).
RESULTS_COLUMNS_V1: Final[tuple[str, ...]] = RESULTS_COLUMNS[: -len(MUTATION_COLUMNS)]

# RESULTS_COLUMNS with their types (what a store's Parquet files hold; a test keeps it equal to
# what parse_lines gives).
RESULTS_STRUCT: Final = T.StructType(
    [
        *(f for f in RESULT_SCHEMA.fields if f.name != "extra"),
        T.StructField("ts", T.TimestampType()),
        T.StructField("broker", STR, False),
        *(T.StructField(c, STR) for c in ("tx_row", "tx_observed", "trace", *MUTATION_COLUMNS)),
    ]
)

VERDICTS: Final[tuple[str, ...]] = tuple(v.value for v in ALL_VERDICTS)
# Verdicts that count for a score: the broker met the expectation or did not. UNSUPPORTED and
# INFORMATIONAL state nothing either way; ERROR is the harness's fault, never the broker's.
SCORED_VERDICTS: Final[tuple[str, ...]] = (
    Verdict.PASS.value,
    Verdict.FAIL.value,
    Verdict.NON_STRICT.value,
    Verdict.TIMEOUT.value,
)
BAD_AFTER_PASS: Final[tuple[str, ...]] = (
    Verdict.FAIL.value, Verdict.TIMEOUT.value, Verdict.ERROR.value, Verdict.NOT_RUN.value)
LEVELS: Final[tuple[str, ...]] = ("MUST", "SHOULD", "MAY", "EXTENSION", "INFO")

VERDICT_COUNT_FIELDS: Final[list[T.StructField]] = [
    T.StructField(f"n_{v.lower()}", T.LongType(), False) for v in VERDICTS
]

LATEST_SCHEMA: Final = T.StructType(
    [
        T.StructField("broker", STR),
        T.StructField("broker_product", STR),
        T.StructField("broker_version", STR),
        T.StructField("case_id", STR),
        T.StructField("area", STR),
        T.StructField("level", STR),
        T.StructField("rules", T.ArrayType(STR)),
        T.StructField("profile", STR),
        T.StructField("verdict", STR),
        T.StructField("expected", STR),
        T.StructField("observed", STR),
        T.StructField("message", STR),
        T.StructField("run_id", STR),
        T.StructField("ts", T.TimestampType()),
        T.StructField("tx_row", STR),
        T.StructField("tx_observed", STR),
        T.StructField("duration_s", T.DoubleType()),
        T.StructField("trace", STR),
        T.StructField("n_executions", T.LongType(), False),
    ]
)

REGRESSION_SCHEMA: Final = T.StructType(
    [
        T.StructField("broker_product", STR),
        T.StructField("baseline", STR),
        T.StructField("candidate", STR),
        T.StructField("case_id", STR),
        T.StructField("area", STR),
        T.StructField("level", STR),
        T.StructField("kind", STR),  # regression | new-failure | new-non-strict
        T.StructField("baseline_verdict", STR),
        T.StructField("candidate_verdict", STR),
        T.StructField("expected", STR),
        T.StructField("observed", STR),
        T.StructField("message", STR),
    ]
)

RULES_SCHEMA: Final = T.StructType(
    [
        T.StructField("rule_id", STR, False),
        T.StructField("class_name", STR),
        T.StructField("method", STR),
        T.StructField("field", STR),
        T.StructField("rule_name", STR, False),
        T.StructField("rule_level", STR, False),
        T.StructField("on_failure", STR),
    ]
)

TX_SEED_SCHEMA: Final = T.StructType(
    [
        T.StructField("tx_row", STR, False),
        T.StructField("row_order", T.IntegerType(), False),
        T.StructField("column", STR, False),
        T.StructField("column_order", T.IntegerType(), False),
        T.StructField("column_value", STR, False),
    ]
)

# The mutant catalogue (conformance/mutate/catalogue.py) as the suite-power stages read it.
MUTANTS_SCHEMA: Final = T.StructType(
    [
        T.StructField("mutant", STR, False),
        T.StructField("category", STR, False),
        T.StructField("description", STR),
        T.StructField("rule", STR),
        T.StructField("should", T.BooleanType(), False),
        T.StructField("equivalent", T.BooleanType(), False),
        T.StructField("equivalent_reason", STR),
    ]
)
