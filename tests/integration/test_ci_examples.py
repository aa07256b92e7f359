"""The CI recipes in examples/ run as written: their command lines against the reference broker.

Each recipe is run twice, in fresh folders as CI jobs are: once recording the baseline (the
documented first step), once gating against it. Only the environment differs from a vendor's
CI: the broker URL is the reference broker's, and SUITE_ARGS picks one area without the Spark
report and without xdist workers, so the test stays quick.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.scenarios import all_cases
from conformance.targets import Target
from conformance.targets.reference import start_reference

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / "examples" / "github-actions" / "broker-release.yml"
GITLAB = ROOT / "examples" / "gitlab" / "broker-release.gitlab-ci.yml"
EXCHANGE_CASES = sum(1 for c in all_cases() if c.area == "exchange")
SUITE_ARGS = "-n 0 --area exchange --no-report"  # -n 0: the area's cases in the run's own process


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    target = start_reference(tmp_path_factory.mktemp("ref"))
    try:
        yield target
    finally:
        target.close()


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``amqp-conformance`` on PATH running this tree's code (not an installed copy)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    exe = bin_dir / "amqp-conformance"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m conformance.cli "$@"\n', encoding="utf-8")
    exe.chmod(0o755)
    return bin_dir


def run_script(script: str, cwd: Path, env: dict[str, str], shim: Path) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    full.pop("GITHUB_ACTIONS", None)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=300)


def github_steps() -> dict[str, Any]:
    doc = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))
    steps = doc["jobs"]["conformance"]["steps"]
    return {s["name"]: s for s in steps if "name" in s}


def test_github_recipe_shape() -> None:
    doc = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))
    job = doc["jobs"]["conformance"]
    assert "broker" in job["services"] and "--health-cmd" in job["services"]["broker"]["options"]
    steps = github_steps()
    assert steps["Install the suite"]["run"] == 'pip install "amqp-conformance[report]"'
    upload = steps["Upload JUnit, allure results, the HTML report and the gate's JSON"]
    for path in ("reports/junit/", "reports/allure-results/", "reports/*/index.html", "reports/gate.json"):
        assert path in upload["with"]["path"]
    assert upload["if"] == "${{ always() }}"


def test_github_recipe_records_then_gates(broker: Target, shim: Path, tmp_path: Path) -> None:
    steps = github_steps()
    baseline = tmp_path / "repo" / "conformance" / "baseline.jsonl"
    results = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))["env"]["RESULTS"]
    env = {"AMQP_URL": str(broker.url), "BASELINE": str(baseline), "SUITE_ARGS": SUITE_ARGS}
    first, second = tmp_path / "job1", tmp_path / "job2"
    for n, (job, final) in enumerate(((first, "Record a new baseline"),
                                      (second, "Gate against the committed baseline"))):
        job.mkdir()
        # GitHub substitutes ${{ … }} before the shell runs.
        env["RESULTS"] = results.replace("${{ github.run_id }}", str(n)).replace(
            "${{ github.run_attempt }}", "1")
        for name in ("Run the suite", final):
            proc = run_script(steps[name]["run"], job, env, shim)
            assert proc.returncode == 0, f"{name}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    assert baseline.exists() and len(baseline.read_text(encoding="utf-8").splitlines()) == EXCHANGE_CASES
    gate = json.loads((second / "reports" / "gate.json").read_text(encoding="utf-8"))
    assert gate["verdict"] == "PASS" and gate["candidate"]["n_cases"] == EXCHANGE_CASES
    assert (
        list((second / "reports" / "junit").glob("*.xml"))
        and (second / "reports" / "allure-results").is_dir()
    )
    # The same gate line fails against a baseline of another broker (the recipe can say no).
    env["BASELINE"] = str(ROOT / "fixtures" / "baselines" / "garagemq.jsonl")
    proc = run_script(steps["Gate against the committed baseline"]["run"], second, env, shim)
    assert proc.returncode == 1 and "broker product differs" in proc.stdout


def test_gitlab_recipe_records_then_gates(broker: Target, shim: Path, tmp_path: Path) -> None:
    job = yaml.safe_load(GITLAB.read_text(encoding="utf-8"))["conformance"]
    assert job["services"][0]["alias"] == "broker" and job["variables"]["AMQP_URL"].endswith("@broker:5672/")
    assert job["artifacts"]["reports"]["junit"] == "reports/junit/*.xml"
    baseline = tmp_path / "conformance" / "baseline.jsonl"
    for n, update in ((1, "1"), (2, "0")):
        cwd = tmp_path / f"pipeline{n}"
        cwd.mkdir()
        env = {
            **job["variables"],
            "AMQP_URL": str(broker.url),
            "BASELINE": str(baseline),
            "SUITE_ARGS": SUITE_ARGS,
            "UPDATE_BASELINE": update,
            # GitLab expands predefined variables inside variables: values.
            "RESULTS": job["variables"]["RESULTS"].replace("$CI_JOB_ID", str(n)),
        }
        for line in job["script"]:
            proc = run_script(line, cwd, env, shim)
            assert proc.returncode == 0, f"{line}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    assert (
        json.loads((tmp_path / "pipeline2" / "reports" / "gate.json").read_text(encoding="utf-8"))["verdict"]
        == "PASS"
    )
