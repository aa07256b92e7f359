"""The cluster area against a local 3-node RabbitMQ cluster, through a proxy that drops confirmed
publishes (``--cluster-inject-loss``): the confirm cases must report the loss as FAIL — the proof
that they can fail — and every node must be gone afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cluster.local import RABBITMQ_SERVER

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.cluster,
    pytest.mark.skipif(
        shutil.which("rabbitmq-server") is None and not Path(RABBITMQ_SERVER).exists(),
        reason="rabbitmq-server is not installed",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
CASE = "cluster.confirm-survives-publisher-node.quorum"


def test_injected_loss_is_a_fail(tmp_path: Path) -> None:
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMQP_CONFORMANCE_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--broker", "local:rabbitmq-cluster",
         "--area", "cluster", "--case", CASE, "--cluster-inject-loss", "0.05", "--no-report",
         "--fail-on", "none", "--results", str(results), "--report-out", str(tmp_path / "reports")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()]
    (rec,) = [r for r in records if r.get("case_id") == CASE]
    assert rec["verdict"] == "FAIL", rec
    assert "lost" in json.dumps(rec["observed"]) or "lost" in (rec["message"] or ""), rec
