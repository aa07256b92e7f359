"""The release gate (conformance.gate.compare): pure Python, over the golden sets and the baseline."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conformance.gate import cli as gate_cli
from conformance.gate import compare as gate
from conformance.gate import github as gate_github
from conformance.gate.triage import TriageProblem, load_triage, parse_triage

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "fixtures" / "results"
R12 = GOLDEN / "rabbitmq-3.12.0.jsonl"
R13 = GOLDEN / "rabbitmq-3.13.0.jsonl"
BASELINE = ROOT / "fixtures" / "baselines" / "garagemq.jsonl"
RABBIT = ["--results", str(R12), str(R13)]


def run_gate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = gate_cli.main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_gate_fails_on_a_regression(capsys: pytest.CaptureFixture[str]) -> None:
    # 3.12.0 holds two runs of 11 cases; 3.13.0 one run of the same 11 cases.
    rc, out, _ = run_gate(capsys, "--baseline", str(R12), "--candidate", str(R13))
    assert rc == 1
    lines = out.splitlines()
    assert lines[0].split() == ["KIND", "CASE", "BASELINE", "CANDIDATE", "NOTE"]
    assert lines[1].split()[:4] == ["regression", "acks.double-ack-406", "PASS", "FAIL"]
    assert lines[2].split()[:4] == ["new-non-strict", "reject.requeue-head", "PASS", "NON_STRICT"]
    assert lines[-1].startswith("gate FAIL: 1 regression(s), 0 changed, 0 untriaged new failure(s), "
                                "1 new NON_STRICT (fail with --strict), 0 missing case(s)")


def test_gate_selectors_and_strict(capsys: pytest.CaptureFixture[str]) -> None:
    # Reversed, 3.13.0 → 3.12.0 has no PASS → FAIL and no new NON_STRICT: passes.
    rc, out, _ = run_gate(capsys, "--baseline", "version:3.13.0", "--candidate", "version:3.12.0", *RABBIT)
    assert rc == 0
    assert "gate PASS: 0 regression(s), 0 changed, 0 untriaged new failure(s), 0 new NON_STRICT" in out
    assert out.splitlines()[1].split()[:4] == ["fixed", "acks.double-ack-406", "FAIL", "PASS"]
    # Run r1 (exclusive TIMEOUT) → run r2 (all PASS): nothing; r2 → r1: a TIMEOUT regression.
    rc, out, _ = run_gate(
        capsys, "--baseline", "run:20240501T020000Z-r1", "--candidate", "run:20240502T020000Z-r2", *RABBIT
    )
    assert rc == 0
    rc, out, _ = run_gate(
        capsys, "--baseline", "run:20240502T020000Z-r2", "--candidate", "run:20240501T020000Z-r1", *RABBIT
    )
    assert rc == 1 and "exclusive.other-connection-405" in out
    rc, _, _ = run_gate(
        capsys,
        "--baseline",
        "broker:RabbitMQ@3.13.0",
        "--candidate",
        "broker:RabbitMQ@3.13.0",
        "--strict",
        *RABBIT,
    )
    assert rc == 0


def test_gate_strict_fails_on_new_non_strict_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = records(R13)
    for r in rows:
        if r["case_id"] == "acks.double-ack-406":
            r["verdict"] = "PASS"
    cand = write(tmp_path / "cand.jsonl", rows)
    assert run_gate(capsys, "--baseline", str(R12), "--candidate", str(cand))[0] == 0
    assert run_gate(capsys, "--baseline", str(R12), "--candidate", str(cand), "--strict")[0] == 1


@pytest.mark.parametrize(
    ("baseline", "candidate", "kind"),
    [
        ("PASS", "FAIL", "regression"),
        ("PASS", "TIMEOUT", "regression"),
        ("PASS", "ERROR", "regression"),
        ("PASS", "NOT_RUN", "regression"),
        ("FAIL", "TIMEOUT", "regression"),
        ("NON_STRICT", "ERROR", "regression"),
        ("UNSUPPORTED", "ERROR", "regression"),
        ("ERROR", "ERROR", None),
        ("FAIL", "FAIL", None),
        ("TIMEOUT", "FAIL", None),
        ("FAIL", "NOT_RUN", None),
        ("FAIL", "PASS", None),
        ("PASS", "UNSUPPORTED", None),
        (None, "FAIL", "new-failure"),
        (None, "NOT_RUN", "new-failure"),
        (None, "PASS", None),
        (None, "NON_STRICT", "new-non-strict"),
        ("PASS", "NON_STRICT", "new-non-strict"),
        ("NON_STRICT", "NON_STRICT", None),
    ],
)
def test_transition_rule(baseline: str | None, candidate: str, kind: str | None) -> None:
    assert gate.transition(baseline, candidate) == kind


def test_another_release_of_the_broker_is_said_plainly(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A newer Debian sid (4.3.7 where the baseline holds 4.3.6): the same verdicts pass, and the gate says
    the candidate is another release than the one the baseline was recorded on."""
    base_rows = [dict(r, broker_product="RabbitMQ", broker_version="4.3.6") for r in records(BASELINE)[:30]]
    base = write(tmp_path / "rabbitmq-4.3.6.jsonl", base_rows)
    same = write(tmp_path / "same.jsonl", [dict(r, run_id="same") for r in base_rows])
    rc, out, _ = run_gate(capsys, "--baseline", str(base), "--candidate", str(same))
    assert rc == 0 and "broker release differs" not in out
    newer = write(tmp_path / "newer.jsonl",
                  [dict(r, broker_version="4.3.7", run_id="newer") for r in base_rows])
    rc, out, _ = run_gate(capsys, "--baseline", str(base), "--candidate", str(newer))
    assert rc == 0, out
    assert ("note: broker release differs: the baseline was recorded on 4.3.6, the candidate is 4.3.7; "
            "its verdicts are compared with another release's") in out
    lines = out.splitlines()
    assert lines[-2].startswith("note: broker release differs") and "gate PASS" in lines[-1]


