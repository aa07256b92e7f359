"""The committed verdict baselines: well-formed, and every non-PASS verdict triaged (through the
same parser and matching rule the gate uses, so what this test accepts the gate accepts)."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest

from conformance.gate.triage import InvariantFacts, load_triage, triage_beside

BASELINES = Path(__file__).resolve().parents[2] / "fixtures" / "baselines"
NAMES = sorted(p.name.removesuffix(".jsonl") for p in BASELINES.glob("*.jsonl"))


def _records(name: str) -> list[dict[str, object]]:
    return [
        json.loads(line) for line in (BASELINES / f"{name}.jsonl").read_text().splitlines() if line.strip()
    ]


@pytest.mark.parametrize("name", NAMES)
def test_every_non_pass_verdict_has_a_triage_reason(name: str) -> None:
    records = _records(name)
    assert records, "an empty baseline gates nothing"
    assert len({r["run_id"] for r in records}) == 1, "a baseline is one run"
    assert len({r["case_id"] for r in records}) == len(records), "one record per case"
    beside = triage_beside(BASELINES / f"{name}.jsonl")
    assert beside is not None, f"{name}.triage.toml is missing (the gate reads it beside the baseline)"
    triage = load_triage(beside)
    untriaged = [
        f"{r['case_id']} {r['verdict']}"
        for r in records
        if r["verdict"] != "PASS"
        and triage.known(str(r["case_id"]), str(r["verdict"]), InvariantFacts.of(r.get("extra"))) is None
    ]
    assert untriaged == []


@pytest.mark.parametrize("name", NAMES)
def test_no_triage_entry_is_stale(name: str) -> None:
    """Each glob of the triage file names a case of the baseline (a renamed case would leave one behind)."""
    ids = [str(r["case_id"]) for r in _records(name)]
    beside = triage_beside(BASELINES / f"{name}.jsonl")
    assert beside is not None
    stale = [g for e in load_triage(beside).entries for g in e.cases if not fnmatch.filter(ids, g)]
    assert stale == []


def test_there_is_a_garagemq_baseline() -> None:
    assert "garagemq" in NAMES
