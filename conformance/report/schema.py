"""Explicit Spark schemas of the pipeline's input and of the tables it writes.

The input schema is built from :class:`conformance.model.results.ResultRecord`'s fields, so the two
cannot drift; the latest-verdicts table takes its columns from the results table's.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Final

from pyspark.sql import types as T

from conformance.model.results import ResultRecord
from conformance.model.verdicts import ALL_VERDICTS, Verdict

STR = T.StringType()

# The Spark type of each field type of ResultRecord (its annotations are strings: the module uses
# ``from __future__ import annotations``). Values of ``extra`` that are not strings arrive as
# their JSON text (Spark's lenient string parsing); ``queue_type`` is absent in older runs: null.
_RECORD_TYPES: Final[dict[str, T.DataType]] = {
    "str": STR,
    "str | None": STR,
    "list[str]": T.ArrayType(STR),
    "float": T.DoubleType(),
    "int": T.IntegerType(),
    "dict[str, Any]": T.MapType(STR, STR),
}

RESULT_SCHEMA: Final = T.StructType(
    [T.StructField(f.name, _RECORD_TYPES[str(f.type)]) for f in fields(ResultRecord)]
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
# Worst first: the verdict a group of verdicts is summarised by.
SEVERITY: Final[tuple[str, ...]] = (
    "FAIL", "TIMEOUT", "ERROR", "NOT_RUN", "NON_STRICT", "UNSUPPORTED", "INFORMATIONAL", "PASS")
# What names a broker version in every table: "<product>@<version>", product, version.
BROKER_KEYS: Final[tuple[str, ...]] = ("broker", "broker_product", "broker_version")

VERDICT_COUNT_FIELDS: Final[list[T.StructField]] = [
    T.StructField(f"n_{v.lower()}", T.LongType(), False) for v in VERDICTS
]


def _columns(names: str) -> list[T.StructField]:
    """The fields of :data:`RESULTS_STRUCT` with these (space-separated) names, in that order."""
    by_name = {f.name: f for f in RESULTS_STRUCT.fields}
    return [by_name[name] for name in names.split()]


# The latest execution of each case on each broker version (compliance.latest_verdicts).
LATEST_SCHEMA: Final = T.StructType(
    [
        *_columns(
            "broker broker_product broker_version case_id area level rules profile verdict expected"
            " observed message run_id ts tx_row tx_observed duration_s trace"
        ),
        T.StructField("n_executions", T.LongType(), False),
    ]
)

# Malformed lines as the pipeline keeps them (parsing.with_line_numbers; a test keeps the two equal).
MALFORMED_SCHEMA: Final = T.StructType(
    [
        T.StructField("file", STR),
        T.StructField("line", T.LongType()),
        T.StructField("reason", STR),
        T.StructField("value", STR),
    ]
)

# Cases that got worse from a baseline to a candidate (history.release_regressions and
# gate_regressions);
# ``kind`` is regression | new-failure | new-non-strict.
REGRESSION_SCHEMA: Final = T.StructType(
    [
        T.StructField(name, STR)
        for name in (
            "broker_product baseline candidate case_id area level kind baseline_verdict"
            " candidate_verdict expected observed message"
        ).split()
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
