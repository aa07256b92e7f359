from __future__ import annotations

import pytest

from conformance.broker.model import Broker

from .link import FakeClock, Link, make_broker


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(clock: FakeClock) -> Broker:
    return make_broker(clock)


@pytest.fixture
def link(broker: Broker) -> Link:
    return Link(broker)
