"""Realistic synthetic results for the benchmark: many brokers × versions × nightly runs × cases.

Case ids come from :func:`conformance.model.cases.all_cases` when scenario modules exist; otherwise from
a built-in list of ~150 ids over the suite's areas. Generation runs on Spark (``range`` →
columns → ``to_json``), so a million rows take seconds and never pass through the driver.

What the data holds, so a report over it has something to find: each broker version has a
stable base verdict per case, the newest version of some products breaks a few cases
(regressions), about 0.3 % of executions flip to TIMEOUT or ERROR (flaky cases), tx cases
observe the tx table column of the broker's lineage (with a few deviations), and ``malformed``
lines (cut short) are mixed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from conformance.report import tx_table
from conformance.report.parsing import rec_with_derived
from conformance.report.schema import RESULT_SCHEMA, RESULTS_COLUMNS


@dataclass(frozen=True)
class SynthCase:
    id: str
    area: str
    level: str
    rules: tuple[str, ...]
    client: str
    tx_row: str | None = None


_AREA_RULES: dict[str, tuple[str, ...]] = {
    "confirms": (),
    "tx": ("tx.commit/transacted", "tx.rollback/transacted", "tx/not-multiple-queues"),
    "ordering": ("basic/01", "basic/02", "basic/03"),
    "reject": ("basic.reject/01", "basic.reject/02", "basic.reject/03"),
    "nack": (),
    "recover": ("basic.recover/01", "basic.recover-async/01"),
    "exclusive": ("queue.declare/exclusive", "basic.consume/01"),
    "acks": ("basic.ack/exists", "delivery-tag/channel-local", "delivery-tag/non-zero"),
    "returns": ("basic.publish/01", "basic.publish/must-exist"),
    "qos": ("basic.qos/01",),
    "errors": ("channel.close/stability", "connection.close/stability", "channel.open/state"),
    "durability": ("queue.declare/persistence", "exchange.declare/support"),
}
_SLUGS: dict[str, tuple[str, ...]] = {
    "confirms": (
        "select-ok",
        "ack-after-route",
        "multiple-ack-covers-range",
        "nack-on-internal-error",
        "persistent-after-fsync",
        "unroutable-acked",
        "mandatory-return-before-ack",
        "tx-then-confirm-406",
        "confirm-then-tx-406",
        "tags-start-at-one",
        "tags-per-channel",
        "nowait-select",
        "ack-order-monotonic",
        "many-publishers",
    ),
    "ordering": (
        "single-channel-fifo",
        "requeue-keeps-position",
        "channel-close-requeue-order",
        "multi-consumer-queue-order",
        "get-after-consume",
        "priority-free-fifo",
        "redelivered-flag-set",
        "two-exchanges-one-queue",
        "recover-requeue-order",
        "nack-requeue-order",
        "reject-requeue-order",
        "restart-order",
    ),
    "reject": (
        "requeue-head",
        "requeue-false-drops",
        "unknown-tag-406",
        "double-reject-406",
        "reject-after-ack-406",
        "reject-redelivered-flag",
        "reject-on-other-channel-406",
        "reject-dead-letter",
        "reject-in-tx-deferred",
        "reject-autoack-406",
        "reject-tag-zero",
        "reject-many-requeue",
    ),
    "nack": (
        "multiple-covers-range",
        "tag-zero-multiple-all",
        "requeue-false-drops",
        "unknown-tag-406",
        "nack-single",
        "nack-redelivered-flag",
        "nack-order-preserved",
        "broker-nack-on-confirm",
        "nack-after-ack-406",
        "nack-autoack-406",
        "nack-mixed-channels",
    ),
    "recover": (
        "requeue-true-redelivers",
        "requeue-false-540",
        "recover-async-deprecated",
        "recover-ok-sync",
        "recover-no-unacked",
        "recover-redelivered-flag",
        "recover-after-cancel",
        "recover-with-qos",
        "recover-tx",
        "recover-multiple-consumers",
    ),
    "exclusive": (
        "other-connection-405",
        "deleted-on-close",
        "durable-flag-ignored",
        "consume-exclusive-403",
        "passive-other-connection-405",
        "delete-other-connection-405",
        "bind-other-connection-405",
        "purge-other-connection-405",
        "server-named-exclusive",
        "redeclare-same-connection",
        "exclusive-consumer-second-403",
        "exclusive-after-restart-gone",
    ),
    "acks": (
        "double-ack-406",
        "ack-zero-multiple-all",
        "multiple-covers-range",
        "unknown-tag-406",
        "ack-other-channel-406",
        "autoack-no-ack-needed",
        "ack-after-channel-close",
        "ack-tag-zero-single-406",
        "ack-redelivered",
        "ack-out-of-order",
        "ack-ordering-many",
        "get-ack",
        "consume-ack-loop",
        "ack-after-cancel",
    ),
    "returns": (
        "mandatory-no-route",
        "mandatory-routed-no-return",
        "immediate-not-implemented",
        "return-before-ack",
        "return-reply-code-312",
        "return-headers-kept",
        "default-exchange-no-queue",
        "alternate-exchange",
        "mandatory-in-tx-on-commit",
        "return-body-intact",
        "return-fanout-no-binding",
    ),
    "qos": (
        "prefetch-count-limits",
        "prefetch-zero-unlimited",
        "prefetch-size-not-implemented",
        "global-per-channel",
        "global-per-consumer",
        "qos-change-mid-flight",
        "qos-get-not-limited",
        "qos-after-ack-delivers",
        "qos-with-nack",
        "qos-many-consumers",
    ),
    "errors": (
        "unknown-exchange-404",
        "redeclare-mismatch-406",
        "frame-order-503",
        "channel-reuse-after-close",
        "connection-close-ok",
        "channel-close-ok",
        "method-on-closed-channel-504",
        "unknown-class-540",
        "heartbeat-timeout",
        "frame-max-exceeded-501",
        "access-refused-403",
        "vhost-not-found",
        "channel-max-exceeded",
    ),
    "durability": (
        "durable-queue-survives",
        "persistent-message-survives",
        "transient-lost",
        "durable-exchange-survives",
        "binding-survives",
        "unacked-redelivered-after-restart",
        "confirm-then-restart-kept",
        "tx-commit-then-restart-kept",
        "auto-delete-after-restart",
        "exclusive-gone-after-restart",
    ),
}
_TX_VARIANTS: dict[str, tuple[str, ...]] = {
    "publish": ("rollback-discards", "commit-delivers"),
    "ack": ("rollback-undoes", "commit-applies"),
    "reject": ("rollback-undoes", "commit-applies"),
    "declare-delete-bind": ("queue-survives-rollback", "delete-not-undone"),
    "consume-get": ("get-autoack-not-undone", "consume-not-requeued"),
    "atomicity-single-queue": ("restart-during-commit",),
    "atomicity-multi-queue": ("restart-during-commit",),
    "error-detection": ("missing-exchange", "unknown-tag"),
    "no-route-return": ("mandatory-unroutable",),
    "effect-visibility": ("visible-after-commit-ok",),
}
_LEVELS: tuple[str, ...] = ("MUST", "MUST", "MUST", "SHOULD", "SHOULD", "MAY", "INFO")
_CLIENTS: tuple[str, ...] = ("raw", "raw", "pika", "aio-pika")

# (product, platform, versions oldest first, the tx column its behaviour follows)
PRODUCTS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    (
        "RabbitMQ",
        "Erlang/OTP 26.2",
        ("3.9.29", "3.10.8", "3.11.28", "3.12.14", "3.13.7", "4.0.5"),
        "rabbitmq>=2.8",
    ),
    ("garagemq", "go1.22", ("0.1.0", "0.2.0", "0.3.0", "0.4.1"), "rabbitmq<2.6"),
    ("LavinMQ", "Crystal 1.13", ("1.2.14", "1.3.0", "2.0.0", "2.1.0"), "rabbitmq>=2.8"),
    ("ActiveMQ Artemis", "Java 17", ("2.31.2", "2.33.0", "2.37.0"), "amqp-0-9-1"),
    ("Qpid Broker-J", "Java 17", ("8.0.6", "9.1.0", "9.2.0"), "amqp-0-9-1"),
    ("chanamq", "Scala 2.13", ("0.4.0", "0.5.0"), "rabbitmq-2.6-2.7.1"),
    ("reference", "CPython 3.11", ("0.1.0", "0.2.0", "0.3.0"), "rabbitmq>=2.8"),
)


def builtin_cases() -> list[SynthCase]:
    out: list[SynthCase] = []
    for area, slugs in _SLUGS.items():
        rules = _AREA_RULES[area]
        for i, slug in enumerate(slugs):
            level = "EXTENSION" if area == "confirms" else _LEVELS[i % len(_LEVELS)]
            cited = (rules[i % len(rules)],) if rules else ()
            out.append(SynthCase(f"{area}.{slug}", area, level, cited, _CLIENTS[i % len(_CLIENTS)]))
    for row, variants in _TX_VARIANTS.items():
        for i, v in enumerate(variants):
            rules = _AREA_RULES["tx"]
            out.append(SynthCase(f"tx.{row}.{v}", "tx", "MUST", (rules[i % len(rules)],), "raw", row))
    return out


def suite_cases() -> list[SynthCase]:
    """The suite's registered cases when scenario modules exist, else the built-in list."""
    try:
        from conformance.scenarios import all_cases

        cases = all_cases()
    except (ImportError, ValueError):  # scenario modules mid-edit must not stop a benchmark
        cases = []
    if not cases:
        return builtin_cases()
    out = []
    for c in cases:
        tx_row = None
        if c.area == "tx":
            slug = c.id.split(".")[1]
            tx_row = slug if slug in tx_table.TX_TABLE else None
        out.append(SynthCase(c.id, c.area, c.level.value, tuple(c.rules), c.client, tx_row))
    return out


