"""A user's cluster given as URLs and command templates: every bad input is one line naming the
node or option, before anything runs (reference brokers stand in for nodes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conformance.broker import EmbeddedBroker
from conformance.cluster.base import ClusterError, Unsupported, free_port_url
from conformance.cluster.faults import main
from conformance.cluster.user import UserCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[EmbeddedBroker, EmbeddedBroker]]:
    with EmbeddedBroker() as a, EmbeddedBroker() as b:
        yield a, b


def test_template_without_node_is_refused() -> None:
    with pytest.raises(ClusterError, match=r"--node-cmd-kill 'docker kill' does not name the node"):
        UserCluster.from_options(["amqp://h1/"], None, {"kill": "docker kill"})


def test_bad_url_and_names_are_refused() -> None:
    with pytest.raises(ClusterError, match="not an amqp"):
        UserCluster.from_options(["http://h1/"], None, {})
    with pytest.raises(ClusterError, match="--node-names gives 1 names for 2"):
        UserCluster.from_options(["amqp://h1/", "amqp://h2/"], ["a"], {})


def test_unreachable_node_is_named(brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    dead = free_port_url()
    user = UserCluster.from_options([brokers[0].url, dead], ["n0", "n1"], {})
    with pytest.raises(ClusterError, match=r"node n1 .* is unreachable") as err:
        user.validate()
    assert "\n" not in str(err.value)


def test_refused_login_is_named(brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    bad = brokers[1].url.replace("guest:guest", "guest:wrong")
    user = UserCluster.from_options([brokers[0].url, bad], ["n0", "n1"], {})
    with pytest.raises(ClusterError, match=r"node n1 .* (refused the login|is unreachable)"):
        user.validate()


def test_separate_brokers_are_not_a_cluster(brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    user = UserCluster.from_options([b.url for b in brokers], ["n0", "n1"], {})
    with pytest.raises(ClusterError, match="node n1 does not see a queue declared through n0"):
        user.validate()
    UserCluster.from_options([brokers[0].url, brokers[0].url], ["n0", "n0-again"], {}).validate()


def test_actions_run_templates_and_report_failures(brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    user = UserCluster.from_options(
        [brokers[0].url], ["n0"], {"kill": "test {node} = n0", "pause": "false {node}"}
    )
    user.kill(0)  # exits 0
    assert user.supports("kill") == "no node command for start (give --node-cmd-start with {node} in it)"
    with pytest.raises(ClusterError, match=r"--node-cmd-pause 'false n0' exited with 1"):
        user.pause(0)
    with pytest.raises(Unsupported, match="no node command for resume"):
        user.resume(0)


def test_faults_cli_bad_input_exit_codes(
    brokers: tuple[EmbeddedBroker, EmbeddedBroker], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--cluster-url", brokers[0].url, "--node-cmd-kill", "docker kill"]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--node-cmd-kill" in err[0]
    assert main(["--nemesis", "flood"]) == 2
    assert main(["--cluster-size", "2"]) == 2
    urls = ",".join(b.url for b in brokers)
    assert main(["--cluster-url", urls, "--duration", "1"]) == 4
    assert "not clustered" in capsys.readouterr().err
