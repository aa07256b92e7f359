"""The cluster options: bad values are one line and exit 2 before anything starts; a cluster case
on a single-node target is UNSUPPORTED with the one SINGLE_NODE reason (never FAIL, never skipped)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conformance import cli
from conformance.cluster.target import SINGLE_NODE
from conformance.targets.kinds import kind_of, local, spawnable

BAD = [
    (["--cluster-size", "0"], "--cluster-size"),
    (["--cluster-size", "three"], "--cluster-size"),
    (["--cluster-url", "http://node1/"], "--cluster-url"),
    (["--cluster-url", "amqp://h1/,amqp://h1/"], "--cluster-url"),
    (["--cluster-cmd-kill", "docker kill"], "--cluster-cmd-kill"),
    (["--cluster-inject-loss", "2"], "--cluster-inject-loss"),
    (["--cluster-cmd-pause", "docker pause node1"], "--cluster-cmd-pause"),
    (["--", "--amqp-cluster-cmd-start=systemctl start rabbitmq"], "--amqp-cluster-cmd-start"),
]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("AMQP_CONFORMANCE_")]:
        monkeypatch.delenv(name)
    return tmp_path


@pytest.mark.parametrize(("argv", "option"), BAD, ids=[" ".join(a) for a, _o in BAD])
def test_bad_cluster_option_is_one_line_and_exit_2(
    argv: list[str], option: str, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["run", "--no-report", "--area", "cluster", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and option in err[0], err


def test_cluster_kinds_are_registered_but_not_single_broker_kinds() -> None:
    for name in ("local:rabbitmq-cluster", "cluster"):
        k = kind_of(name)
        assert k is not None and k.cluster and not k.restart
        assert not spawnable(k) and not local(k)  # mutate, fuzz and bench need one broker


def test_cluster_area_on_the_reference_broker_is_unsupported_with_one_reason(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = clean_env / "results"
    code = cli.main(["run", "--no-report", "--area", "cluster", "--fail-on", "UNSUPPORTED",
                     "--results", str(results)])
    records = [json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()]
    cases = [r for r in records if r.get("case_id", "").startswith("cluster.")]
    assert code == 1  # UNSUPPORTED was asked to fail the run: every case was recorded so
    assert len(cases) >= 10
    assert {r["verdict"] for r in cases} == {"UNSUPPORTED"}
    assert {r["message"] for r in cases} == {SINGLE_NODE}
