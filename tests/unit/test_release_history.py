"""The release history (amqp-conformance diff over several releases): every hop at once, runs of
one release measuring what varies by itself, worst first."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.cli.diff import main as diff_main
from conformance.model.release_history import history, render_history
from conformance.model.upgrade import measured_unstable


def _run(tmp_path: Path, run_id: str, version: str, rows: dict[str, tuple[str, str]]) -> str:
    path = tmp_path / f"{run_id}.jsonl"
    path.write_text("".join(json.dumps({
        "run_id": run_id, "case_id": c, "verdict": v, "observed": o, "broker_product": "RabbitMQ",
        "broker_version": version, "release_basis": "server-properties",
    }) + "\n" for c, (v, o) in rows.items()))
    return str(path)


def _four(tmp_path: Path) -> list[str]:
    base = {"exchange.unknown-type-503": ("PASS", "connection.close 503"), "basic.same": ("PASS", "x"),
            "connection.frame-max-minimum-negotiated": ("PASS", "connection.open-ok"),
            "ordering.interleave": ("INFORMATIONAL", "A saw m0 m2")}
    return [
        _run(tmp_path, "r389", "3.8.9", base),
        _run(tmp_path, "r3108a", "3.10.8", {**base, "basic.same": ("FAIL", "y")}),
        _run(tmp_path, "r3108b", "3.10.8", {**base, "basic.same": ("FAIL", "y"),
                                            "ordering.interleave": ("INFORMATIONAL", "A saw m0 m1")}),
        _run(tmp_path, "r405", "4.0.5", {**base, "basic.same": ("FAIL", "y"),
                                         "exchange.unknown-type-503": ("PASS", "channel.close 406"),
                                         "ordering.interleave": ("INFORMATIONAL", "A saw m3")}),
        _run(tmp_path, "r436", "4.3.6", {**base, "basic.same": ("FAIL", "y"),
                                         "exchange.unknown-type-503": ("PASS", "channel.close 406"),
                                         "connection.frame-max-minimum-negotiated": ("PASS", "refused")}),
    ]


def test_every_hop_of_four_releases_at_once(tmp_path: Path) -> None:
    runs = _four(tmp_path)
    h = history(list(reversed(runs)))  # any order: ordered by release
    assert [r.side.version for r in h.releases] == ["3.8.9", "3.10.8", "4.0.5", "4.3.6"]
    assert [len(r.runs) for r in h.releases] == [1, 2, 1, 1]
    rows = {(hop.new.version, r.case_id): r for hop in h.hops for r in hop.rows}
    assert rows[("3.10.8", "basic.same")].status == "UNDOCUMENTED"
    assert rows[("4.0.5", "exchange.unknown-type-503")].status == "documented"
    assert "3.13.3" in rows[("4.0.5", "exchange.unknown-type-503")].sources
    assert rows[("4.3.6", "connection.frame-max-minimum-negotiated")].status == "documented"
    # varies between the two 3.10.8 runs: not a change between releases on any hop
    assert rows[("4.0.5", "ordering.interleave")].status == "not stable"
    assert h.undocumented == 1
    text = render_history(h)
    assert text[0].startswith("release history RabbitMQ 3.8.9 -> 3.10.8 (2 runs) -> 4.0.5 -> 4.3.6: 3 hop(s)")
    line = next(x for x in text if x.startswith("  basic.same:"))
    assert line == ("  basic.same: 3.8.9 PASS -> 3.10.8 FAIL [UNDOCUMENTED: verdict+observed] -> 4.0.5 FAIL "
                    "-> 4.3.6 FAIL")
    # worst first: the case failing on the newest release before the passing ones
    cases = [x.split(":")[0].strip() for x in text[1:] if x.startswith("  ") and " -> " in x]
    assert cases[0] == "basic.same"


def test_two_runs_of_one_release_show_no_change(tmp_path: Path, capsys) -> None:
    runs = _four(tmp_path)
    h = history([runs[1], runs[2]])
    assert h.hops == () and h.undocumented == 0
    assert ("ordering.interleave", "observed") in h.varying
    assert diff_main([runs[1], runs[2], "--fail-on-undocumented"]) == 0
    out = capsys.readouterr().out
    assert "0 hop(s), 0 case(s) changed" in out and "no change between releases" in out
    assert diff_main([*runs, "--fail-on-undocumented"]) == 1


def test_a_measured_unstable_value_is_not_an_undocumented_change(tmp_path: Path) -> None:
    ((case_id, aspect), why) = next(iter(measured_unstable().items()))
    old = _run(tmp_path, "a", "3.10.8", {case_id: ("INFORMATIONAL", "one interleaving")})
    new = _run(tmp_path, "b", "4.0.5", {case_id: ("INFORMATIONAL", "another")})
    (hop,) = history([old, new]).hops
    (row,) = hop.rows
    assert aspect == "observed" and row.status == "not stable" and why in row.unstable
    assert hop.undocumented == ()


def test_json_rows_name_their_hop(tmp_path: Path, capsys) -> None:
    runs = _four(tmp_path)
    assert diff_main([*runs, "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    hops = {"RabbitMQ 3.8.9 -> RabbitMQ 3.10.8", "RabbitMQ 3.10.8 -> RabbitMQ 4.0.5",
            "RabbitMQ 4.0.5 -> RabbitMQ 4.3.6"}
    assert {r["hop"] for r in rows} == hops
