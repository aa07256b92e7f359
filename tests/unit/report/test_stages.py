"""Each pipeline stage against a hand-built expected DataFrame (local[1] session)."""

from __future__ import annotations

import json
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from conformance.model.spec import Rule
from conformance.report import compliance, edges, history, parsing, rule_coverage, tx_inference
from conformance.report.schema import LATEST_SCHEMA, LINES_SCHEMA, MALFORMED_SCHEMA, REGRESSION_SCHEMA

from .conftest import lines_frame, record, results_frame, tx


def expect(spark: SparkSession, actual: DataFrame, ddl: str, rows: list[tuple[object, ...]]) -> None:
    expected = spark.createDataFrame(rows, ddl)
    assertDataFrameEqual(actual.select(*expected.columns), expected, checkRowOrder=False)


def ts(s: str) -> datetime:
    return datetime.fromisoformat(s)


# ----------------------------------------------------------------------------------------- parse


def test_parse_lines_gives_a_reason_for_each_bad_line_and_skips_blank_ones(spark: SparkSession) -> None:
    good = json.dumps(record())
    lines = [
        good,
        "",
        "   ",
        '{"run_id": "x", "ti',  # cut short
        json.dumps({"hello": "world"}),
        json.dumps({k: v for k, v in record().items() if k not in ("verdict", "case_id")}),
        json.dumps(record(verdict="MAYBE")),
        json.dumps(record(time="yesterday")),
        "[1, 2]",
    ]
    parsed = parsing.parse_lines(lines_frame(spark, lines))
    expect(
        spark,
        parsed,
        "row_id long, reason string",
        [
            (0, None),
            (3, "not a valid JSON object"),
            (4, "JSON without any result field"),
            (5, "missing or mistyped field(s): case_id, verdict"),
            (6, "unknown verdict MAYBE"),
            (7, "time is not an ISO 8601 timestamp: yesterday"),
            (8, "not a valid JSON object"),
        ],
    )
    valid = parsing.valid_results(parsed)
    expect(
        spark,
        valid,
        "broker string, case_id string, ts timestamp, rules array<string>, tx_row string",
        [("RabbitMQ@3.13.0", "acks.double-ack-406", ts("2024-05-01 00:00:00"), ["basic.ack/exists"], None)],
    )


def test_parse_lines_reads_tx_keys_from_extra_and_tolerates_non_string_values(spark: SparkSession) -> None:
    rec = tx("tx.reject.commit-applies", " On Commit ")
    rec["extra"]["attempts"] = 3
    valid = parsing.valid_results(parsing.parse_lines(lines_frame(spark, [json.dumps(rec)])))
    expect(spark, valid, "tx_row string, tx_observed string", [("reject", "on commit")])


def test_faults_records_are_set_apart_however_their_key_is_written(spark: SparkSession) -> None:
    faults = json.dumps({"record": "faults.summary", "run_id": "f1"})
    escaped = '{"rec\\u006frd": "faults.summary", "run_id": "f2"}'  # the same key, one letter escaped
    named = json.dumps(record(message='the "record" key is not here'))  # the text, not the key
    other = json.dumps({**record(), "record": "other"})  # a record field that is not faults.*
    # A faults record whose fields are of other JSON types than the result schema's.
    mistyped = json.dumps({"record": "faults.summary", "run_id": ["f3"], "duration_s": "slow"})
    lines = lines_frame(spark, [faults, escaped, named, other, json.dumps(record()), mistyped])
    assert [r.value for r in parsing.workload_lines(lines).collect()] == [faults, escaped, mistyped]
    parsed = parsing.parse_lines(lines)
    rows = parsed.select("row_id", "reason", "workload").collect()
    assert sorted((r.row_id, r.reason, r.workload) for r in rows) == [
        (0, None, True), (1, None, True), (2, None, False), (3, None, False), (4, None, False),
        (5, None, True)]
    assert sorted(r.run_id for r in parsing.valid_results(parsed).collect()) == ["run-1"] * 3
    assert parsing.malformed_lines(parsed).count() == 0


