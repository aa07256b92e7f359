"""Which RabbitMQ a broker behaves like, and the note for a release newer than any verified."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.model.likeness import agrees, likeness
from conformance.model.results import final_lines
from conformance.profiles.releases import beyond_verified, newest_verified, verified_releases


def _rec(case_id: str, observed, own, *, basis: str = "default", queue_type=None, product: str = "garagemq"):
    return {"case_id": case_id, "queue_type": queue_type, "broker_product": product, "broker_version": "0.1",
            "release_basis": basis, "release": "3.10.8", "verdict": "PASS",
            "extra": {"release_keyed": {"observed": observed, "own": own}}}


def test_counts_per_release_and_the_best():
    recs = [
        _rec("connection.bad-protocol-name", "AMQP 3-1-0-0", "AMQP 0-0-9-1"),  # 4.0+ behaviour
        _rec("connection.mechanisms-offered", "AMQPLAIN ANONYMOUS PLAIN", "AMQPLAIN PLAIN"),  # 4.0+
        _rec("connection.frame-max-minimum-negotiated", "connection.open-ok", "connection.open-ok"),  # < 4.1
        _rec("exchange.unknown-type-503", "channel.close 406", "connection.close 503"),  # 3.13.3+
    ]
    (found,) = likeness(recs, ("3.10.8", "4.0.5", "4.3.6"))
    assert found.counts == (("3.10.8", 1, 4), ("4.0.5", 4, 4), ("4.3.6", 3, 4))
    assert found.best == ("4.0.5",)
    assert "behaves most like RabbitMQ 4.0.5" in found.line() and "4.3.6 3/4" in found.line()


def test_only_brokers_reporting_no_rabbitmq_version_and_only_release_keyed_values():
    recs = [_rec("connection.bad-protocol-name", "AMQP 0-0-9-1", "AMQP 0-0-9-1", basis="server-properties",
                 product="RabbitMQ"),
            {"case_id": "x.y", "release_basis": "default", "extra": {}}]
    assert likeness(recs) == []


def test_a_release_where_the_case_is_unsupported_does_not_judge_it():
    recs = [_rec("cluster.exclusive-not-mirrored", "kept", "kept")]
    (found,) = likeness(recs, ("3.10.8", "4.0.5"))
    assert found.counts == (("3.10.8", 1, 1), ("4.0.5", 0, 0)) and found.best == ("3.10.8",)


def test_patterns_agree_as_check_outcome_compares():
    assert agrees("channel.close 406", ["channel.close *"]) and agrees([1, 2], [1, 2])
    assert not agrees("connection.close 503", "channel.close *")
    assert agrees("x-death [(rejected, src, 1)]", "x-death [(rejected, src, 1)]")


def test_a_release_newer_than_every_verified_one_is_said_once(tmp_path: Path):
    from conformance.plugin.core import beyond_lines

    newest = newest_verified()
    assert newest == verified_releases()[-1] and beyond_verified(newest) is None
    assert beyond_verified("99.0.0") == newest
    assert beyond_verified("3.10.8") is None and beyond_verified(None) is None
    (said,) = beyond_lines(("99.0.0", "server-properties"))
    assert f"newest: {newest}" in said and "documented changes" in said
    assert beyond_lines(("4.0.5", "server-properties")) == [] and beyond_lines(None) == []
    # run's last lines do not say it again
    rows = [{"case_id": f"a.c{i}", "verdict": "FAIL", "release": "99.0.0", "release_verified": newest}
            for i in range(3)]
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert not any("newer than any" in x for x in final_lines(f))
