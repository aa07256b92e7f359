"""The faults workload end to end on the reference broker (as a one-node "cluster", no nemesis):
clean, it finds nothing lost; through the confirm-then-discard proxy it reports the loss — the
checker can fail."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conformance.broker import EmbeddedBroker
from conformance.cluster.base import ClusterError, Leader, Node, Unsupported
from conformance.cluster.injector import loss_proxy
from conformance.faults.run import FaultsConfig, run_faults
from conformance.protocol.wire import URL
from conformance.targets.spec import parse_url

pytestmark = pytest.mark.integration


class OneNode:
    """A controller over one broker that can do nothing to it."""

    def __init__(self, url: URL) -> None:
        self.nodes = (Node(0, "ref", url),)

    def supports(self, action: str) -> str | None:
        return "a single reference broker has no node control"

    def _no(self, *args: object) -> None:
        raise Unsupported("no node control")

    kill = start = pause = resume = partition = _no

    def heal(self) -> None:
        self._no()

    def leader(self, queue: str, vhost: str = "/") -> Leader:
        raise ClusterError("no leader on one node")

    def set_policy(self, name: str, pattern: str, definition: str, vhost: str = "/") -> None:
        self._no()

    def clear_policy(self, name: str, vhost: str = "/") -> None:
        self._no()

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


# The workload ends once MESSAGES publishes are confirmed (a loaded machine just takes longer);
# the duration is only the bound on that.
MESSAGES = 400
CONFIG = FaultsConfig(
    queue_type="quorum",
    messages=MESSAGES,
    duration=120.0,
    nemesis=("kill",),
    publishers=2,
    consumers=1,
    rate=200.0,
    drain_timeout=30.0,
    target="reference",
)


def test_clean_run_loses_nothing(broker: EmbeddedBroker) -> None:
    lines: list[str] = []
    result = run_faults(OneNode(parse_url(broker.url)), CONFIG, run_id="clean", log=lines.append)
    v = result.verdict
    # the goal ended the run, not the bound
    assert v.confirmed >= MESSAGES and result.duration < CONFIG.duration, (v, result.duration)
    assert v.counts["lost"] == 0 and v.counts["ok"] == v.confirmed == v.published, v.counts
    assert not result.failed
    assert result.events[0]["action"] == "unsupported"  # the nemesis said why it did nothing
    assert any("UNSUPPORTED" in line for line in lines)


def test_confirm_then_discard_is_reported_lost(broker: EmbeddedBroker) -> None:
    with loss_proxy(parse_url(broker.url), 0.05) as (url, what):
        result = run_faults(
            OneNode(url), CONFIG, run_id="inject", urls=[url], log=lambda _l: None, injected=what
        )
    v = result.verdict
    assert v.confirmed >= MESSAGES, v
    # every 20th publish is dropped and acked by the proxy: about 5 % lost, all of them "confirmed"
    assert v.counts["lost"] > 0, v.counts
    assert v.counts["lost"] == pytest.approx(v.published / 20, abs=2), v.counts
    assert v.counts["ok"] + v.counts["lost"] == v.confirmed
    assert result.failed