def test_line_numbers_add_earlier_splits_of_the_same_file(spark: SparkSession) -> None:
    # File a: split 0 holds 3 lines (ids 0-2), split 1000 holds 2 lines in another partition
    # (ids start at 2^33); file b: one split of 2 lines after a's first split in partition 0.
    p1 = 1 << 33
    lines = spark.createDataFrame(
        [
            ("l1", "file:///r/a.jsonl", 0, 0),
            ("l2", "file:///r/a.jsonl", 0, 1),
            ("l3", "file:///r/a.jsonl", 0, 2),
            ("b1", "file:///r/b%20c.jsonl", 0, 3),
            ("b2", "file:///r/b%20c.jsonl", 0, 4),
            ("l4", "file:///r/a.jsonl", 1000, p1),
            ("l5", "file:///r/a.jsonl", 1000, p1 + 1),
        ],
        LINES_SCHEMA,
    )
    malformed = lines.where(F.col("value").isin("l2", "l5", "b2")).select(
        "file", "block_start", "row_id", F.lit("bad").alias("reason"), "value"
    )
    out = parsing.with_line_numbers(malformed, parsing.split_stats(lines))
    expect(
        spark,
        out,
        "file string, line long, value string",
        [("/r/a.jsonl", 2, "l2"), ("/r/a.jsonl", 5, "l5"), ("/r/b c.jsonl", 2, "b2")],
    )
    # The schema a report without malformed lines (or from a store) declares for the table.
    assert parsing.with_line_numbers(parsing.malformed_lines(parsing.parse_lines(lines)),
                                    parsing.split_stats(lines)).schema == MALFORMED_SCHEMA


# -------------------------------------------------------------------------------- latest, history


def _runs(spark: SparkSession) -> DataFrame:
    return results_frame(
        spark,
        [
            record(run_id="r1", time="2024-05-01T00:00:00Z", verdict="TIMEOUT", message="slow"),
            record(run_id="r2", time="2024-05-02T00:00:00Z", verdict="PASS"),
            record(run_id="r3", time="2024-05-03T00:00:00Z", verdict="PASS"),
            record(
                run_id="r3",
                time="2024-05-03T00:00:01Z",
                case_id="reject.requeue-head",
                level="SHOULD",
                verdict="NON_STRICT",
            ),
            record(run_id="r9", time="2024-05-01T00:00:00Z", broker_version="3.12.0", verdict="PASS"),
        ],
    )


def test_latest_verdict_per_broker_version_and_case(spark: SparkSession) -> None:
    latest = compliance.latest_verdicts(_runs(spark))
    assert latest.schema.fieldNames() == LATEST_SCHEMA.fieldNames()
    expect(
        spark,
        latest,
        "broker string, case_id string, verdict string, run_id string, n_executions long",
        [
            ("RabbitMQ@3.13.0", "acks.double-ack-406", "PASS", "r3", 3),
            ("RabbitMQ@3.13.0", "reject.requeue-head", "NON_STRICT", "r3", 1),
            ("RabbitMQ@3.12.0", "acks.double-ack-406", "PASS", "r9", 1),
        ],
    )


def test_case_history_and_flaky_cases(spark: SparkSession) -> None:
    hist = history.case_history(_runs(spark))
    expect(
        spark,
        hist,
        "broker string, case_id string, n_executions int, n_runs int, n_pass long, n_timeout long, "
        "verdicts array<string>, recent_verdicts string, first_ts timestamp, last_ts timestamp",
        [
            ("RabbitMQ@3.13.0", "acks.double-ack-406", 3, 3, 2, 1, ["PASS", "TIMEOUT"], "TIMEOUT PASS PASS",
             ts("2024-05-01 00:00:00"), ts("2024-05-03 00:00:00")),
            ("RabbitMQ@3.13.0", "reject.requeue-head", 1, 1, 0, 0, ["NON_STRICT"], "NON_STRICT",
             ts("2024-05-03 00:00:01"), ts("2024-05-03 00:00:01")),
            ("RabbitMQ@3.12.0", "acks.double-ack-406", 1, 1, 1, 0, ["PASS"], "PASS",
             ts("2024-05-01 00:00:00"), ts("2024-05-01 00:00:00")),
        ],
    )
    expect(
        spark,
        history.flaky_cases(hist),
        "broker string, broker_platform string, case_id string, n_runs int, verdict_summary string",
        [("RabbitMQ@3.13.0", "Erlang/OTP 26", "acks.double-ack-406", 3, "PASS / TIMEOUT")],
    )


def test_different_verdicts_within_one_run_are_not_flaky(spark: SparkSession) -> None:
    same_run = results_frame(
        spark, [record(verdict="PASS"), record(verdict="FAIL", time="2024-05-01T00:00:01Z")]
    )
    assert history.flaky_cases(history.case_history(same_run)).count() == 0


