"""The seed's tx table ("Broker Semantics" → "Semantics of tx") as data.

One row per feature, keyed by the row slug that tx cases carry in ``extra["tx_row"]`` (their ids
are ``tx.<row-slug>[.<variant>]``); one column per behaviour the document describes. Values are
written as the document writes them: ``yes`` / ``no`` / ``immediate`` / ``on commit`` /
``undefined``. In profile inference ``undefined`` in a column matches any observation.
"""

from __future__ import annotations

from typing import Final

COLUMNS: Final[tuple[str, ...]] = ("amqp-0-9-1", "rabbitmq<2.6", "rabbitmq-2.6-2.7.1", "rabbitmq>=2.8")

COLUMN_LABELS: Final[dict[str, str]] = {
    "amqp-0-9-1": "AMQP 0-9-1",
    "rabbitmq<2.6": "RabbitMQ < 2.6.0",
    "rabbitmq-2.6-2.7.1": "RabbitMQ 2.6.0-2.7.1",
    "rabbitmq>=2.8": "RabbitMQ >= 2.8.0",
}

# The suite's profile (conformance/profiles/, conformance.cases.PROFILES) each column stands for:
# ``spec`` is the XML read strictly, ``rabbitmq`` is RabbitMQ 3.x, which the >= 2.8.0 column
# describes. The two older RabbitMQ columns have no profile of their own.
COLUMN_PROFILE: Final[dict[str, str | None]] = {
    "amqp-0-9-1": "spec",
    "rabbitmq<2.6": None,
    "rabbitmq-2.6-2.7.1": None,
    "rabbitmq>=2.8": "rabbitmq",
}

# Column names as table fields (Parquet and Spark column names avoid "<", ">", "." and "-").
COLUMN_FIELD: Final[dict[str, str]] = {
    "amqp-0-9-1": "amqp_0_9_1",
    "rabbitmq<2.6": "rabbitmq_lt_2_6",
    "rabbitmq-2.6-2.7.1": "rabbitmq_2_6_to_2_7_1",
    "rabbitmq>=2.8": "rabbitmq_ge_2_8",
}

UNDEFINED: Final = "undefined"
VALUES: Final[frozenset[str]] = frozenset({"yes", "no", "immediate", "on commit", UNDEFINED})

ROW_LABELS: Final[dict[str, str]] = {
    "publish": "transactional basic.publish",
    "ack": "transactional basic.ack",
    "reject": "transactional basic.reject",
    "declare-delete-bind": "transactional exchange/queue/binding creation/deletion",
    "consume-get": "transactional consuming/getting of messages",
    "atomicity-single-queue": "atomicity in single queue",
    "atomicity-multi-queue": "atomicity across multiple queues",
    "error-detection": "error detection (e.g. invalid exchange)",
    "no-route-return": "sending of 'no_route' basic.return",
    "effect-visibility": "effect visibility / responsibility transfer / durability",
}


def _row(a: str, b: str, c: str, d: str) -> dict[str, str]:
    return dict(zip(COLUMNS, (a, b, c, d), strict=True))


TX_TABLE: Final[dict[str, dict[str, str]]] = {
    "publish": _row("yes", "yes", "yes", "yes"),
    "ack": _row("yes", "yes", "yes", "yes"),
    "reject": _row("no", "no", "no", "yes"),
    "declare-delete-bind": _row("no", "no", "no", "no"),
    "consume-get": _row("no", "no", "no", "no"),
    "atomicity-single-queue": _row("yes", "no", "no", "no"),
    "atomicity-multi-queue": _row("no", "no", "no", "no"),
    "error-detection": _row("undefined", "immediate", "immediate", "immediate"),
    "no-route-return": _row("undefined", "immediate", "on commit", "on commit"),
    "effect-visibility": _row("undefined", "on commit", "on commit", "on commit"),
}

ROWS: Final[tuple[str, ...]] = tuple(TX_TABLE)


def matches(column_value: str, observed: str) -> bool:
    """Whether an observation agrees with a column's value (``undefined`` agrees with anything)."""
    return column_value == UNDEFINED or column_value == observed
