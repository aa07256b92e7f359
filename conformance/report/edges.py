"""The pipeline's edges: reading the inputs, the reference frames, writing tables.

Which files to read is decided without Spark, in :mod:`conformance.report.inputs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from conformance.model.spec import Rule, load_rules
from conformance.report import aggregates, parsing, tx_table

# Re-exported: callers that already use Spark name them here.
from conformance.report.inputs import RESULT_SUFFIXES as RESULT_SUFFIXES
from conformance.report.inputs import InputProblem as InputProblem
from conformance.report.inputs import resolve_inputs as resolve_inputs
from conformance.report.schema import LINES_SCHEMA, MUTANTS_SCHEMA, RULES_SCHEMA, TX_SEED_SCHEMA

MALFORMED_EXAMPLES = 50


def read_lines(spark: SparkSession, files: list[str]) -> DataFrame:
    """The raw lines of ``files`` (:data:`~conformance.report.schema.LINES_SCHEMA`)."""
    return spark.read.text(files).select(
        "value",
        F.input_file_name().alias("file"),
        F.input_file_block_start().alias("block_start"),
        F.monotonically_increasing_id().alias("row_id"),
    )


def driver_lines(spark: SparkSession, files: list[str]) -> DataFrame:
    """The raw lines of local ``files`` read by the driver, as :func:`read_lines` gives them
    (a file's URI, one split per file, row ids in file order): a small input's executors on a
    cluster need not see the driver's files."""
    import gzip

    from conformance.report.arrow_ingest import LINE_BREAKS

    rows: list[tuple[Any, ...]] = []
    for f in files:
        path = Path(f.removeprefix("file://")).absolute()
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        lines = LINE_BREAKS.split(raw.decode("utf-8", errors="replace"))
        if lines and lines[-1] == "":  # the text after the last line break is no line
            lines.pop()
        uri = path.as_uri()
        first = len(rows)
        rows.extend((text, uri, 0, first + i) for i, text in enumerate(lines))
    return local_frame(spark, rows, LINES_SCHEMA)


@dataclass
class Loaded:
    parsed: DataFrame  # persisted; unpersist when done
    results: DataFrame
    files: list[dict[str, object]]
    n_valid: int
    n_malformed: int
    malformed: DataFrame  # with file and line
    examples: list[dict[str, object]] = field(default_factory=list)
    workload: DataFrame | None = None  # the ``faults`` records' lines (``value``), if any input had some
    # Inputs known, from rows the driver parsed, to hold nothing (:func:`known_empty`). A table fed
    # by such an input is empty (tables.Table.source): not derived, only given its recorded schema.
    known_empty: frozenset[str] = frozenset()
    # Broker versions among the normal runs, when the driver parsed every row (None: unknown).
    n_brokers: int | None = None
    # The tables' aggregates when the input keeps them (a results store); None: computed from ``results``.
    partials: aggregates.Partials | None = None

    def close(self) -> None:
        self.parsed.unpersist()


def load_results(spark: SparkSession, files: list[str], *, in_driver: bool = False) -> Loaded:
    """Read and parse ``files``; raise InputProblem when a file holds no result record at all.
    ``in_driver``: the driver reads the lines (:func:`driver_lines`: small local inputs)."""
    lines = driver_lines(spark, files) if in_driver else read_lines(spark, files)
    parsed = parsing.parse_lines(lines).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        per_file = [r.asDict() for r in parsing.file_stats(parsed).collect()]  # one row per file
        not_results = [f for f in per_file if f["n_valid"] == 0 and f["n_malformed"] > 0]
        malformed = parsing.with_line_numbers(parsing.malformed_lines(parsed), parsing.split_stats(lines))
        n_malformed = sum(int(f["n_malformed"]) for f in per_file)
        n_valid = sum(int(f["n_valid"]) for f in per_file)
        examples: list[dict[str, object]] = []
        if n_malformed:
            examples = [
                r.asDict() for r in malformed.orderBy("file", "line").limit(MALFORMED_EXAMPLES).collect()
            ]
        if not_results:
            bad = str(not_results[0]["file"])
            first = next((e for e in examples if e["file"] == bad), None)
            detail = f" (line {first['line']}: {first['reason']})" if first else ""
            raise InputProblem(
                f"{bad} is not a results file: none of its {not_results[0]['n_malformed']} lines is a "
                f"result record{detail}"
            )
        if n_valid == 0:
            raise InputProblem(f"no result records in {len(files)} input file(s)")
    except BaseException:
        parsed.unpersist()
        raise
    return Loaded(
        parsed=parsed,
        results=parsing.valid_results(parsed),
        files=per_file,
        n_valid=n_valid,
        n_malformed=n_malformed,
        malformed=malformed,
        examples=examples,
        workload=parsing.workload_lines(lines),
    )


def load_rows(spark: SparkSession, files: list[str], per_file: list[list[dict[str, Any]]]) -> Loaded:
    """Rows parsed without Spark (:func:`conformance.report.arrow_ingest.plan_by_file`: every
    line a clean record, parsed as :func:`parsing.parse_lines` parses it) as the pipeline's input.

    The frame comes from an Arrow table in the driver: no scan, no parse job, no cache to fill.
    """
    import pyarrow as pa

    from conformance.report import arrow_ingest
    from conformance.report.schema import MALFORMED_SCHEMA, RESULTS_COLUMNS, RESULTS_STRUCT

    rows = [r for file_rows in per_file for r in file_rows]
    table = pa.Table.from_pylist([{c: r[c] for c in RESULTS_COLUMNS} for r in rows],
                                 schema=arrow_ingest.arrow_schema())
    results = spark.createDataFrame(table, RESULTS_STRUCT)
    malformed = local_frame(spark, [], MALFORMED_SCHEMA)  # every line was a record
    return Loaded(
        parsed=results,
        results=results,
        # As file_stats counts them: files with a record (a file of blank lines has none).
        files=[{"file": f, "n_valid": len(rs), "n_malformed": 0}
               for f, rs in zip(files, per_file, strict=True) if rs],
        n_valid=len(rows),
        n_malformed=0,
        malformed=malformed,
        known_empty=known_empty(rows),
        n_brokers=len({r["broker"] for r in rows if r["mutant"] is None}),
    )


def known_empty(rows: list[dict[str, Any]]) -> frozenset[str]:
    """Which inputs (:attr:`Loaded.known_empty`) ``rows``, every line of the input a result record
    (no ``faults`` workload line: :func:`arrow_ingest.plan_by_file` leaves those to Spark), lack:
    mutation runs, a second normal run (flaky cases need one), a second version of a product among
    normal runs (regressions need one; a null version is a version, as Spark's ``distinct`` has it)."""
    normal = [r for r in rows if r["mutant"] is None]
    versions: dict[Any, set[Any]] = {}
    for r in normal:
        versions.setdefault(r["broker_product"], set()).add(r["broker_version"])
    lacks = {
        "workload": True,
        "mutation": len(normal) == len(rows),
        "second_run": len({r["run_id"] for r in normal}) < 2,
        "second_version": all(len(v) < 2 for v in versions.values()),
    }
    return frozenset(k for k, v in lacks.items() if v)


def local_frame(spark: SparkSession, rows: list[tuple[Any, ...]], schema: T.StructType) -> DataFrame:
    """A small frame of the driver's ``rows`` (tuples in ``schema``'s order), handed to the JVM
    as an Arrow table.

    ``createDataFrame`` of a Python list makes a Python RDD: the first job that reads it starts
    PySpark's Python worker daemon, a second interpreter importing PySpark (over a second of a
    one-run report, on its critical path: the job's tasks wait for it). Through Arrow the rows
    are the JVM's at once. Without pyarrow, the list way.
    """
    try:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema
    except ImportError:
        return spark.createDataFrame(rows, schema)
    names = schema.fieldNames()
    table = pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in rows],
                                 schema=to_arrow_schema(schema, timezone="UTC"))  # the session's zone
    return spark.createDataFrame(table, schema)