# ----------------------------------------------------------------------------------- scores


def test_scores_count_only_verdicts_that_state_a_requirement(spark: SparkSession) -> None:
    res = results_frame(
        spark,
        [
            record(case_id="acks.a", verdict="PASS"),
            record(case_id="acks.b", verdict="FAIL"),
            record(case_id="acks.c", verdict="UNSUPPORTED"),
            record(case_id="acks.d", verdict="ERROR"),
            record(case_id="acks.e", verdict="INFORMATIONAL", level="INFO"),
            record(case_id="acks.f", verdict="NON_STRICT", level="SHOULD"),
            record(case_id="qos.a", verdict="TIMEOUT"),
        ],
    )
    latest = compliance.latest_verdicts(res)
    expect(
        spark,
        compliance.scores(latest, "area"),
        "broker string, area string, n_cases long, n_pass long, n_scored long, score double",
        [("RabbitMQ@3.13.0", "acks", 6, 1, 3, 0.3333), ("RabbitMQ@3.13.0", "qos", 1, 0, 1, 0.0)],
    )
    expect(
        spark,
        compliance.scores(latest, "level"),
        "level string, n_cases long, n_scored long, score double",
        [("MUST", 5, 3, 0.3333), ("SHOULD", 1, 1, 0.0), ("INFO", 1, 0, None)],
    )
    expect(
        spark,
        compliance.broker_summary(res, latest),
        "broker string, n_runs long, n_cases long, n_must_failures long, score double, clients string",
        [("RabbitMQ@3.13.0", 1, 7, 2, 0.25, "raw")],
    )


# --------------------------------------------------------------------------------------- tx


def _tx_latest(spark: SparkSession) -> DataFrame:
    g = {"broker_product": "garagemq", "broker_version": "0.1.0"}
    return compliance.latest_verdicts(
        results_frame(
            spark,
            [
                tx("tx.publish.rollback-discards", "yes"),
                tx("tx.publish.commit-delivers", "yes"),
                tx("tx.reject.commit-applies", "yes"),
                tx("tx.no-route-return.timing", "on commit"),
                tx("tx.error-detection.missing-exchange", "immediate"),
                tx("tx.effect-visibility.restart", "undefined"),
                tx("tx.publish.rollback-discards", "yes", **g),
                tx("tx.reject.commit-applies", "no", **g),
                tx("tx.reject.rollback-undoes", "yes", **g),
                tx("tx.no-route-return.timing", "immediate", **g),
                tx("tx.atomicity-single-queue.restart", "no", **g),
                tx("tx.effect-visibility.restart", "undefined", **g),
                tx("tx.effect-visibility.other", "on commit", **g),
                record(case_id="acks.double-ack-406", **g),
            ],
        )
    )


def test_tx_observations_merge_variants(spark: SparkSession) -> None:
    obs = tx_inference.tx_observations(_tx_latest(spark))
    expect(
        spark,
        obs,
        "broker string, tx_row string, observed string, n_cases long",
        [
            ("RabbitMQ@3.13.0", "publish", "yes", 2),
            ("RabbitMQ@3.13.0", "reject", "yes", 1),
            ("RabbitMQ@3.13.0", "no-route-return", "on commit", 1),
            ("RabbitMQ@3.13.0", "error-detection", "immediate", 1),
            ("RabbitMQ@3.13.0", "effect-visibility", "undefined", 1),
            ("garagemq@0.1.0", "publish", "yes", 1),
            ("garagemq@0.1.0", "reject", "conflict: no / yes", 2),
            ("garagemq@0.1.0", "no-route-return", "immediate", 1),
            ("garagemq@0.1.0", "atomicity-single-queue", "no", 1),
            ("garagemq@0.1.0", "effect-visibility", "on commit", 2),
        ],
    )


