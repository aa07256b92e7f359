"""verify.libs.aio_pika_session against the reference broker: the connection is closed after the
block, and a broker error inside it is the library's exception or, with ``what``, our Mismatch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from conformance.broker import EmbeddedBroker
from conformance.model.verdicts import Mismatch
from conformance.protocol.wire import URL
from conformance.targets.spec import parse_url
from conformance.verify.libs import aio_pika_session, run_async


@pytest.fixture(scope="module")
def url() -> Iterator[URL]:
    with EmbeddedBroker() as b:
        yield parse_url(b.url)


def test_the_connection_is_closed_after_the_block(url: URL) -> None:
    seen: list[Any] = []

    async def scenario() -> bool:
        async with aio_pika_session(url, 5.0) as conn:
            seen.append(conn)
            channel = await conn.channel()
            await channel.declare_queue("", exclusive=True)
            return bool(conn.is_closed)

    assert run_async(scenario(), 10.0, "session") is False
    assert seen[0].is_closed


def test_a_broker_error_is_the_librarys_exception_without_what(url: URL) -> None:
    async def scenario() -> None:
        async with aio_pika_session(url, 5.0) as conn:
            channel = await conn.channel()
            await channel.declare_queue("no-such-queue-for-session-test", passive=True)

    # run_async turns the library's exception into the broker's verdict, naming the exception.
    with pytest.raises(Mismatch) as info:
        run_async(scenario(), 10.0, "passive declare")
    assert "ChannelNotFoundEntity" in info.value.observed
    assert "NOT_FOUND" in info.value.observed


def test_with_what_a_broker_error_is_our_mismatch_and_the_close_does_not_mask_it(url: URL) -> None:
    seen: list[Any] = []

    async def scenario() -> None:
        async with aio_pika_session(url, 5.0, what="passive declare", expected="declare-ok") as conn:
            seen.append(conn)
            channel = await conn.channel()
            await channel.declare_queue("no-such-queue-for-session-test", passive=True)

    with pytest.raises(Mismatch) as info:
        run_async(scenario(), 10.0, "passive declare")
    assert info.value.message == "passive declare"
    assert info.value.expected == "declare-ok"
    assert info.value.observed.startswith("<ChannelNotFoundEntity:") and "NOT_FOUND" in info.value.observed
    assert seen[0].is_closed
