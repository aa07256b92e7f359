"""Many frames to the driver in one Spark action, and small tables written from the driver.

Each action costs a query plan, a job and its stages however few rows it returns, and one run's
report (a few hundred records) needs some fifty bounded frames (the page's views and every
table's row count) plus, for a small local input, every table. :func:`gather` puts them all into
one action: a union of one projection per frame, each row as the JSON text of its columns tagged
with the frame's index, and the driver turns each row back into the values
``Row.asDict(recursive=True)`` gives, by the frame's Spark schema.

:func:`write_parquet` writes a table the driver holds (rows computed by Spark) as the same Parquet
files Spark's own writer makes: the Spark schema in the footer, INT96 timestamps, snappy, a
``_SUCCESS`` marker. Only for small local outputs: large inputs and clusters keep executor writes.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

# to_json's defaults drop null fields and cut timestamps to milliseconds: keep both exact.
_JSON_OPTIONS_SQL = (
    """map('ignoreNullFields', 'false', 'timestampFormat', "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")""")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
# Spark's own Parquet writer stores its schema here; its reader takes the column types from it.
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"


def _rows(found: list[dict[str, Any]]) -> Any:
    return found


@dataclass(frozen=True)
class Collect:
    """A frame to bring to the driver: at most ``limit`` rows (None: all of them, for a whole
    table of a small input), turned into the view's value by ``finish`` (default: the rows as
    dicts, in the frame's order). ``aware``: timestamps as UTC-aware datetimes (rows for Arrow),
    not the naive local ones ``collect()`` gives."""

    frame: DataFrame
    limit: int | None
    finish: Callable[[list[dict[str, Any]]], Any] = _rows
    aware: bool = False


def gather(collects: Mapping[str, Collect], *, one_task: bool = False) -> dict[str, Any]:
    """Every frame of ``collects`` in one action; ``{key: finish(rows)}``.

    A frame's rows keep its order: each is one child of the union, and a sorted, limited child
    is one sorted partition, which the union passes through in place. ``one_task``: the last
    stage is one task (small inputs): each task deserialises the whole plan of the stage, which
    for some fifty children costs far more than computing a few hundred rows in each; each frame's
    ``limit`` is then applied in the driver (see below).
    """
    if not collects:
        return {}
    keys = list(collects)
    schemas: list[T.StructType] = []
    parts: list[DataFrame] = []
    for i, key in enumerate(keys):
        c = collects[key]
        # One task (a small input): the limit is applied here, in the driver. In Spark, a limit
        # over a sort plans a TakeOrderedAndProject, whose ordering is compiled to Java (twice:
        # planning it, and again in the task) whatever the session's codegen settings say, while
        # a plain sort is interpreted like every other expression.
        frame = c.frame if c.limit is None or one_task else c.frame.limit(c.limit)
        schemas.append(frame.schema)
        # One SQL expression: one call into the JVM, not one per column.
        parts.append(frame.selectExpr(f"{i} AS k", f"to_json(struct(*), {_JSON_OPTIONS_SQL}) AS j"))
    # Unions paired level by level: each union is analysed when made, so a chain of fifty
    # re-analyses a growing plan fifty times, a balanced tree only about six times.
    while len(parts) > 1:
        parts = [parts[i].unionAll(parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    union = parts[0].coalesce(1) if one_task else parts[0]
    found: list[list[dict[str, Any]]] = [[] for _ in keys]
    for k, text in union.collect():
        found[k].append(from_json(schemas[k], json.loads(text), aware=collects[keys[k]].aware))
    return {key: collects[key].finish(rows if collects[key].limit is None else rows[: collects[key].limit])
            for key, rows in zip(keys, found, strict=True)}


def from_json(dtype: T.DataType, value: Any, *, aware: bool = False) -> Any:
    """A value of ``dtype`` as ``to_json`` wrote it (parsed), back as PySpark's ``collect()``
    gives it: structs as dicts, timestamps as naive datetimes (``aware``: UTC-aware, for Arrow)."""
    if value is None:
        return None
    if isinstance(dtype, T.StructType):
        return {f.name: from_json(f.dataType, value.get(f.name), aware=aware) for f in dtype.fields}
    if isinstance(dtype, T.ArrayType):
        return [from_json(dtype.elementType, v, aware=aware) for v in value]
    if isinstance(dtype, T.MapType):
        return {from_json(dtype.keyType, k, aware=aware): from_json(dtype.valueType, v, aware=aware)
                for k, v in value.items()}
    if isinstance(dtype, T.TimestampType):
        stamp = datetime.fromisoformat(value)
        if aware:
            return stamp.astimezone(UTC)
        return T.TimestampType().fromInternal((stamp - _EPOCH) // _MICRO)
    if isinstance(dtype, T.DoubleType | T.FloatType):
        return float(value)  # Jackson writes NaN and the infinities as strings: float() reads both
    if isinstance(dtype, T.IntegralType | T.BooleanType | T.StringType):
        return value
    raise TypeError(f"gather: no conversion from JSON for a {dtype.simpleString()} column")


def write_parquet(schema: T.StructType, rows: list[dict[str, Any]], folder: Path) -> None:
    """``rows`` (of ``schema``, as :func:`from_json` gives them with ``aware=True``) as the Parquet
    table ``folder`` — replaced whole, like Spark's ``mode("overwrite")``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema, timezone="UTC").with_metadata({SPARK_SCHEMA_KEY: schema.json().encode()})
    table = pa.Table.from_pylist(rows, schema=arrow)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.mkdir(parents=True)
    try:
        pq.write_table(table, tmp / f"part-00000-{uuid.uuid4()}-c000.snappy.parquet", compression="snappy",
                       use_deprecated_int96_timestamps=True)
        (tmp / "_SUCCESS").touch()
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