def test_profile_inference_picks_the_best_column_and_lists_disagreements(spark: SparkSession) -> None:
    obs = tx_inference.tx_observations(_tx_latest(spark))
    prof = tx_inference.profile_inference(obs, edges.tx_seed_frame(spark))
    # RabbitMQ: publish yes, reject yes, no-route on commit, error immediate (effect-visibility
    # unobservable → not compared): 4 rows.
    # garagemq: publish yes, reject conflict, no-route immediate, atomicity no, effect on commit: 5 rows;
    # three columns tie at 3/5: more exact matches first (amqp-0-9-1 has 1), then the later column.
    expect(
        spark,
        prof,
        "broker string, column string, profile string, n_compared long, n_match long, n_exact "
        "long, score double, "
        "rank int, best boolean, disagreements array<string>",
        [
            ("RabbitMQ@3.13.0", "rabbitmq>=2.8", "rabbitmq", 4, 4, 4, 1.0, 1, True, []),
            (
                "RabbitMQ@3.13.0",
                "rabbitmq-2.6-2.7.1",
                None,
                4,
                3,
                3,
                0.75,
                2,
                False,
                ["reject: observed yes, column says no"],
            ),
            (
                "RabbitMQ@3.13.0",
                "amqp-0-9-1",
                "spec",
                4,
                3,
                1,
                0.75,
                3,
                False,
                ["reject: observed yes, column says no"],
            ),
            (
                "RabbitMQ@3.13.0",
                "rabbitmq<2.6",
                None,
                4,
                2,
                2,
                0.5,
                4,
                False,
                [
                    "reject: observed yes, column says no",
                    "no-route-return: observed on commit, column says immediate",
                ],
            ),
            (
                "garagemq@0.1.0",
                "rabbitmq<2.6",
                None,
                5,
                4,
                4,
                0.8,
                1,
                True,
                ["reject: observed conflict: no / yes, column says no"],
            ),
            (
                "garagemq@0.1.0",
                "amqp-0-9-1",
                "spec",
                5,
                3,
                1,
                0.6,
                4,
                False,
                [
                    "reject: observed conflict: no / yes, column says no",
                    "atomicity-single-queue: observed no, column says yes",
                ],
            ),
            (
                "garagemq@0.1.0",
                "rabbitmq>=2.8",
                "rabbitmq",
                5,
                3,
                3,
                0.6,
                2,
                False,
                [
                    "reject: observed conflict: no / yes, column says yes",
                    "no-route-return: observed immediate, column says on commit",
                ],
            ),
            (
                "garagemq@0.1.0",
                "rabbitmq-2.6-2.7.1",
                None,
                5,
                3,
                3,
                0.6,
                3,
                False,
                [
                    "reject: observed conflict: no / yes, column says no",
                    "no-route-return: observed immediate, column says on commit",
                ],
            ),
        ],
    )


def test_tx_comparison_lays_every_seed_row_beside_the_observation(spark: SparkSession) -> None:
    obs = tx_inference.tx_observations(_tx_latest(spark)).where(F.col("broker_product") == "RabbitMQ")
    table = tx_inference.tx_comparison(obs, edges.tx_seed_frame(spark))
    assert table.count() == 10
    expect(
        spark,
        table.where(F.col("tx_row").isin("reject", "no-route-return", "effect-visibility", "ack")),
        "tx_row string, observed string, n_cases long, amqp_0_9_1 string, amqp_0_9_1_match boolean, "
        "rabbitmq_lt_2_6_match boolean, rabbitmq_ge_2_8 string, rabbitmq_ge_2_8_match boolean",
        [
            ("reject", "yes", 1, "no", False, False, "yes", True),
            ("no-route-return", "on commit", 1, "undefined", True, False, "on commit", True),
            ("effect-visibility", "undefined", 1, "undefined", None, None, "on commit", None),
            ("ack", None, 0, "yes", None, None, "yes", None),
        ],
    )


# --------------------------------------------------------------------------------- regressions


def test_versions_order_numerically(spark: SparkSession) -> None:
    latest = spark.createDataFrame(
        [("RabbitMQ", v) for v in ("3.10.0", "3.9.2", "3.9.10", "4.0.0-rc.1", "4.0.0")]
        + [("garagemq", "0.1.0")],
        "broker_product string, broker_version string",
    )
    expect(
        spark,
        history.consecutive_versions(latest),
        "broker_product string, baseline_version string, candidate_version string",
        [
            ("RabbitMQ", "3.9.2", "3.9.10"),
            ("RabbitMQ", "3.9.10", "3.10.0"),
            ("RabbitMQ", "3.10.0", "4.0.0"),
            ("RabbitMQ", "4.0.0", "4.0.0-rc.1"),
        ],
    )


