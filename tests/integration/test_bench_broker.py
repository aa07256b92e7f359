"""``bench broker`` end to end on a short run against the reference broker it starts itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.bench.runner import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.bench  # a benchmark: its rates (and the confirm/tx ratio) want the cores to themselves
def test_short_run_measures_every_scenario(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "conformance.cli", "bench", "broker", "--broker", "reference",
                          "--seconds", "1", "--connections", "2", "--json-out", str(out)],
                         capture_output=True, text=True, timeout=180, env=env, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(out.read_text())
    (target,) = doc["targets"]
    assert target["label"] == "reference" and target["product"] == "amqp-conformance reference broker"
    got = {s["scenario"]: s for s in target["scenarios"]}
    assert list(got) == list(SCENARIOS)
    for name, s in got.items():
        assert not s["error"], (name, s["error"])
        assert s["messages"] > 0 and s["rate"] > 0, name
        assert s["nacked"] == 0, name
        assert 0 <= s["generator_cpu"] < 2 and s["broker_cpu"] is not None, name
        assert s["ratio_to_first"] == 1.0, name
    for name in ("publish-transient", "publish-persistent", "tx-transient", "tx-persistent"):
        assert 0 < got[name]["p50_ms"] <= got[name]["p99_ms"], name
    # Streaming confirms beat one commit per message on any broker that does both.
    assert target["confirm_over_tx"]["publish-persistent/tx-persistent"] > 1
    table = res.stdout.splitlines()
    assert table[0].startswith("msg/s (× first)") and any(ln.startswith("consume-ack ") for ln in table)
    # Progress goes to stderr, one line per scenario.
    assert sum("bench [reference]" in ln for ln in res.stderr.splitlines()) >= len(SCENARIOS)


def test_unreachable_url_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from conformance.targets.base import free_port

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "conformance.cli", "bench", "broker", "--broker-url",
                          f"amqp://guest:guest@127.0.0.1:{free_port()}/", "--seconds", "1"],
                         capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert res.returncode == 2
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("amqp-conformance bench broker:")]
    assert len(errors) == 1 and "127.0.0.1" in errors[0], res.stderr
    assert "Traceback" not in res.stderr