def tx_seed_frame(spark: SparkSession) -> DataFrame:
    rows = [
        (row, ri, col, ci, tx_table.TX_TABLE[row][col])
        for ri, row in enumerate(tx_table.ROWS)
        for ci, col in enumerate(tx_table.COLUMNS)
    ]
    return local_frame(spark, rows, TX_SEED_SCHEMA)


def mutants_frame(spark: SparkSession) -> DataFrame:
    """This version's mutant catalogue (:data:`~conformance.report.schema.MUTANTS_SCHEMA`)."""
    from conformance.mutate.catalogue import CATALOGUE

    rows = [(m.id, m.category, m.description, m.rule, m.should, bool(m.equivalent), m.equivalent or None)
            for m in CATALOGUE]
    return local_frame(spark, rows, MUTANTS_SCHEMA)


def rules_frame(spark: SparkSession, rules: list[Rule] | None = None) -> DataFrame:
    rules = rules if rules is not None else load_rules()
    rows = [(r.id, r.class_name or r.domain, r.method, r.field, r.name, r.level, r.on_failure) for r in rules]
    return local_frame(spark, rows, RULES_SCHEMA)


def write_only(df: DataFrame, out_dir: Path, name: str) -> None:
    """Write ``df`` as ``<out_dir>/tables/<name>`` (Parquet): one Spark job, no count."""
    df.write.mode("overwrite").parquet(str(out_dir / "tables" / name))


def write_table(df: DataFrame, out_dir: Path, name: str) -> int:
    """Write ``df`` as ``<out_dir>/tables/<name>`` (Parquet) and return its row count."""
    path = out_dir / "tables" / name
    df.write.mode("overwrite").parquet(str(path))
    return df.sparkSession.read.parquet(str(path)).count()
