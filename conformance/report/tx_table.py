"""The seed's tx table ("Broker Semantics" → "Semantics of tx") as the report pipeline reads it.

The table itself is ``conformance/profiles/tx.toml``, the one copy the tx cases are generated from
too; this module only gives the pipeline typed views of it. One row per feature, keyed by the row
slug that tx cases carry in ``extra["tx_row"]`` (their ids are ``tx.<row-slug>[.<variant>]``); one
column per behaviour the document describes. Values are written as the document writes them:
``yes`` / ``no`` / ``immediate`` / ``on commit`` / ``undefined``. In profile inference
``undefined`` in a column matches any observation.
"""

from __future__ import annotations

from typing import Any, Final

from conformance.profiles import load_table

_TABLE: Final[dict[str, Any]] = load_table("tx")

COLUMNS: Final[tuple[str, ...]] = tuple(_TABLE["columns"])

COLUMN_LABELS: Final[dict[str, str]] = {name: col["label"] for name, col in _TABLE["columns"].items()}

# The suite's profile (conformance.model.cases.PROFILES) each column stands for: ``spec`` is the XML read
# strictly, ``rabbitmq`` is RabbitMQ 3.x, which the >= 2.8.0 column describes. The two older
# RabbitMQ columns have no profile of their own.
COLUMN_PROFILE: Final[dict[str, str | None]] = {
    name: col.get("profile") for name, col in _TABLE["columns"].items()
}

# Column names as table fields (Parquet and Spark column names avoid "<", ">", "." and "-").
COLUMN_FIELD: Final[dict[str, str]] = {name: col["field"] for name, col in _TABLE["columns"].items()}

UNDEFINED: Final[str] = _TABLE["undefined"]
VALUES: Final[frozenset[str]] = frozenset(_TABLE["values"])

ROW_LABELS: Final[dict[str, str]] = {slug: row["feature"] for slug, row in _TABLE["rows"].items()}

TX_TABLE: Final[dict[str, dict[str, str]]] = {
    slug: {c: row[c] for c in COLUMNS} for slug, row in _TABLE["rows"].items()
}

ROWS: Final[tuple[str, ...]] = tuple(TX_TABLE)


def matches(column_value: str, observed: str) -> bool:
    """Whether an observation agrees with a column's value (``undefined`` agrees with anything)."""
    return column_value == UNDEFINED or column_value == observed
