"""From raw lines to result rows: parsing against the explicit schema, malformed lines (the
``malformed`` table) and per-file counts, the ``faults`` records set apart for the cluster section,
and the normal runs every compliance table reads.

Like every stage module of the report, pure ``DataFrame -> DataFrame`` functions: they only build
plans; reading and writing happen at the edges (:mod:`conformance.report.edges`,
:mod:`conformance.report.pipeline`). ``lines`` is :data:`~conformance.report.schema.LINES_SCHEMA`
(raw text lines with their file); ``results`` are valid result rows (:func:`valid_results` of
:func:`parse_lines`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from conformance.model.results import REQUIRED_FIELDS, WORKLOAD_RECORD_PREFIX
from conformance.report.schema import MUTATION_COLUMNS, RESULT_SCHEMA, RESULTS_COLUMNS, VERDICTS


def is_workload_line(value: Column) -> Column:
    """A ``faults`` record (``"record": "faults.…"``): no case result, read by the cluster section."""
    # get_json_object parses the whole line again (about a fifth of the parse of a result line):
    # only a line whose text can hold the key needs it. A key is the literal text "record", or
    # written with a \u escape (the only escape that gives a letter).
    may_have_key = value.contains('"record"') | value.contains("\\u")
    kind = F.when(may_have_key, F.get_json_object(value, "$.record"))
    return F.coalesce(kind.startswith(WORKLOAD_RECORD_PREFIX), F.lit(False))


def workload_lines(lines: DataFrame) -> DataFrame:
    """The ``faults`` records among raw lines (column ``value``)."""
    return lines.where(is_workload_line(F.col("value"))).select("value")


# The record's schema and the ``record`` key (a ``faults`` record's kind): one parse of each
# line tells a result from a workload record. Setting the faults records apart before the parse
# (:func:`is_workload_line`, a search of each line's text for the key) cost a third as much CPU
# as the parse itself on 600-byte lines.
_PARSE_SCHEMA = T.StructType([*RESULT_SCHEMA.fields, T.StructField("record", T.StringType())])


def parse_lines(lines: DataFrame) -> DataFrame:
    """Parse each non-blank line against the explicit schema; ``reason`` is null for a valid
    record and says what is wrong otherwise. Keeps ``file``, ``block_start``, ``row_id``. A
    ``faults`` record (``workload``, read by :func:`workload_lines`) is neither: its ``reason``
    is null and the readers of these rows (:func:`valid_results`, :func:`file_stats`) leave it
    out. Not a filter here: Spark would push it below the parse and parse each line again."""
    rec = F.from_json(F.col("value"), _PARSE_SCHEMA)
    parsed = lines.where(F.trim(F.col("value")) != "").select(
        "file", "block_start", "row_id", "value", rec.alias("rec")
    )
    r = F.col("rec")
    missing = [F.when(r[f].isNull(), F.lit(f)) for f in REQUIRED_FIELDS]
    any_missing = F.lit(False)
    all_missing = F.lit(True)
    for f in REQUIRED_FIELDS:
        any_missing = any_missing | r[f].isNull()
        all_missing = all_missing & r[f].isNull()
    # By the parsed key; a line the schema could not convert as a whole (every field null) by the
    # key in its text, as workload_lines finds it.
    workload = F.coalesce(r["record"].startswith(WORKLOAD_RECORD_PREFIX),
                          F.when(all_missing, is_workload_line(F.col("value"))), F.lit(False))
    ts = F.try_to_timestamp(r["time"])
    is_json_object = F.from_json(F.col("value"), "map<string,string>").isNotNull()
    reason = (
        F.when(workload, F.lit(None).cast("string"))
        .when(all_missing & ~is_json_object, F.lit("not a valid JSON object"))
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
        workload.alias("workload"),
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


def is_record(parsed: DataFrame) -> Column:
    """A valid result record among the rows of :func:`parse_lines`."""
    return parsed["reason"].isNull() & ~parsed["workload"]


def valid_results(parsed: DataFrame) -> DataFrame:
    """The valid records of :func:`parse_lines`, one row per case execution."""
    return parsed.where(is_record(parsed)).select(*RESULTS_COLUMNS)


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
        F.count(F.when(is_record(parsed), 1)).alias("n_valid"),
        F.count(F.when(F.col("reason").isNotNull(), 1)).alias("n_malformed"),
    ).select(display_path(F.col("file")).alias("file"), "n_valid", "n_malformed")


def normal_runs(results: DataFrame) -> DataFrame:
    """Records of runs of the suite: what compliance, the matrix, flaky cases and regressions use."""
    return results.where(F.col("mutant").isNull())
