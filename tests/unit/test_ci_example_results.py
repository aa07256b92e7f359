"""The CI recipes in examples/ give each run its own results folder, and the gate's candidate is that
run only: a re-run or a runner that keeps its workspace holds earlier runs under reports/results/,
and a glob over all of them would gate several runs at once (or refuse to record a baseline).

The recipes' command lines are run by bash with ``amqp-conformance`` replaced by a function that
prints its arguments, so what is checked is what a CI shell would pass.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.gate.compare import resolve_inputs

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / "examples" / "github-actions" / "broker-release.yml"
GITLAB = ROOT / "examples" / "gitlab" / "broker-release.gitlab-ci.yml"


def github_env(run_id: str) -> dict[str, str]:
    env = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))["env"]
    # GitHub substitutes ${{ … }} before the shell runs; the run attempt makes a re-run a new folder.
    return {k: str(v).replace("${{ github.run_id }}", run_id).replace("${{ github.run_attempt }}", "1")
            for k, v in env.items()}


def gitlab_env(job_id: str) -> dict[str, str]:
    variables = yaml.safe_load(GITLAB.read_text(encoding="utf-8"))["conformance"]["variables"]
    # GitLab expands predefined variables inside variables: values.
    return {k: str(v).replace("$CI_JOB_ID", job_id) for k, v in variables.items()}


def github_lines() -> list[str]:
    steps = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))["jobs"]["conformance"]["steps"]
    return [s["run"] for s in steps if "amqp-conformance " in s.get("run", "")]


def gitlab_lines() -> list[str]:
    return list(yaml.safe_load(GITLAB.read_text(encoding="utf-8"))["conformance"]["script"])


def argv_of(script: str, env: dict[str, str], cwd: Path) -> list[list[str]]:
    """The argument lists the script passes to ``amqp-conformance``, one per call."""
    shim = 'amqp-conformance() { printf "%s\\0" "$@"; printf "\\n"; }\n'
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", shim + script], cwd=cwd, capture_output=True,
                          text=True, env={"PATH": os.environ["PATH"], **env}, timeout=30, check=True)
    return [line.split("\0")[:-1] for line in proc.stdout.splitlines() if line]


def value(argv: list[str], option: str) -> str:
    return argv[argv.index(option) + 1]


RECIPES: list[Any] = [
    pytest.param(github_env, github_lines, {}, id="github"),
    pytest.param(gitlab_env, gitlab_lines, {"UPDATE_BASELINE": "0"}, id="gitlab-gate"),
    pytest.param(gitlab_env, gitlab_lines, {"UPDATE_BASELINE": "1"}, id="gitlab-update"),
]


@pytest.mark.parametrize(("env_of", "lines_of", "extra"), RECIPES)
def test_each_run_writes_and_gates_only_its_own_results(env_of: Any, lines_of: Any, extra: dict[str, str],
                                                        tmp_path: Path) -> None:
    env = {**env_of("4711"), **extra}
    calls = [argv for line in lines_of() for argv in argv_of(line, env, tmp_path)]
    runs = [a for a in calls if a[0] == "run"]
    gates = [a for a in calls if a[0] == "gate"]
    assert len(runs) == 1 and gates
    results = value(runs[0], "--results")
    assert "4711" in results and results.startswith("reports/results/")
    # The workspace also holds an earlier run, in the old shared folder and in its own folder.
    earlier = env_of("4710")
    for old in (tmp_path / "reports" / "results" / "old.jsonl",
                tmp_path / earlier["RESULTS"] / "earlier.jsonl"):
        old.parent.mkdir(parents=True, exist_ok=True)
        old.write_text("{}\n", encoding="utf-8")
    ours = tmp_path / results / "this-run.jsonl"
    ours.parent.mkdir(parents=True)
    ours.write_text("{}\n", encoding="utf-8")
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        for argv in gates:
            assert [p.resolve() for p in resolve_inputs([value(argv, "--candidate")])] == [ours.resolve()]
    finally:
        os.chdir(here)