def _pick(options: list[str], index: Column) -> Column:
    return F.element_at(F.array(*[F.lit(o) for o in options]), (index % len(options)).cast("int") + 1)


def generate(
    spark: SparkSession, rows: int, *, seed: int = 7, malformed: int = 3, cases: list[SynthCase] | None = None
) -> DataFrame:
    """``rows`` result lines (JSON text in column ``value``), ``malformed`` of them cut short."""
    df, record = _records(spark, rows, seed=seed, cases=cases)
    text = F.to_json(record)
    cut = _cut_short(rows, malformed)
    if cut is not None:
        # Cut some lines short (a writer killed mid-line), spread over the data.
        text = F.when(cut, F.substring(text, 1, 57)).otherwise(text)
    return df.select(text.alias("value"))


def generate_rows(
    spark: SparkSession, rows: int, *, seed: int = 7, malformed: int = 3, cases: list[SynthCase] | None = None
) -> DataFrame:
    """The result rows (:data:`~conformance.report.schema.RESULTS_COLUMNS`) an ingest of
    :func:`generate`'s lines gives (the lines cut short are no rows), made without the JSON: each
    record typed as the parse types it (:data:`~conformance.report.schema.RESULT_SCHEMA`), its
    derived columns by the parse's own :func:`~conformance.report.parsing.rec_with_derived`.
    What a store of 100M rows is made from without 60 GB of JSONL."""
    df, record = _records(spark, rows, seed=seed, cases=cases)
    cut = _cut_short(rows, malformed)
    if cut is not None:
        df = df.where(~cut)
    # The record a column first: a field read off the struct expression itself copies all of it
    # into the plan, once per read (analysing such a plan took minutes).
    made = df.select(record.alias("rec"))
    fields = set(made.schema["rec"].dataType.fieldNames())  # type: ignore[attr-defined]
    typed = made.select(F.struct(*[
        (F.col("rec")[f.name] if f.name in fields else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in RESULT_SCHEMA.fields
    ]).alias("r"))
    r = F.col("r")
    return typed.select(*rec_with_derived(r, F.try_to_timestamp(r["time"]))).select(*RESULTS_COLUMNS)


def _cut_short(rows: int, malformed: int) -> Column | None:
    """Which of ``rows`` lines :func:`generate` cuts short (``malformed`` of them, spread)."""
    if malformed <= 0 or rows < malformed:
        return None
    step = rows // malformed
    return F.col("id") % step == step // 2


def _records(spark: SparkSession, rows: int, *, seed: int, cases: list[SynthCase] | None
             ) -> tuple[DataFrame, Column]:
    """The generator's frame (``id`` and what a record is made of) and the record (a struct
    column over it: the fields a line holds)."""
    cases = cases or suite_cases()
    brokers = [(p, plat, v, vi, len(vs), col) for p, plat, vs, col in PRODUCTS for vi, v in enumerate(vs)]
    case_df = spark.createDataFrame(
        [(i, c.id, c.area, c.level, list(c.rules), c.client, c.tx_row) for i, c in enumerate(cases)],
        (
            "case_idx int, case_id string, area string, level string, rules array<string>, client "
            "string, tx_row string"
        ),
    )
    broker_df = spark.createDataFrame(
        [(i, p, plat, v, vi, n, col) for i, (p, plat, v, vi, n, col) in enumerate(brokers)],
        (
            "broker_idx int, broker_product string, broker_platform string, broker_version string, "
            "version_idx int, n_versions int, tx_column string"
        ),
    )
    seed_map = F.create_map(
        *[
            x
            for row, cols in tx_table.TX_TABLE.items()
            for c, v in cols.items()
            for x in (F.lit(f"{c}|{row}"), F.lit(v))
        ]
    )
    n_cases, n_brokers = len(cases), len(brokers)
    base = (
        spark.range(rows)
        .select(
            F.col("id"),
            (F.col("id") % n_cases).cast("int").alias("case_idx"),
            F.floor(F.col("id") / n_cases).alias("run_idx"),
        )
        .select(
            "*",
            (F.col("run_idx") % n_brokers).cast("int").alias("broker_idx"),
            F.floor(F.col("run_idx") / n_brokers).alias("night"),
        )
    )
    df = base.join(F.broadcast(case_df), "case_idx").join(F.broadcast(broker_df), "broker_idx")

    h = F.abs(F.xxhash64(F.lit(seed), "broker_product", "broker_version", "case_id")) % 1000
    lineage = F.abs(F.xxhash64(F.lit(seed), "broker_product", "case_id")) % 1000
    jitter = F.abs(F.xxhash64(F.lit(seed + 1), "id")) % 1000
    newest = F.col("version_idx") == F.col("n_versions") - 1
    stable = (
        F.when(F.col("level") == "INFO", F.lit("INFORMATIONAL"))
        .when(newest & (h < 25), F.lit("FAIL"))  # the newest release breaks a few cases
        .when(lineage < 820, F.lit("PASS"))
        .when(lineage < 880, F.lit("FAIL"))
        .when(lineage < 930, F.lit("NON_STRICT"))
        .when(lineage < 975, F.lit("UNSUPPORTED"))
        .otherwise(F.lit("INFORMATIONAL"))
    )
    column_value = seed_map[F.concat_ws("|", "tx_column", "tx_row")]
    alt = _pick(["yes", "no", "immediate", "on commit"], F.abs(F.xxhash64("broker_product", "tx_row")))
    tx_observed = F.when(F.col("tx_row").isNull(), F.lit(None)).when(lineage < 60, alt).when(
        column_value == tx_table.UNDEFINED, F.lit("undefined")
    ).otherwise(column_value)
    expected_tx = seed_map[F.concat_ws("|", F.lit("rabbitmq>=2.8"), "tx_row")]
    tx_verdict = F.when(expected_tx == tx_observed, F.lit("PASS")).when(
        tx_observed == tx_table.UNDEFINED, F.lit("INFORMATIONAL")
    ).otherwise(F.lit("FAIL"))
    verdict0 = F.when(F.col("tx_row").isNotNull(), tx_verdict).otherwise(stable)
    verdict = F.when(jitter < 2, F.lit("TIMEOUT")).when(jitter < 3, F.lit("ERROR")).otherwise(verdict0)
    run_id = F.format_string(
        "2024%04dT0200Z-%s-%s", F.col("night").cast("int"), F.col("broker_product"), F.col("broker_version")
    )
    ts = F.timestamp_seconds(F.lit(1_704_067_200) + F.col("night") * 86_400 + F.col("case_idx") * 3)
    observed = (
        F.when(F.col("tx_row").isNotNull(), tx_observed)
        .when(verdict == "PASS", F.lit("as expected"))
        .otherwise(F.concat(F.lit("observed "), F.lower(verdict)))
    )
    record = F.struct(
        run_id.alias("run_id"),
        F.date_format(ts, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("time"),
        F.lit("url").alias("target"),
        "broker_product",
        "broker_version",
        "broker_platform",
        "client",
        F.lit("1.3.2").alias("client_version"),
        "case_id",
        "area",
        "rules",
        "level",
        F.lit("rabbitmq").alias("profile"),
        verdict.alias("verdict"),
        F.when(F.col("tx_row").isNotNull(), expected_tx)
        .otherwise(F.lit("per rabbitmq profile"))
        .alias("expected"),
        observed.alias("observed"),
        (F.lit(0.01) + (jitter / 1000.0)).alias("duration_s"),
        F.when(verdict == "PASS", F.lit(""))
        .otherwise(F.concat(verdict, F.lit(": "), F.col("case_id")))
        .alias("message"),
        F.concat(
            F.lit("conformance/scenarios/test_"),
            F.col("area"),
            F.lit(".py::test_case["),
            F.col("case_id"),
            F.lit("]"),
        ).alias("nodeid"),
        F.concat(F.lit("gw"), (F.col("case_idx") % 2).cast("string")).alias("worker"),
        F.lit(1).alias("schema"),
        F.when(
            F.col("tx_row").isNotNull(),
            F.create_map(F.lit("tx_row"), F.col("tx_row"), F.lit("tx_observed"), tx_observed),
        )
        .otherwise(F.create_map().cast(T.MapType(T.StringType(), T.StringType())))
        .alias("extra"),
    )
    return df, record


def write_jsonl(lines: DataFrame, out: Path, files: int) -> None:
    """Write the ``value`` column as ``files`` JSONL part files under ``out``."""
    lines.coalesce(files).write.mode("overwrite").text(str(out))
    for crc in out.glob(".*.crc"):
        crc.unlink()
    for part in out.glob("part-*"):
        if not part.name.endswith(".jsonl"):
            part.rename(part.with_name(part.name.split(".")[0] + ".jsonl"))
