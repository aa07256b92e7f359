"""The tx table data (conformance/profiles/tx.toml) and the cases generated from it. No sockets."""

from __future__ import annotations

import re

import pytest

from conformance.model.cases import PROFILES, Level
from conformance.profiles import load_table

ROWS = ("publish", "ack", "reject", "declare-delete-bind", "consume-get", "atomicity-single-queue",
        "atomicity-multi-queue", "error-detection", "no-route-return", "effect-visibility")
COLUMNS = ("amqp-0-9-1", "rabbitmq<2.6", "rabbitmq-2.6-2.7.1", "rabbitmq>=2.8")

# The table of 001_27f7ea2622bbc99f.txt#tx, typed in again independently of tx.toml.
DOCUMENT = {
    "publish": ("yes", "yes", "yes", "yes"),
    "ack": ("yes", "yes", "yes", "yes"),
    "reject": ("no", "no", "no", "yes"),
    "declare-delete-bind": ("no", "no", "no", "no"),
    "consume-get": ("no", "no", "no", "no"),
    "atomicity-single-queue": ("yes", "no", "no", "no"),
    "atomicity-multi-queue": ("no", "no", "no", "no"),
    "error-detection": ("undefined", "immediate", "immediate", "immediate"),
    "no-route-return": ("undefined", "immediate", "on commit", "on commit"),
    "effect-visibility": ("undefined", "on commit", "on commit", "on commit"),
}


@pytest.fixture(scope="module")
def table():
    return load_table("tx")


def test_rows_and_columns_in_document_order(table):
    assert tuple(table["rows"]) == ROWS
    assert tuple(table["columns"]) == COLUMNS


def test_every_cell_matches_the_document(table):
    for row, values in DOCUMENT.items():
        assert tuple(table["rows"][row][c] for c in COLUMNS) == values, row


def test_values_are_the_documents_vocabulary(table):
    vocab = set(table["values"])
    assert vocab == {"yes", "no", "immediate", "on commit", "undefined"}
    assert table["undefined"] in vocab
    for row in table["rows"].values():
        assert {row[c] for c in COLUMNS} <= vocab


def test_each_suite_profile_has_exactly_one_column(table):
    profiles = [c["profile"] for c in table["columns"].values() if "profile" in c]
    assert sorted(profiles) == sorted(PROFILES)
    assert table["columns"]["rabbitmq>=2.8"]["profile"] == "rabbitmq"
    assert table["columns"]["amqp-0-9-1"]["profile"] == "spec"


def test_report_pipeline_reads_the_same_table(table):
    tx_table = pytest.importorskip("conformance.report.tx_table")
    assert tx_table.ROW_LABELS == {r: v["feature"] for r, v in table["rows"].items()}
    assert tuple(tx_table.COLUMNS) == COLUMNS
    assert {r: tuple(v[c] for c in COLUMNS) for r, v in tx_table.TX_TABLE.items()} == DOCUMENT


def _generated():
    from conformance.scenarios import test_tx

    out = []
    for p in test_tx.TABLE_CASES:
        (variant,) = p.values
        (mark,) = [m for m in p.marks if m.name == "conformance_case"]
        out.append((p.id, mark.args[0], variant))
    return out


def test_every_row_has_a_case_and_ids_follow_the_contract():
    generated = _generated()
    rows = {c.id.split(".")[1] for _pid, c, _v in generated}
    assert rows == set(ROWS)
    for pid, c, v in generated:
        assert pid == c.id == v.id
        assert re.fullmatch(r"tx\.[a-z-]+\.[a-z0-9-]+", c.id), c.id
        assert c.id.split(".")[1] == v.row


def test_expected_value_per_profile_is_the_column_value():
    for _pid, c, v in _generated():
        assert c.expected == {"spec": DOCUMENT[v.row][0], "rabbitmq": DOCUMENT[v.row][3]}, c.id
        assert set(c.expected_sources) == {"spec", "rabbitmq"}
        assert "001_27f7ea2622bbc99f.txt#tx" in c.sources


def test_atomicity_rows_are_informational_only():
    for _pid, c, v in _generated():
        assert (c.level is Level.INFO) == v.row.startswith("atomicity-"), c.id


def test_library_variants_name_their_client():
    clients = {c.id: c.client for _pid, c, _v in _generated()}
    assert clients["tx.publish.pika"] == "pika"
    assert clients["tx.publish.aio-pika"] == "aio-pika"


def test_record_judges_by_profile_and_files_the_observation():
    from conformance.model.verdicts import Mismatch
    from conformance.plugin import CaseContext
    from conformance.scenarios import test_tx

    generated = {c.id: (c, v) for _pid, c, v in _generated()}
    c, v = generated["tx.no-route-return.mandatory-unroutable"]
    spec_ctx = CaseContext(c, "spec", 1.0, "main")
    test_tx.record(spec_ctx, v, "immediate")
    assert spec_ctx.informational_note and spec_ctx.extra["tx_observed"] == "immediate"

    rmq_ctx = CaseContext(c, "rabbitmq", 1.0, "main")
    with pytest.raises(Mismatch):
        test_tx.record(rmq_ctx, v, "immediate")
    assert rmq_ctx.extra["tx_observed"] == "immediate"

    odd_ctx = CaseContext(c, "rabbitmq", 1.0, "main")
    with pytest.raises(Mismatch):
        test_tx.record(odd_ctx, v, "after commit-ok")
    assert odd_ctx.extra["tx_observed"] == "undefined"  # outside the vocabulary: not a table value