def _two_releases(spark: SparkSession) -> DataFrame:
    old = {"broker_version": "3.12.0", "run_id": "a"}
    return results_frame(
        spark,
        [
            record(case_id="acks.a", verdict="PASS", **old),
            record(case_id="acks.b", verdict="PASS", **old),
            record(case_id="acks.c", verdict="PASS", **old),
            record(case_id="acks.d", verdict="FAIL", **old),
            record(case_id="acks.e", verdict="PASS", **old),
            record(case_id="acks.f", verdict="NON_STRICT", **old),
            record(case_id="acks.a", verdict="FAIL", observed="channel open"),
            record(case_id="acks.b", verdict="TIMEOUT"),
            record(case_id="acks.c", verdict="UNSUPPORTED"),
            record(case_id="acks.d", verdict="ERROR"),
            record(case_id="acks.e", verdict="NON_STRICT"),
            record(case_id="acks.f", verdict="NON_STRICT"),
            record(case_id="acks.g", verdict="NON_STRICT"),
            record(case_id="acks.h", verdict="FAIL"),
        ],
    )


def test_release_regressions_between_consecutive_versions(spark: SparkSession) -> None:
    out = history.release_regressions(compliance.latest_verdicts(_two_releases(spark)))
    assert out.schema.fieldNames() == REGRESSION_SCHEMA.fieldNames()
    expect(
        spark,
        out,
        "baseline string, candidate string, case_id string, kind string, baseline_verdict string, "
        "candidate_verdict string, observed string",
        [
            ("RabbitMQ@3.12.0", "RabbitMQ@3.13.0", "acks.a", "regression", "PASS", "FAIL", "channel open"),
            ("RabbitMQ@3.12.0", "RabbitMQ@3.13.0", "acks.b", "regression", "PASS", "TIMEOUT", "406"),
            ("RabbitMQ@3.12.0", "RabbitMQ@3.13.0", "acks.d", "regression", "FAIL", "ERROR", "406"),
            ("RabbitMQ@3.12.0", "RabbitMQ@3.13.0", "acks.e", "new-non-strict", "PASS", "NON_STRICT", "406"),
            ("RabbitMQ@3.12.0", "RabbitMQ@3.13.0", "acks.g", "new-non-strict", None, "NON_STRICT", "406"),
            ("RabbitMQ@3.12.0", "RabbitMQ@3.13.0", "acks.h", "new-failure", None, "FAIL", "406"),
        ],
    )


def test_gate_regressions_match_cases_across_products(spark: SparkSession) -> None:
    res = _two_releases(spark)
    base = res.where(F.col("broker_version") == "3.12.0")
    cand = res.where(F.col("broker_version") == "3.13.0").withColumn("broker_product", F.lit("garagemq"))
    expect(
        spark,
        history.gate_regressions(base, cand),
        "baseline string, candidate string, case_id string, kind string",
        [
            ("RabbitMQ@3.12.0", "garagemq@3.13.0", "acks.a", "regression"),
            ("RabbitMQ@3.12.0", "garagemq@3.13.0", "acks.b", "regression"),
            ("RabbitMQ@3.12.0", "garagemq@3.13.0", "acks.d", "regression"),
            ("RabbitMQ@3.12.0", "garagemq@3.13.0", "acks.e", "new-non-strict"),
            ("RabbitMQ@3.12.0", "garagemq@3.13.0", "acks.g", "new-non-strict"),
            ("RabbitMQ@3.12.0", "garagemq@3.13.0", "acks.h", "new-failure"),
        ],
    )
    assert history.gate_regressions(cand, cand).count() == 0


def test_the_report_and_the_gate_classify_every_transition_alike(spark: SparkSession) -> None:
    """The report's regression section (Spark) and the release gate (plain Python) must agree."""
    from conformance.gate import compare as gate
    from conformance.model.verdicts import Verdict

    names = [v.value for v in Verdict]
    pairs = [(b, c) for b in [None, *names] for c in names]
    joined = spark.createDataFrame(pairs, "baseline_verdict string, candidate_verdict string")
    spark_kinds = {(r["baseline_verdict"], r["candidate_verdict"]): r["kind"]
                   for r in history.classify_transitions(joined).collect()}
    python_kinds = {(b, c): k for b, c in pairs if (k := gate.transition(b, c)) is not None}
    assert spark_kinds == python_kinds


# ------------------------------------------------------------------------------- rule coverage