def test_the_short_run_of_another_broker_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 26-case candidate of another broker against the whole garagemq baseline (it once said PASS)."""
    base = records(BASELINE)
    n_cases = len({r["case_id"] for r in base})
    assert n_cases >= 256
    missing = n_cases - 26
    cand_rows = [dict(r, broker_product="RabbitMQ", broker_version="3.10.8", verdict="PASS", run_id="other")
                 for r in base[:26]]
    cand = write(tmp_path / "cand26.jsonl", cand_rows)
    rc, out, _ = run_gate(capsys, "--baseline", str(BASELINE), "--candidate", str(cand))
    assert rc == 1
    assert out.splitlines()[0] == ("broker product differs: baseline garagemq, candidate RabbitMQ "
                                   "(state --allow-product-change if intended)")
    assert f"{missing} missing case(s)" in out.splitlines()[-1] and out.splitlines()[-1].startswith(
        "gate FAIL"
    )
    assert f"… and {missing - 40} more missing row(s)" in out
    # Stating both differences makes the same comparison pass: the 26 cases did not regress.
    rc, out, _ = run_gate(capsys, "--baseline", str(BASELINE), "--candidate", str(cand),
                          "--allow-missing", "--allow-product-change")
    assert rc == 0, out
    assert "note: broker product differs" in out and f"{missing} missing case(s) (allowed)" in out
    # Only the product stated: the missing cases still fail.
    assert (
        run_gate(capsys, "--baseline", str(BASELINE), "--candidate", str(cand), "--allow-product-change")[0]
        == 1
    )


def test_profile_change_fails_unless_stated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cand = write(tmp_path / "spec.jsonl", [dict(r, profile="spec") for r in records(R13)])
    rc, out, _ = run_gate(capsys, "--baseline", str(R13), "--candidate", str(cand))
    assert rc == 1 and out.startswith("profile differs: baseline rabbitmq, candidate spec")
    assert (
        run_gate(capsys, "--baseline", str(R13), "--candidate", str(cand), "--allow-profile-change")[0] == 0
    )


def test_the_committed_baseline_gates_itself_with_its_triage(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_gate(capsys, "--baseline", str(BASELINE), "--candidate", str(BASELINE))
    assert rc == 0
    assert "triage" in err and "garagemq.triage.toml" in err
    n_non_pass = sum(r["verdict"] != "PASS" for r in records(BASELINE))
    assert f"0 missing case(s), {n_non_pass} known failure(s), 0 fixed" in out


def test_triage_makes_a_known_failure_pass_and_reports_fixes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = records(BASELINE)
    failing = next(r for r in base if r["verdict"] == "FAIL" and r["case_id"] == "acks.get-ok-message-count")
    passing = next(r for r in base if r["case_id"] == "recover.requeue-false")
    assert passing["verdict"] == "PASS"
    cand_rows = []
    for r in base:
        if r is failing:
            r = dict(r, verdict="PASS")  # the broker fixed it
        elif r is passing:
            r = dict(r, verdict="TIMEOUT")  # recover.* is triaged: a known failure, reported, not failing
        cand_rows.append(r)
    cand = write(tmp_path / "cand.jsonl", cand_rows)
    out_json = tmp_path / "gate.json"
    rc, out, _ = run_gate(
        capsys, "--baseline", str(BASELINE), "--candidate", str(cand), "--json", str(out_json)
    )
    assert rc == 0, out
    doc = json.loads(out_json.read_text(encoding="utf-8"))
    by_case = {f["case_id"]: f for f in doc["findings"]}
    fixed = by_case["acks.get-ok-message-count"]
    assert (fixed["kind"], fixed["baseline_verdict"], fixed["candidate_verdict"]) == ("fixed", "FAIL", "PASS")
    assert fixed["triage"].startswith("basic.get-ok message-count is off by one")
    known = by_case[passing["case_id"]]
    assert (known["kind"], known["change"], known["failing"]) == ("known", "regression", False)
    assert doc["verdict"] == "PASS" and doc["counts"]["fixed"] == 1
    # A new case that passes under a triaged glob fixed nothing.
    new_case = dict(failing, case_id="acks.get-ok-message-count-new", verdict="PASS")
    cand2 = write(tmp_path / "cand2.jsonl", [*cand_rows, new_case])
    triage2 = tmp_path / "t.toml"
    triage2.write_text(
        "[[triage]]\ncases = ['acks.get-ok-message-count*']\nreason = 'off by one'\n", encoding="utf-8"
    )
    rc, out, _ = run_gate(
        capsys, "--baseline", str(BASELINE), "--candidate", str(cand2), "--triage", str(triage2)
    )
    assert "acks.get-ok-message-count-new" not in out and "1 fixed" in out
    # Without the triage file the same TIMEOUT is a regression.
    assert run_gate(capsys, "--baseline", str(BASELINE), "--candidate", str(cand), "--no-triage")[0] == 1


def test_triage_never_hides_error_or_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = records(BASELINE)
    victim = next(r for r in base if r["case_id"] == "recover.requeue-false")
    for verdict in ("ERROR", "NOT_RUN"):
        cand = write(
            tmp_path / f"{verdict}.jsonl", [dict(r, verdict=verdict) if r is victim else r for r in base]
        )
        rc, out, _ = run_gate(capsys, "--baseline", str(BASELINE), "--candidate", str(cand))
        assert rc == 1 and f"regression  {victim['case_id']}" in out
        assert "1 regression(s)" in out


def test_json_to_stdout_and_github_annotations(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    rc, out, err = run_gate(capsys, "--baseline", str(R12), "--candidate", str(R13), "--json")
    assert rc == 1
    doc = json.loads(out)  # stdout is only the JSON document
    assert doc["verdict"] == "FAIL" and doc["counts"]["regression"] == 1
    assert doc["baseline"]["n_records"] == 22 and doc["candidate"]["n_cases"] == 11
    error = next(ln for ln in err.splitlines() if ln.startswith("::error "))
    props, _, message = error[len("::error "):].partition("::")
    assert props.startswith("file=") and ",line=" in props and "title=regression acks.double-ack-406" in props
    assert message.startswith("acks.double-ack-406: PASS → FAIL (MUST)%0Aexpected: ")
    # Only what fails the gate is annotated; what it let through is one notice line of counts.
    commands = [ln for ln in err.splitlines() if ln.startswith("::")]
    assert not any(ln.startswith("::warning ") for ln in commands)
    assert "reject.requeue-head" not in "\n".join(commands)
    notices = [ln for ln in commands if ln.startswith("::notice ")]
    assert len(notices) == 1 and notices[0].startswith("::notice title=gate%3A allowed gaps::not failing")
    assert len([ln for ln in commands if ln.startswith("::error ")]) == doc["counts"]["regression"] + sum(
        1 for f in doc["findings"] if f["failing"] and f["kind"] != "regression")
    # The job summary gets the verdict and the table.
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run_gate(capsys, "--baseline", str(R12), "--candidate", str(R13))
    md = summary.read_text(encoding="utf-8")
    assert md.startswith("### AMQP conformance gate: FAIL\n")
    assert "| regression | `acks.double-ack-406` | PASS | FAIL |" in md
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    # Outside GitHub Actions: no workflow commands.
    monkeypatch.delenv("GITHUB_ACTIONS")
    _, out, err = run_gate(capsys, "--baseline", str(R12), "--candidate", str(R13))
    assert "::" not in out + err


def test_annotations_of_allowed_gaps_are_one_line(tmp_path: Path) -> None:
    # 250 allowed findings (known failures, allowed missing cases) must not become 250 annotations.
    base = records(BASELINE)
    cand = write(tmp_path / "cand.jsonl", base[: len(base) // 2])
    side = [gate.load_side(gate.parse_selector(str(f)), gate.resolve_inputs([str(f)]))
            for f in (BASELINE, cand)]
    res = gate.compare(side[0], side[1],
                       load_triage(BASELINE.with_suffix(".triage.toml")), gate.Options(allow_missing=True))
    assert not res.failed and res.counts["missing"] > 100
    lines = gate_github.github_annotations(res)
    assert len(lines) == 1 and lines[0].startswith("::notice ")
    assert f"{res.counts['missing']} missing" in lines[0] and f"{res.counts['known']} known" in lines[0]
    # The same candidate without --allow-missing: each missing case is an error, and nothing else.
    res = gate.compare(res.baseline, res.candidate, load_triage(BASELINE.with_suffix(".triage.toml")),
                       gate.Options())
    errors = [ln for ln in gate_github.github_annotations(res) if ln.startswith("::error ")]
    assert len(errors) == res.counts["missing"]


def test_annotation_escaping() -> None:
    assert gate_github._escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert gate_github._escape_data("a:b,c%\r\n") == "a:b,c%25%0D%0A"


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_gate(capsys, "--baseline", "version:9.9.9", "--candidate", "version:3.13.0", *RABBIT)
    assert rc == 2
    assert err.strip().splitlines() == [
        f"amqp-conformance gate: selector version:9.9.9 matched no result records in {R12} {R13}"]
    rc, _, err = run_gate(capsys, "--baseline", "broker:RabbitMQ", "--candidate", "version:3.13.0")
    assert rc == 2 and "is not broker:<product>@<version>" in err
    rc, _, err = run_gate(capsys, "--baseline", str(tmp_path / "missing.jsonl"), "--candidate", str(R13))
    assert (rc, err.strip()) == (
        2,
        f"amqp-conformance gate: no such results file or folder: {tmp_path / 'missing.jsonl'}",
    )
    # The golden garagemq set has a line cut short: a gate does not skip what it cannot read.
    rc, _, err = run_gate(capsys, "--baseline", str(R12), "--candidate", str(GOLDEN / "garagemq-0.1.0.jsonl"))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "garagemq-0.1.0.jsonl:5: not a JSON line" in err
    notes = tmp_path / "notes.txt"
    notes.write_text('{"a": 1}\n', encoding="utf-8")
    rc, _, err = run_gate(capsys, "--baseline", str(R12), "--candidate", str(notes))
    assert rc == 2 and "notes.txt:1: not a result record: missing or mistyped area, " in err
    assert "run_id" in err
    bad_triage = tmp_path / "t.toml"
    bad_triage.write_text("[[triage]]\ncases = ['x.*']\n", encoding="utf-8")
    rc, _, err = run_gate(
        capsys, "--baseline", str(R12), "--candidate", str(R13), "--triage", str(bad_triage)
    )
    assert rc == 2 and err.strip().endswith("[[triage]] #1: reason must say why the verdict is the broker's")


def test_triage_file_format() -> None:
    t = load_triage(BASELINE.with_name("garagemq.triage.toml"))
    assert t.known("tx.commit-ok", "TIMEOUT") is not None
    assert t.known("tx.commit-ok", "ERROR") is None and t.known("tx.commit-ok", "NOT_RUN") is None
    only = parse_triage("[[triage]]\ncases=['a.*']\nreason='r'\nverdicts=['FAIL', 'error']\n", "x.toml")
    assert only.known("a.b", "ERROR") is not None and only.known("a.b", "TIMEOUT") is None
    for text, message in (
        ("[[triage]]\ncases=['a']\nreason='r'\nverdicts=['PASS']\n", "cannot be expected failures"),
        ("[[triage]]\ncases=[]\nreason='r'\n", "cases must be a non-empty list"),
        ("[[triage]]\ncases=['a']\nreason='r'\nwhy='?'\n", "unknown key(s) why"),
        ("[[triage]\n", "not valid TOML"),
    ):
        with pytest.raises(TriageProblem, match=message.replace("(", r"\(").replace(")", r"\)")):
            parse_triage(text, "x.toml")


def test_update_baseline_writes_one_run_deliberately(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = records(R13)
    rows[0]["extra"] = {"trace": ["frame"] * 3, "url": "u"}
    cand = write(tmp_path / "cand.jsonl", rows)
    target = tmp_path / "base" / "rabbitmq.jsonl"
    rc, out, _ = run_gate(capsys, "--baseline", str(target), "--candidate", str(cand), "--update-baseline")
    assert rc == 0 and out.startswith(f"baseline created: 11 cases of run 20240503T020000Z-r3 → {target}")
    written = records(target)
    assert [r["case_id"] for r in written] == sorted(r["case_id"] for r in rows)
    assert all("trace" not in r["extra"] for r in written)
    # Updating over an older baseline compares first (the regression is shown), then writes: exit 0.
    old = write(tmp_path / "old.jsonl", records(R12)[11:])
    rc, out, _ = run_gate(capsys, "--baseline", str(old), "--candidate", str(cand), "--update-baseline")
    assert rc == 0 and "regression" in out and out.splitlines()[-1].startswith("baseline updated: 11 cases")
    assert records(old) == written
    # Two runs are not one baseline.
    rc, _, err = run_gate(capsys, "--baseline", str(target), "--candidate", str(R12), "--update-baseline")
    assert rc == 2 and "a baseline is one run; the candidate holds 2 runs" in err


def test_update_baseline_writes_a_readable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A baseline is committed and read by CI and colleagues: 0644 under umask 022, not mkstemp's 0600.
    import os
    import stat

    target = tmp_path / "rabbitmq.jsonl"
    old_mask = os.umask(0o022)
    try:
        rc, _, _ = run_gate(capsys, "--baseline", str(target), "--candidate", str(R13), "--update-baseline")
    finally:
        os.umask(old_mask)
    assert rc == 0 and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert os.umask(old_mask) == old_mask  # the gate left the process's umask as it found it
    assert not list(tmp_path.glob("*.tmp"))


def _synthetic(n_cases: int, run: str, fail_every: int) -> str:
    rec = records(R13)[0]
    out = []
    for i in range(n_cases):
        out.append(json.dumps(dict(rec, case_id=f"area{i % 20}.case-{i}", run_id=run,
                                   verdict="FAIL" if i % fail_every == 0 else "PASS")))
    return "\n".join(out) + "\n"


def test_twenty_thousand_rows_compare(tmp_path: Path) -> None:
    base = tmp_path / "base.jsonl"
    cand = tmp_path / "cand.jsonl"
    base.write_text(_synthetic(10_000, "b", 1000), encoding="utf-8")
    cand.write_text(_synthetic(10_000, "c", 999), encoding="utf-8")
    out = io.StringIO()
    started = time.perf_counter()
    rc = gate_cli.main(
        ["--baseline", str(base), "--candidate", str(cand), "--json", str(tmp_path / "g.json")], out=out
    )
    elapsed = time.perf_counter() - started
    assert rc == 1  # cases 999, 1998, … regressed
    doc = json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))
    assert doc["baseline"]["n_records"] + doc["candidate"]["n_records"] == 20_000
    assert doc["counts"]["regression"] == 10
    # A figure, not a verdict: wall-clock limits fail on a loaded CI machine (performance is measured
    # by benchmarks, not by timed tests).
    print(f"gate: 20,000 rows in {elapsed:.3f} s")


def test_the_command_line_has_no_jvm_and_no_spark() -> None:
    code = ("import sys; from conformance import cli; rc = cli.main(['gate', '--baseline', sys.argv[1], "
            "'--candidate', sys.argv[1]]); assert 'pyspark' not in sys.modules; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(R13)], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("gate PASS")


def test_invariant_scoped_triage_excuses_the_invariant_never_the_case() -> None:
    from conformance.gate.triage import InvariantFacts, parse_triage

    t = parse_triage('[[triage]]\ncases = ["*"]\ninvariants = ["wire.nothing-after-channel-close"]\n'
                     'reason = "answers after its own close"\n', "t.toml")
    only_invariant = InvariantFacts(frozenset({"wire.nothing-after-channel-close"}), "PASS")
    assert t.known("acks.double-ack-406", "FAIL", only_invariant) is not None
    assert t.known(
        "x.y", "FAIL", InvariantFacts(frozenset({"wire.nothing-after-channel-close"}), "INFORMATIONAL")
    )
    # the case's own checks failed too: not excused
    assert t.known("acks.double-ack-406", "FAIL",
                   InvariantFacts(frozenset({"wire.nothing-after-channel-close"}), "FAIL")) is None
    # another invariant broken as well, or none named, or not a FAIL: not excused
    assert t.known("a.b", "FAIL", InvariantFacts(frozenset({"wire.nothing-after-channel-close",
                                                            "wire.frame-max"}), "PASS")) is None
    assert t.known("a.b", "FAIL") is None and t.known("a.b", "TIMEOUT", only_invariant) is None
    # a scoped entry names no case, so a passing case is not reported as fixed by it
    assert t.listed("acks.double-ack-406") is None


def test_mutation_run_records_are_not_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A mutate session's records (extra.mutant) in a results folder neither regress nor pass a case:
    only runs of the suite are compared; a file of nothing else is refused in one line."""
    base = records(BASELINE)
    mutated = [{**r, "verdict": "FAIL", "extra": {**r.get("extra", {}), "mutant": "confirms.ack-as-nack",
                                                  "mutate_session": "s1"}} for r in base]
    folder = tmp_path / "results"
    folder.mkdir()
    write(folder / "run.jsonl", base)
    write(folder / "s1.jsonl", mutated)
    (folder / "s1.summary.json").write_text('{"target": "reference"}\n', encoding="utf-8")
    rc, out, err = run_gate(capsys, "--baseline", str(BASELINE), "--candidate", str(folder))
    assert rc == 0, out + err
    assert "regression" not in out.split("gate")[0]
    rc, _out, err = run_gate(capsys, "--baseline", str(BASELINE), "--candidate", str(folder / "s1.jsonl"))
    assert rc == 2 and "only records of mutation runs" in err and len(err.strip().splitlines()) == 1


def test_faults_records_beside_the_results_are_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A results folder holds ``faults`` runs too (``record: faults.*``, no case id): the gate leaves
    them out, mixed into a results file or in a file of their own."""
    faults = [{"record": "faults.summary", "run_id": "f1", "queue_type": "quorum", "counts": {"lost": 3}},
              {"record": "faults.bucket", "run_id": "f1", "t": 0.0, "published": 5}]
    mixed = write(tmp_path / "mixed.jsonl", [*records(R13), *faults])
    only = write(tmp_path / "faults-f1-quorum.jsonl", faults)
    assert [r.case_id for r in gate.read_rows(mixed)] == [r["case_id"] for r in records(R13)]
    assert list(gate.read_rows(only)) == []
    rc, out, err = run_gate(capsys, "--baseline", str(R12), "--candidate", str(mixed), "--results", str(only))
    assert rc == 1 and "regression" in out, err
    # Without the skip, a faults line would be bad input: the check still holds for other lines.
    write(only, [*faults, {"case_id": "x"}])
    with pytest.raises(gate.GateInputError, match="not a result record"):
        list(gate.read_rows(only))
