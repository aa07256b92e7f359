"""One action for many frames (gather) gives what collect() gives, and tables written from the
driver (write_parquet) read back as Spark's own writes do: same schema, same rows."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from conformance.report.gather import SPARK_SCHEMA_KEY, Collect, gather, write_parquet

SCHEMA = T.StructType([
    T.StructField("id", T.IntegerType(), False),
    T.StructField("name", T.StringType()),
    T.StructField("n", T.LongType()),
    T.StructField("x", T.DoubleType()),
    T.StructField("ok", T.BooleanType()),
    T.StructField("ts", T.TimestampType()),
    T.StructField("tags", T.ArrayType(T.StringType())),
    T.StructField("kills", T.ArrayType(T.StructType([
        T.StructField("case_id", T.StringType()), T.StructField("at", T.TimestampType())]))),
    T.StructField("extra", T.MapType(T.StringType(), T.StringType())),
])
ROWS = [
    (1, "a \"quoted\" é\n", 2**40, 0.1, True, datetime(2024, 5, 1, 2, 3, 4, 123456), ["x", None],
     [("c", datetime(2024, 5, 1, 0, 0, 0, 1))], {"k": "v", "n": None}),
    (2, None, None, None, None, None, None, None, None),
    (3, "", -1, -0.0, False, datetime(1999, 12, 31, 23, 59, 59), [], [], {}),
    (4, "big", 0, 1e300, True, datetime(2024, 5, 1), ["y"], [(None, None)], {"": ""}),
]


def frame(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(ROWS, SCHEMA)


@pytest.mark.parametrize("one_task", [True, False], ids=["one-task", "tasks"])
def test_gather_gives_each_frame_as_collect_gives_it(spark: SparkSession, one_task: bool) -> None:
    df = frame(spark)
    specials = spark.createDataFrame([(float("nan"),), (float("inf"),), (float("-inf"),)], "x double")
    found = gather({
        "all": Collect(df.orderBy(F.col("id").desc()), 100),
        "two": Collect(df.orderBy("id"), 2),
        "count": Collect(df.agg(F.count(F.lit(1)).alias("n")), 1, lambda rs: rs[0]["n"]),
        "none": Collect(df.where("id > 99"), 10),
        "specials": Collect(specials, 10, lambda rs: [r["x"] for r in rs]),
    }, one_task=one_task)
    assert found["all"] == [r.asDict(recursive=True) for r in df.orderBy(F.col("id").desc()).collect()]
    assert found["two"] == [r.asDict(recursive=True) for r in df.orderBy("id").limit(2).collect()]
    assert found["count"] == 4 and found["none"] == []
    nan, inf, minus_inf = found["specials"]
    assert math.isnan(nan) and inf == math.inf and minus_inf == -math.inf


def test_a_table_written_from_the_driver_reads_back_as_sparks_own(
        spark: SparkSession, tmp_path: Path) -> None:
    df = frame(spark)
    df.write.parquet(str(tmp_path / "spark"))
    rows: Any = gather({"t": Collect(df, None, aware=True)})["t"]
    write_parquet(df.schema, rows, tmp_path / "driver")
    ours, theirs = spark.read.parquet(str(tmp_path / "driver")), spark.read.parquet(str(tmp_path / "spark"))
    assert ours.schema == theirs.schema
    # what assert_same_tables compares instead of a read by Spark
    assert spark_schema(tmp_path / "driver") == ours.schema == spark_schema(tmp_path / "spark")
    assert sorted(map(repr, ours.collect())) == sorted(map(repr, theirs.collect()))
    arrow_ours, arrow_theirs = pq.read_table(tmp_path / "driver"), pq.read_table(tmp_path / "spark")
    assert arrow_ours.schema.remove_metadata() == arrow_theirs.schema.remove_metadata()
    assert (tmp_path / "driver" / "_SUCCESS").is_file()
    # Written again: replaced whole, as Spark's overwrite replaces the folder.
    write_parquet(df.schema, rows[:1], tmp_path / "driver")
    assert spark.read.parquet(str(tmp_path / "driver")).count() == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def spark_schema(folder: Path) -> T.StructType:
    """The schema ``spark.read.parquet(folder)`` gives, without Spark: the one Spark keeps in each
    file's footer (``SPARK_SCHEMA_KEY``; every part file of a table holds the same), every field
    made nullable as Spark makes a file source's schema. A read by Spark runs a job to read that
    footer: a second or more per table on a loaded machine, for every table of a comparison."""
    found = set()
    for part in sorted(folder.glob("*.parquet")):
        meta = pq.read_schema(part).metadata or {}
        found.add(meta[SPARK_SCHEMA_KEY])
    assert len(found) == 1, (folder, found)

    def nullable(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (True if k in ("nullable", "containsNull", "valueContainsNull") else nullable(v))
                    for k, v in node.items()}
        return [nullable(v) for v in node] if isinstance(node, list) else node

    return T.StructType.fromJson(nullable(json.loads(found.pop())))


def assert_same_tables(a: Path, b: Path, *, nullability: bool = True) -> None:
    """Every Parquet table of report ``a`` reads back as the same one of report ``b``: same
    Spark schema, same rows, and in the files the same column types (and nullability, unless
    ``nullability`` is off: a report from a store reads its input as Parquet, every column
    nullable, so a column computed from a required input column is nullable there).

    The rows are compared as Parquet holds them (pyarrow), the Spark schema as the footers hold
    it (``spark_schema``, checked against Spark's own read below): with the same Spark schema and
    the same column types in the files, Spark reads equal files as equal rows, and a Spark job
    per table and side would cost minutes per comparison on a loaded machine."""
    names = sorted(p.name for p in (a / "tables").iterdir())
    assert names == sorted(p.name for p in (b / "tables").iterdir())
    for name in names:
        assert spark_schema(a / "tables" / name) == spark_schema(b / "tables" / name), name
        pa_, pb = pq.read_table(a / "tables" / name), pq.read_table(b / "tables" / name)
        assert sorted(map(repr, pa_.to_pylist())) == sorted(map(repr, pb.to_pylist())), name
        assert [(f.name, f.type, f.nullable or not nullability) for f in pa_.schema] == [
            (f.name, f.type, f.nullable or not nullability) for f in pb.schema], name
