"""The gate's pinned failure forms: signatures, the "changed" category, every case counted once,
unpinned entries, and ``--update-triage``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conformance.gate import cli as gate_cli
from conformance.gate import compare as gate
from conformance.gate.signature import form_matches, parse_form, signature
from conformance.gate.triage import (
    EMPTY,
    InvariantFacts,
    TriageProblem,
    load_triage,
    parse_triage,
    triage_beside,
)

ROOT = Path(__file__).resolve().parents[2]
BASELINES = ROOT / "fixtures" / "baselines"
BASELINE = BASELINES / "garagemq.jsonl"
CASE = "access.unknown-user-closes-403"


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def changed_copy(tmp_path: Path, case_id: str, **fields: Any) -> Path:
    rows = [dict(r, **fields) if r["case_id"] == case_id else r for r in records(BASELINE)]
    return write(tmp_path / "cand.jsonl", rows)


def gate_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    rc = gate_cli.main([*argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def sig(rec: dict[str, Any]) -> str:
    inv = (rec.get("extra") or {}).get("invariants") or ()
    return signature(rec["verdict"], rec.get("observed", ""), rec.get("message", ""), inv)


# ------------------------------------------------------------------------------------ signature


def test_signatures_of_the_garagemq_baseline() -> None:
    by_case = {r["case_id"]: r for r in records(BASELINE)}
    assert sig(by_case[CASE]) == "value 530 | connection.close reply-code"
    assert sig(by_case["recover.requeue-redelivers-get"]) == (
        "close connection.close 540 NOT_IMPLEMENTED 60.110 | broker closed while waiting for "
        "basic.recover-ok "
        "(reply to basic.recover)")
    # The reply text names a generated queue: only code, constant and class.method are kept.
    assert sig(by_case["queue.delete-missing-404"]) == (
        "close channel.close 404 NOT_FOUND 50.40 | queue.delete")
    assert sig(by_case["acks.cancel-after-queue-deleted"]) == (
        "timeout nothing within Ns | TIMEOUT after Ns waiting for queue.delete-ok (reply to queue.delete)")
    assert sig(by_case["exchange.default-access-delete"]).startswith("no-reply no reply to exchange.delete")
    assert sig(by_case["limits.channel-max-exceeded-530"]).startswith("open connection still open")
    assert sig(by_case["connection.vhost-separation"]).startswith("reason | needs a second virtual host")
    # A broken wire invariant: the invariants and the case's own check, not the race's detail
    # (confirms.publish-missing-exchange-404: its twin in returns shows the race's other form in
    # some runs, as its triage entry pins).
    assert sig(by_case["confirms.publish-missing-exchange-404"]) == (
        "invariant wire.nothing-after-connection-close FAIL | channel error scope")
    for rec in by_case.values():
        s = sig(rec)
        assert (s == "") == (rec["verdict"] == "PASS")
        assert "amqpc-" not in s.replace("amqpc-…", "") and "gw1" not in s, (rec["case_id"], s)


def test_signature_drops_names_tags_ports_timings_and_frames() -> None:
    a = signature("TIMEOUT", "no complete answer within 10.0s; frames received (pika#1: ch1 Basic.Deliver("
                  "delivery_tag=3, consumer_tag='amq.ctag-AbC'), queue='amqpc-x-gw0-a648ee39-q')",
                  "TIMEOUT after "
                  "10.0s waiting for pika consume")
    b = signature("TIMEOUT", "no complete answer within 30s; frames received (pika#1: nothing)",
                  "TIMEOUT after 30.0s waiting for pika consume")
    assert a == b == "timeout no complete answer within Ns | TIMEOUT after Ns waiting for pika consume"
    c = signature("FAIL", "connection refused at 127.0.0.1:40567, delivery_tag=17 of amq.gen-Zx9",
                  "probe (profile rabbitmq: measured)")
    assert c == "value connection refused at 127.0.0.1:PORT, delivery_tag=N of amq.gen-… | probe"
    # the client libraries' closes keep the code and the constant
    closed = "declare failed: ChannelClosed (404, \"NOT_FOUND - no queue 'amqpc-q-1'\")"
    assert signature("FAIL", closed, "x") == "close declare failed: ChannelClosed close 404 NOT_FOUND | x"


def test_form_matching() -> None:
    assert parse_form("FAIL value 530 | c") == ("FAIL", "value 530 | c")
    assert parse_form("TIMEOUT *") == ("TIMEOUT", "*") == parse_form("TIMEOUT")
    assert form_matches(("TIMEOUT", "*"), "TIMEOUT", "anything")
    assert not form_matches(("TIMEOUT", "*"), "FAIL", "anything")
    assert not form_matches(("FAIL", "value 530 | c"), "FAIL", "value 541 | c")
    # a record with a broken invariant carries no own observed value: the checks compare
    assert form_matches(("FAIL", "close channel.close 540 | the answer"), "FAIL",
                        "invariant wire.x FAIL | the answer")
    assert not form_matches(("FAIL", "close channel.close 540 | the answer"), "FAIL",
                            "invariant wire.x FAIL | another check")


# ------------------------------------------------------------------------------------ done when


def test_done_when_a_known_fail_turned_timeout_is_changed(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    cand = changed_copy(tmp_path, CASE, verdict="TIMEOUT", observed="nothing within 10.0s",
                        message="TIMEOUT after 10.0s waiting for connection.open-ok")
    rc, doc = gate_json(capsys, "--baseline", str(BASELINE), "--candidate", str(cand))
    assert rc == 1 and doc["verdict"] == "FAIL"
    [f] = [f for f in doc["findings"] if f["kind"] == "changed"]
    assert f["case_id"] == CASE and f["failing"]
    assert f["was"] == "FAIL value 530 | connection.close reply-code"
    assert f["form"] == "TIMEOUT timeout nothing within Ns | TIMEOUT after Ns waiting for connection.open-ok"
    assert doc["counts"]["changed"] == 1
    rc = gate_cli.main(["--baseline", str(BASELINE), "--candidate", str(cand)])
    out = capsys.readouterr().out
    assert rc == 1 and out.splitlines()[1].split()[:4] == ["changed", CASE, "FAIL", "TIMEOUT"]
    assert "was FAIL value 530 | connection.close reply-code → now TIMEOUT timeout" in out
    assert out.splitlines()[-1].startswith("gate FAIL: 0 regression(s), 1 changed, ")


def test_done_when_only_the_reply_code_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cand = changed_copy(tmp_path, CASE, observed="541")
    rc, doc = gate_json(capsys, "--baseline", str(BASELINE), "--candidate", str(cand))
    assert rc == 1
    assert [(f["kind"], f["case_id"], f["baseline_verdict"], f["candidate_verdict"]) for f in doc["findings"]
            if f["failing"]] == [("changed", CASE, "FAIL", "FAIL")]
    assert doc["findings"][0]["form"] == "FAIL value 541 | connection.close reply-code"


def test_done_when_an_identical_candidate_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cand = write(tmp_path / "same.jsonl", records(BASELINE))
    rc, doc = gate_json(capsys, "--baseline", str(BASELINE), "--candidate", str(cand))
    assert rc == 0 and doc["counts"]["changed"] == 0 and doc["unpinned"] == 0


# ------------------------------------------------------------------------------------ categories


def test_untriaged_failure_into_another_failure_is_changed(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # Without triage: a baseline TIMEOUT that became a FAIL used to be counted nowhere.
    victim = "acks.cancel-after-queue-deleted"
    cand = changed_copy(tmp_path, victim, verdict="FAIL", observed="channel.close 406", message="answer")
    rc, doc = gate_json(capsys, "--baseline", str(BASELINE), "--candidate", str(cand), "--no-triage")
    assert rc == 1
    by_case = {f["case_id"]: f for f in doc["findings"]}
    assert by_case[victim]["kind"] == "changed" and by_case[victim]["was"].startswith("TIMEOUT timeout")
    # FAIL → TIMEOUT stays a regression (the documented rule); PASS → UNSUPPORTED is changed.
    passing = "recover.requeue-false"
    rows = [dict(r, verdict="UNSUPPORTED", message="needs X") if r["case_id"] == passing else r
            for r in records(BASELINE)]
    cand = write(tmp_path / "u.jsonl", rows)
    rc, doc = gate_json(capsys, "--baseline", str(BASELINE), "--candidate", str(cand), "--no-triage")
    assert rc == 1 and [f["kind"] for f in doc["findings"] if f["case_id"] == passing] == ["changed"]


@pytest.mark.parametrize("triaged", [True, False])
def test_every_compared_case_is_counted_exactly_once(tmp_path: Path, triaged: bool) -> None:
    base_rows = records(BASELINE)
    by_verdict: dict[str, list[dict[str, Any]]] = {}
    for r in base_rows:
        if not (r.get("extra") or {}).get("invariants"):
            by_verdict.setdefault(r["verdict"], []).append(r)
    edits = {
        by_verdict["PASS"][0]["case_id"]: {"verdict": "FAIL"},  # regression
        by_verdict["PASS"][1]["case_id"]: {"verdict": "NON_STRICT"},  # new-non-strict
        by_verdict["PASS"][2]["case_id"]: {"verdict": "UNSUPPORTED"},  # changed
        by_verdict["FAIL"][0]["case_id"]: {"verdict": "PASS"},  # fixed
        by_verdict["FAIL"][1]["case_id"]: {"verdict": "TIMEOUT"},  # known (would be regression) / regression
        by_verdict["TIMEOUT"][0]["case_id"]: {"verdict": "FAIL"},  # changed
        by_verdict["FAIL"][2]["case_id"]: {"observed": "999"},  # changed
    }
    dropped = by_verdict["PASS"][3]["case_id"]  # missing
    cand_rows = [dict(r, **edits.get(r["case_id"], {})) for r in base_rows if r["case_id"] != dropped]
    template = by_verdict["PASS"][4]
    cand_rows += [dict(template, case_id="zz.new-pass"),
                  dict(template, case_id="zz.new-fail", verdict="FAIL"),
                  dict(template, case_id="zz.new-info", verdict="INFORMATIONAL")]
    base = gate.load_side(gate.parse_selector(str(BASELINE)), [BASELINE])
    cand_file = write(tmp_path / "c.jsonl", cand_rows)
    cand = gate.load_side(gate.parse_selector(str(cand_file)), [cand_file])
    triage = load_triage(BASELINES / "garagemq.triage.toml") if triaged else EMPTY
    res = gate.compare(base, cand, triage, gate.Options(allow_missing=True))
    union = set(base.cases) | set(cand.cases)
    assert set(res.categories) == union
    assert sum(res.counts.values()) == len(union) == res.n_compared
    assert set(res.counts) == set(gate.CATEGORIES)
    # each finding's kind is its case's category; only-counted categories have no finding
    for f in res.findings:
        assert res.categories[f.case_id] == f.kind
    assert res.counts["missing"] == 1 and res.counts["new"] == 2  # new-pass, new-info
    assert res.counts["new-failure"] == 1 and res.counts["regression"] == 1 + (not triaged)
    # with the pinned triage the FAIL → TIMEOUT of a triaged case is changed, without it a regression
    assert res.counts["changed"] == 3 + triaged and res.counts["fixed"] == 1
    line = gate.summary_line(res, strict=False)
    assert f"= {len(union)} compared" in line
    numbers = [int(tok) for tok in line.split(" = ")[0].replace(",", " ").split() if tok.isdigit()]
    assert sum(numbers) - (res.unpinned if "unpinned" in line else 0) == len(union)


# ------------------------------------------------------------------------------------ unpinned, triage format


def test_an_entry_without_forms_still_loads_and_is_reported_unpinned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.toml"
    old.write_text("[[triage]]\ncases = ['access.*']\nreason = 'login replies'\n", encoding="utf-8")
    cand = changed_copy(tmp_path, CASE, verdict="TIMEOUT", observed="nothing")
    rc = gate_cli.main(["--baseline", str(BASELINE), "--candidate", str(cand), "--triage", str(old),
                        "--allow-missing"])
    out = capsys.readouterr().out
    # an unpinned entry explains any form of its verdicts: the TIMEOUT is known (would be a regression)
    assert "known failure(s) (" in out and "unpinned)" in out.splitlines()[-1]
    [row] = [line for line in out.splitlines() if CASE in line]
    assert row.split()[:4] == ["known", CASE, "FAIL", "TIMEOUT"] and "(unpinned) (would be regression)" in row
    assert rc == 0  # the baseline's other failures are untriaged here, and unchanged


def test_forms_are_checked_when_the_triage_file_loads() -> None:
    head = "[[triage]]\ncases = ['a.*']\nreason = 'r'\n"
    forms = "[triage.forms]\n'a.b' = 'FAIL x'\n'a.c' = ['FAIL *', 'FAIL y']\n"
    ok = parse_triage(head + "verdicts = ['FAIL']\n" + forms, "t")
    assert ok.entries[0].form_known("a.b", "FAIL", "x") is True
    assert ok.entries[0].form_known("a.b", "FAIL", "z") is False
    assert ok.entries[0].form_known("a.d", "FAIL", "z") is None
    for body, words in (
        ("verdicts = ['FAIL']\n[triage.forms]\n'a.b' = 'TIMEOUT x'\n", "pins TIMEOUT"),
        ("[triage.forms]\n'b.c' = 'FAIL x'\n", "not among the entry's cases"),
        ("[triage.forms]\n'a.b' = 3\n", "VERDICT signature"),
        ("invariants = ['wire.x']\n[triage.forms]\n'a.b' = 'FAIL x'\n", "pins no forms"),
    ):
        with pytest.raises(TriageProblem, match=words):
            parse_triage(head + body, "t")


@pytest.mark.parametrize("name", sorted(p.name.removesuffix(".jsonl") for p in BASELINES.glob("*.jsonl")))
def test_every_failure_of_a_committed_baseline_is_pinned(name: str) -> None:
    triage = load_triage(BASELINES / f"{name}.triage.toml")
    for rec in records(BASELINES / f"{name}.jsonl"):
        if rec["verdict"] == "PASS":
            continue
        entry = triage.known(rec["case_id"], rec["verdict"], InvariantFacts.of(rec.get("extra")))
        assert entry is not None
        if not entry.invariants:
            assert entry.form_known(rec["case_id"], rec["verdict"], sig(rec)) is True, rec["case_id"]


# ------------------------------------------------------------------------------------ --update-triage


def test_update_triage_pins_forms_and_keeps_the_notes(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    base = shutil.copy(BASELINE, tmp_path / "garagemq.jsonl")
    unpinned = "\n".join(line for line in (BASELINES / "garagemq.triage.toml").read_text().splitlines()
                         if not line.startswith(('"', "[triage.forms]", "  \"", "]")))
    triage_file = tmp_path / "garagemq.triage.toml"
    triage_file.write_text(unpinned + "\n", encoding="utf-8")
    assert all(not e.forms for e in load_triage(triage_file).entries)
    # reviewed candidate: the login failure is now a TIMEOUT; pin it
    cand = changed_copy(tmp_path, CASE, verdict="TIMEOUT", observed="nothing within 10.0s")
    rc = gate_cli.main(["--baseline", str(base), "--candidate", str(cand), "--update-triage"])
    out = capsys.readouterr().out
    failing = sum(1 for line in BASELINE.read_text().splitlines() if json.loads(line)["verdict"] != "PASS")
    assert rc == 0 and f"triage updated: {failing} pinned from the candidate, 0 kept" in out
    text = triage_file.read_text(encoding="utf-8")
    assert text.startswith("# Triage of every non-PASS verdict of garagemq 0.1")  # comments kept
    assert "hard errors sent as channel errors: 530 / 540 arrive as channel.close" in text  # notes kept
    after = load_triage(triage_file)
    assert [(e.cases, e.reason, e.verdicts) for e in after.entries] == [
        (e.cases, e.reason, e.verdicts) for e in load_triage(BASELINES / "garagemq.triage.toml").entries]
    entry = after.known(CASE, "TIMEOUT")
    assert entry is not None and entry.pinned(CASE) == (("TIMEOUT", "timeout nothing within Ns | "
                                                          "connection.close reply-code"),)
    # the candidate now passes the gate; the committed baseline's FAIL is the changed one
    assert gate_cli.main(["--baseline", str(base), "--candidate", str(cand)]) == 0
    capsys.readouterr()
    assert gate_cli.main(["--baseline", str(base), "--candidate", str(base)]) == 1
    rows = [line.split()[:2] for line in capsys.readouterr().out.splitlines() if CASE in line]
    assert rows == [["changed", CASE]]
    # pinning again from the same run changes nothing
    before = triage_file.read_text(encoding="utf-8")
    assert gate_cli.main(["--baseline", str(base), "--candidate", str(cand), "--update-triage"]) == 0
    assert triage_file.read_text(encoding="utf-8") == before


def test_update_triage_from_repeated_runs_pins_every_form(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    base = shutil.copy(BASELINE, tmp_path / "garagemq.jsonl")
    shutil.copy(BASELINES / "garagemq.triage.toml", tmp_path / "garagemq.triage.toml")
    runs = tmp_path / "runs"
    runs.mkdir()
    write(runs / "r1.jsonl", records(BASELINE))
    write(runs / "r2.jsonl", [dict(r, run_id="r2", time=r["time"].replace("2026", "2027"),
                                   **({"observed": "402"} if r["case_id"] == CASE else {}))
                              for r in records(BASELINE)])
    assert gate_cli.main(["--baseline", str(base), "--candidate", str(runs), "--update-triage"]) == 0
    capsys.readouterr()
    entry = load_triage(tmp_path / "garagemq.triage.toml").known(CASE, "FAIL")
    assert entry is not None and {s for _, s in entry.pinned(CASE) or ()} == {
        "value 530 | connection.close reply-code", "value 402 | connection.close reply-code"}
    for observed, rc in (("530", 0), ("402", 0), ("541", 1)):
        cand = changed_copy(tmp_path, CASE, observed=observed)
        assert gate_cli.main(["--baseline", str(base), "--candidate", str(cand)]) == rc, observed
    capsys.readouterr()


def test_update_triage_needs_a_triage_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = shutil.copy(BASELINE, tmp_path / "b.jsonl")
    assert triage_beside(Path(base)) is None
    assert gate_cli.main(["--baseline", str(base), "--candidate", str(base), "--update-triage"]) == 2
    assert "--update-triage needs a triage file" in capsys.readouterr().err


def test_github_outputs_show_the_old_and_new_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from conformance.gate import github

    cand = changed_copy(tmp_path, CASE, observed="541")
    base = gate.load_side(gate.parse_selector(str(BASELINE)), [BASELINE])
    side = gate.load_side(gate.parse_selector(str(cand)), [cand])
    res = gate.compare(base, side, load_triage(BASELINES / "garagemq.triage.toml"))
    [error] = [a for a in github.github_annotations(res) if a.startswith("::error")]
    assert f"title=changed {CASE}" in error
    assert "form was: FAIL value 530 | connection.close reply-code%0Aform now: FAIL value 541" in error
    notice = [a for a in github.github_annotations(res) if a.startswith("::notice")]
    failing = sum(1 for line in BASELINE.read_text().splitlines() if json.loads(line)["verdict"] != "PASS")
    assert notice and f"{failing - 1} known" in notice[0] and "unchanged" not in notice[0]
    summary = github.step_summary(res, strict=False)
    assert "### AMQP conformance gate: FAIL" in summary and "1 changed" in summary
    assert f"| changed | `{CASE}` | FAIL | FAIL | was FAIL value 530" in summary


def test_update_triage_keeps_a_verdict_pinned_to_any_signature(tmp_path: Path) -> None:
    """A form pinned by hand to the verdict only ("FAIL *") survives --update-triage."""
    base = shutil.copy(BASELINE, tmp_path / "garagemq.jsonl")
    triage = tmp_path / "garagemq.triage.toml"
    text = (BASELINES / "garagemq.triage.toml").read_text(encoding="utf-8")
    case = "access.unknown-user-closes-403"
    lines = [('"' + case + '" = "FAIL *"') if line.startswith(f'"{case}" = ') else line
             for line in text.splitlines()]
    triage.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert gate_cli.main(["--baseline", str(base), "--candidate", str(base), "--update-triage"]) == 0
    assert f'"{case}" = "FAIL *"' in triage.read_text(encoding="utf-8")
