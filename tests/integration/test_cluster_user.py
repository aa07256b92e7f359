"""A user's cluster given as URLs and command templates: every bad input is one line naming the
node or option, before anything runs (reference brokers stand in for nodes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.broker import EmbeddedBroker
from conformance.cluster.base import ClusterError, Unsupported, free_port_url
from conformance.cluster.user import UserCluster
from conformance.faults.command import main
from conformance.protocol.wire import URL
from conformance.targets.spec import parse_url, target_spec

pytestmark = pytest.mark.integration


def three_spellings(url: str) -> str:
    """One broker as three --cluster-url nodes (a node named twice is refused: spell it three ways)."""
    return f"{url},{url}?heartbeat=0,{url}?connection_timeout=10000"


def urls(*given: str) -> list[URL]:
    return [parse_url(u) for u in given]


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[EmbeddedBroker, EmbeddedBroker]]:
    with EmbeddedBroker() as a, EmbeddedBroker() as b:
        yield a, b


def test_template_without_node_is_refused() -> None:
    with pytest.raises(ValueError, match=r"--cluster-cmd-kill 'docker kill' does not name the node"):
        target_spec(cluster_urls="amqp://h1/", cluster_templates={"kill": "docker kill"})


def test_bad_url_and_names_are_refused() -> None:
    with pytest.raises(ValueError, match="--cluster-url unsupported URL scheme"):
        target_spec(cluster_urls="http://h1/")
    with pytest.raises(ValueError, match="--cluster-node-names gives 1 names for 2"):
        target_spec(cluster_urls="amqp://h1/,amqp://h2/", cluster_node_names=["a"])


def test_unreachable_node_is_named(brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    dead = free_port_url()
    user = UserCluster.from_options(urls(brokers[0].url, dead), ["n0", "n1"], {})
    with pytest.raises(ClusterError, match=r"node n1 .* is unreachable") as err:
        user.validate()
    assert "\n" not in str(err.value)


def test_refused_login_is_named(brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    bad = brokers[1].url.replace("guest:guest", "guest:wrong")
    user = UserCluster.from_options(urls(brokers[0].url, bad), ["n0", "n1"], {})
    with pytest.raises(ClusterError, match=r"node n1 .* (refused the login|is unreachable)"):
        user.validate()


def test_separate_brokers_are_not_a_cluster(brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    user = UserCluster.from_options(urls(*(b.url for b in brokers)), ["n0", "n1"], {})
    with pytest.raises(ClusterError, match="node n1 does not see a queue declared through n0"):
        user.validate()
    UserCluster.from_options(urls(brokers[0].url, brokers[0].url), ["n0", "n0-again"], {}).validate()


def test_actions_run_templates_and_report_failures(brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    user = UserCluster.from_options(
        urls(brokers[0].url), ["n0"], {"kill": "test {node} = n0", "pause": "false {node}"}
    )
    user.kill(0)  # exits 0
    assert user.supports("kill") == "no node command for start (give --cluster-cmd-start with {node} in it)"
    with pytest.raises(ClusterError, match=r"--cluster-cmd-pause 'false n0' exited with 1"):
        user.pause(0)
    with pytest.raises(Unsupported, match="no node command for resume"):
        user.resume(0)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_faults_cli_bad_input_exit_codes(
    brokers: tuple[EmbeddedBroker, EmbeddedBroker], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = brokers[0].url, brokers[1].url
    same = three_spellings(a)
    results = ["--results", str(tmp_path)]
    assert main(["--cluster-url", same, "--cluster-cmd-kill", "docker kill"]) == 2
    assert "--cluster-cmd-kill" in _one_line(capsys)
    assert main(["--cluster-url", f"{a},{b},{a}?heartbeat=0", "--duration", "1", *results]) == 4
    assert "not clustered" in _one_line(capsys)
    nodes = f"{a},{free_port_url()},{a}?heartbeat=0"
    assert main(["--cluster-url", nodes, "--duration", "1", *results]) == 4
    line = _one_line(capsys)
    assert "node 127.0.0.1" in line and "unreachable" in line, line
    bad = b.replace("guest:guest", "guest:wrong")
    nodes = f"{a},{a}?heartbeat=0,{bad}"
    assert main(["--cluster-url", nodes, "--cluster-node-names", "n0,n1,n2", *results]) == 4
    assert "node n2" in _one_line(capsys)
    assert not list(tmp_path.iterdir())  # nothing ran, nothing written


def test_faults_stops_at_a_failing_node_command(
    brokers: tuple[EmbeddedBroker, EmbeddedBroker], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A node command that exits non-zero ends the schedule: exit 4, the last line names the node
    and the option, no records (the counts of a run with a node in an unknown state would mislead)."""
    a = brokers[0].url
    argv = ["--cluster-url", three_spellings(a), "--cluster-node-names", "n0,n1,n2", "--queue-type", "quorum",
            "--cluster-cmd-kill", "false {node}", "--cluster-cmd-start", "true {node}", "--nemesis", "kill",
            "--duration", "20", "--interval", "0", "--rate", "20", "--results", str(tmp_path)]
    assert main(argv) == 4
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "nemesis kill of n" in last and "--cluster-cmd-kill 'false n" in last, last
    assert "exited with 1" in last, last
    assert not list(tmp_path.iterdir())