def test_rule_coverage_per_rule_and_broker(spark: SparkSession) -> None:
    rules = [
        Rule(
            "basic.ack/exists", "basic", "ack", "exists", "precondition-failed", "MUST", "", field="multiple"
        ),
        Rule("basic.reject/01", "basic", "reject", "01", None, "SHOULD", ""),
        Rule("basic.reject.requeue/01", "basic", "reject", "01", None, "MAY", "", field="requeue"),
        Rule("tx/not-mandatory", "tx", None, "not mandatory", None, "MUST", ""),
    ]
    latest = compliance.latest_verdicts(
        results_frame(
            spark,
            [
                record(case_id="acks.a", rules=["basic.ack/exists"], verdict="PASS"),
                record(
                    case_id="acks.b", rules=["basic.ack/exists", "basic.reject.requeue/01"], verdict="FAIL"
                ),
                record(case_id="confirms.x", rules=["confirm.select/nowait"], verdict="PASS"),
                record(case_id="acks.a", rules=["basic.ack/exists"], verdict="PASS", broker_version="3.12.0"),
            ],
        )
    )
    cov = rule_coverage.rule_coverage(edges.rules_frame(spark, rules), latest)
    expect(
        spark,
        cov,
        "rule_id string, rule_level string, n_elements long, in_spec boolean, broker string, n_cases long, "
        "n_pass long, n_fail long, cases array<string>, worst_verdict string",
        [
            ("basic.ack/exists", "MUST", 1, True, "RabbitMQ@3.13.0", 2, 1, 1, ["acks.a", "acks.b"], "FAIL"),
            ("basic.ack/exists", "MUST", 1, True, "RabbitMQ@3.12.0", 1, 1, 0, ["acks.a"], "PASS"),
            ("basic.reject/01", "SHOULD", 1, True, None, 0, 0, 0, [], None),
            ("basic.reject.requeue/01", "MAY", 1, True, "RabbitMQ@3.13.0", 1, 0, 1, ["acks.b"], "FAIL"),
            ("tx/not-mandatory", "MUST", 1, True, None, 0, 0, 0, [], None),
            ("confirm.select/nowait", None, 0, False, "RabbitMQ@3.13.0", 1, 1, 0, ["confirms.x"], "PASS"),
        ],
    )
    expect(
        spark,
        rule_coverage.rules_summary(cov),
        "rule_id string, n_brokers long, worst_verdict string, cases string",
        [
            ("basic.ack/exists", 2, "FAIL", "acks.a acks.b"),
            ("basic.reject/01", 0, None, ""),
            ("basic.reject.requeue/01", 1, "FAIL", "acks.b"),
            ("tx/not-mandatory", 0, None, ""),
            ("confirm.select/nowait", 1, "PASS", "confirms.x"),
        ],
    )


def test_queue_type_matrix_puts_classic_and_quorum_side_by_side(spark: SparkSession) -> None:
    old = record(run_id="r1", time="2024-05-01T00:00:00Z", case_id="acks.only-classic", verdict="PASS")
    old.pop("queue_type", None)  # a record from before the field: still a classic row
    runs = results_frame(
        spark,
        [
            old,
            record(
                run_id="r2",
                time="2024-05-02T00:00:00Z",
                case_id="reject.x",
                verdict="PASS",
                queue_type="classic",
            ),
            record(
                run_id="r2",
                time="2024-05-02T00:00:00Z",
                case_id="reject.x[quorum]",
                verdict="FAIL",
                observed="m2 m1",
                queue_type="quorum",
            ),
            record(
                run_id="r2",
                time="2024-05-02T00:00:00Z",
                case_id="acks.y",
                verdict="PASS",
                queue_type="classic",
            ),
            record(
                run_id="r2",
                time="2024-05-02T00:00:00Z",
                case_id="acks.y[quorum]",
                verdict="PASS",
                queue_type="quorum",
            ),
            record(
                run_id="r2",
                time="2024-05-02T00:00:00Z",
                case_id="queue_types.z[quorum]",
                verdict="PASS",
                queue_type="quorum",
            ),
        ],
    )
    expect(
        spark,
        compliance.queue_type_matrix(compliance.latest_verdicts(runs)),
        (
            "base_id string, verdict_classic string, verdict_quorum string, observed_quorum string, "
            "differs boolean"
        ),
        [
            ("reject.x", "PASS", "FAIL", "m2 m1", True),
            ("acks.y", "PASS", "PASS", "406", False),  # "406": the observed of the records' BASE
            ("queue_types.z", None, "PASS", "406", False),
        ],
    )
