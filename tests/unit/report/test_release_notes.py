"""The summary's release notes: a RabbitMQ newer than every verified release, and which release a
broker reporting no RabbitMQ version behaves like (page.release_notes, no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.profiles.releases import newest_verified
from conformance.report.page import LIKENESS_MAX_ROWS, release_notes


def _inputs(tmp_path: Path, n_rows: int = 2) -> dict:
    f = tmp_path / "g.jsonl"
    rec = {"case_id": "connection.mechanisms-offered", "broker_product": "garagemq", "broker_version": "0.1",
           "release_basis": "default",
           "extra": {"release_keyed": {"observed": "PLAIN", "own": "AMQPLAIN PLAIN"}}}
    f.write_text(json.dumps(rec) + "\n" + "{not json release_keyed\n")
    return {"inputs": {"n_rows": n_rows, "files": [{"file": f"file://{f}"}]}}


def test_newer_release_said_once_and_likeness_for_a_broker_without_a_rabbitmq_version(tmp_path: Path):
    view = {"brokers": [{"broker": "RabbitMQ@99.1.0"}, {"broker": "RabbitMQ@4.0.5"},
                        {"broker": "garagemq@0.1"}]}
    notes = release_notes(_inputs(tmp_path), view)
    assert len(notes) == 2
    assert notes[0].startswith("RabbitMQ 99.1.0 is newer than any release") and newest_verified() in notes[0]
    assert notes[1].startswith("garagemq@0.1 behaves most like RabbitMQ") and "0/1" in notes[1]


def test_no_notes_for_verified_releases_and_none_read_past_the_bound(tmp_path: Path):
    view = {"brokers": [{"broker": "RabbitMQ@4.0.5"}, {"broker": "garagemq@0.1"}]}
    assert release_notes(_inputs(tmp_path, LIKENESS_MAX_ROWS + 1), view) == []
