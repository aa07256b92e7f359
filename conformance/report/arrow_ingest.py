"""``ingest`` of small, clean results without a JVM: parse in Python, write Parquet with pyarrow.

Starting Spark costs seconds before any work (a JVM, a SparkContext), while one run of the suite
is a few hundred lines. For local inputs up to :data:`MAX_BYTES`, every line is parsed here with
the rules :func:`conformance.report.parsing.parse_lines` applies; when every non-blank line is a
record whose every stored field has exactly the JSON type the schema names, the rows are written
as the store's ``results/ingest=<id>/`` partition (the columns and types of
:data:`~conformance.report.schema.RESULTS_STRUCT`) and committed through the same manifest, so
the store's reader cannot tell the two writers apart (a test compares the datasets row by row).

Anything this path does not reproduce exactly is left to Spark, whole: a malformed line (Spark
keeps it aside with its file and line), a value of another JSON type than the schema's (Spark
converts it by its own rules), a timestamp in a form other than ISO 8601 with ``Z`` or an offset,
a control character Jackson would escape differently, a URI input, a file over the size bound.
:func:`plan` says which, in one line, and returns None.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from conformance.model.results import REQUIRED_FIELDS
from conformance.report.schema import MUTATION_COLUMNS, RESULT_SCHEMA, RESULTS_COLUMNS, VERDICTS

MAX_BYTES = 64 * 1024 * 1024  # of input, beyond which Spark's parallel parse is the better tool

_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$")
LINE_BREAKS = re.compile(r"\r\n|\r|\n")  # how Hadoop's line reader splits text
# Jackson writes these control characters as short escapes, like Python; any other one it writes
# as \u00XX with upper-case hex (Python: lower-case), so such a string is left to Spark.
_SHORT_ESCAPES = frozenset("\b\t\n\f\r")
_STR_FIELDS = tuple(f.name for f in RESULT_SCHEMA.fields if f.dataType.typeName() == "string")
_EXTRA_KEYS = ("tx_row", "tx_observed", "trace", *MUTATION_COLUMNS)


class NotExact(ValueError):
    """This line is not reproduced exactly here; Spark ingests the inputs instead."""


def _available() -> bool:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def _check_text(s: str) -> None:
    if any(ord(c) < 0x20 and c not in _SHORT_ESCAPES for c in s):
        raise NotExact("a control character in a nested value")
    _encodable(s)


def _jackson(value: Any) -> str:
    """A non-string JSON value as Spark stores it in a string column: Jackson's compact text."""

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                _check_text(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str):
            _check_text(v)
        elif isinstance(v, float):
            raise NotExact(
                "a floating point number in a nested value"
            )  # Java and Python print them differently
        elif not (v is None or isinstance(v, bool | int)):
            raise NotExact(f"a {type(v).__name__} in a nested value")

    walk(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise NotExact("a JSON object with a repeated key")
    return dict(pairs)


def parse_line(text: str) -> dict[str, Any]:
    """One non-blank line → the store's row (RESULTS_COLUMNS), or NotExact."""
    rec = _load(text)
    row = _scalars(rec)
    missing = [f for f in REQUIRED_FIELDS if row.get(f) is None]
    if missing:
        raise NotExact(f"missing field(s) {', '.join(missing)}")
    if row["verdict"] not in VERDICTS:
        raise NotExact(f"unknown verdict {row['verdict']}")
    row["ts"] = _timestamp(row["time"])
    row["broker"] = f"{row['broker_product']}@{row['broker_version']}"
    _extras(rec, row)
    for name in (*_STR_FIELDS, *_EXTRA_KEYS):
        if row.get(name) is not None:
            _encodable(row[name])
    for r in row["rules"] or ():
        _encodable(r)
    return row


def _load(text: str) -> dict[str, Any]:
    try:
        rec = json.loads(text, object_pairs_hook=_no_duplicates,
                         parse_constant=lambda c: (_ for _ in ()).throw(NotExact(f"{c} in the line")))
    except NotExact:
        raise
    except ValueError as exc:
        raise NotExact(f"not a JSON line ({exc})") from exc
    if not isinstance(rec, dict):
        raise NotExact("not a JSON object")
    return rec


def _scalars(rec: dict[str, Any]) -> dict[str, Any]:
    """The top-level fields, each of the type Spark's reader would give it."""
    row: dict[str, Any] = {}
    for name in _STR_FIELDS:
        v = rec.get(name)
        if v is not None and not isinstance(v, str):
            raise NotExact(f"{name} is not a string")
        row[name] = v
    rules = rec.get("rules")
    if rules is not None and not (isinstance(rules, list) and all(isinstance(r, str) for r in rules)):
        raise NotExact("rules is not a list of strings")
    row["rules"] = rules
    d = rec.get("duration_s")
    if d is not None and (isinstance(d, bool) or not isinstance(d, int | float) or not math.isfinite(d)):
        raise NotExact("duration_s is not a finite number")
    row["duration_s"] = None if d is None else float(d)
    sv = rec.get("schema")
    if sv is not None and (isinstance(sv, bool) or not isinstance(sv, int) or not -2**31 <= sv < 2**31):
        raise NotExact("schema is not a 32-bit integer")
    row["schema"] = sv
    return row


def _timestamp(time_text: str) -> datetime:
    if not _TIME.match(time_text):
        raise NotExact(f"time {time_text!r} is not in the ISO 8601 form this path reads")
    try:
        return datetime.fromisoformat(time_text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise NotExact(f"time {time_text!r}: {exc}") from exc


def _extras(rec: dict[str, Any], row: dict[str, Any]) -> None:
    """The columns taken from ``extra`` (nested values as Spark's Jackson text)."""
    extra = rec.get("extra")
    if extra is not None and not isinstance(extra, dict):
        raise NotExact("extra is not an object")
    extra = extra or {}
    for key in _EXTRA_KEYS:
        v = extra.get(key)
        row[key] = v if v is None or isinstance(v, str) else _jackson(v)
    if row["tx_observed"] is not None:
        if not row["tx_observed"].isascii():
            raise NotExact("a non-ASCII tx_observed (Java and Python lower-case differently)")
        row["tx_observed"] = row["tx_observed"].strip(" ").lower()  # Spark's trim() removes spaces only


def _encodable(s: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NotExact("a lone surrogate in a string") from exc


def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotExact(f"{path} is not UTF-8") from exc


def plan(files: list[str], say: Callable[[str], None]) -> list[dict[str, Any]] | None:
    """Every row of ``files`` when this path reproduces Spark's exactly, else None (said why)."""
    per_file = plan_by_file(files, say)
    return None if per_file is None else [r for rows in per_file for r in rows]


def plan_by_file(
    files: list[str], say: Callable[[str], None], who: str = "ingest"
) -> list[list[dict[str, Any]]] | None:
    """:func:`plan`, the rows of each file apart (in the order of ``files``); ``who`` starts the
    line that says why Spark must parse instead."""
    if not _available():
        say(f"{who}: pyarrow is not installed; using Spark")
        return None
    if any(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", f) and not f.startswith("file://") for f in files):
        say(f"{who}: a URI input; using Spark")
        return None
    paths = [Path(f.removeprefix("file://")) for f in files]
    size = sum(p.stat().st_size for p in paths)
    if size > MAX_BYTES:
        say(f"{who}: {size / 2**20:.0f} MiB of input; using Spark")
        return None
    out: list[list[dict[str, Any]]] = []
    for p in paths:
        rows: list[dict[str, Any]] = []
        try:
            lines = LINE_BREAKS.split(_read_text(p))
            for n, text in enumerate(lines, 1):
                if text.strip(" ") == "":  # Spark's trim() removes spaces only
                    continue
                try:
                    rows.append(parse_line(text))
                except NotExact as exc:
                    raise NotExact(f"{p}:{n}: {exc}") from exc
        except NotExact as exc:
            say(f"{who}: {exc}; using Spark (it keeps such lines aside exactly)")
            return None
        out.append(rows)
    return out


def arrow_schema() -> Any:
    import pyarrow as pa

    from conformance.report.schema import RESULTS_STRUCT

    def typ(name: str) -> Any:
        return {"array": pa.list_(pa.string()), "double": pa.float64(), "integer": pa.int32(),
                "timestamp": pa.timestamp("us", tz="UTC"), "string": pa.string()}[name]

    return pa.schema(
        [pa.field(f.name, typ(f.dataType.typeName()), nullable=True) for f in RESULTS_STRUCT.fields]
    )


def write_partition(rows: list[dict[str, Any]], folder: Path) -> None:
    """``rows`` as one Parquet file in ``folder`` (the ingest's partition), written under a
    hidden name and renamed: a reader never sees half a file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema()
    table = pa.Table.from_pylist([{c: r[c] for c in RESULTS_COLUMNS} for r in rows], schema=schema)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    tmp = folder / f".{name}.tmp"
    pq.write_table(table, tmp, compression="snappy")
    os.replace(tmp, folder / name)


def new_ingest_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
