"""The committed verdict baselines: well-formed, and every non-PASS verdict triaged."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path

import pytest

BASELINES = Path(__file__).resolve().parents[2] / "fixtures" / "baselines"
NAMES = sorted(p.stem for p in BASELINES.glob("*.jsonl"))


@pytest.mark.parametrize("name", NAMES)
def test_every_non_pass_verdict_has_a_triage_reason(name: str) -> None:
    records = [json.loads(line) for line in (BASELINES / f"{name}.jsonl").read_text().splitlines() if line.strip()]
    assert records, "an empty baseline gates nothing"
    assert len({r["run_id"] for r in records}) == 1, "a baseline is one run"
    triage = tomllib.loads((BASELINES / f"{name}.triage.toml").read_text())["triage"]
    for entry in triage:
        assert entry["reason"].strip() and entry["cases"]
    untriaged = [r["case_id"] for r in records if r["verdict"] != "PASS"
                 and not any(fnmatch.fnmatchcase(r["case_id"], g) for e in triage for g in e["cases"])]
    assert untriaged == []


def test_there_is_a_garagemq_baseline() -> None:
    assert "garagemq" in NAMES
