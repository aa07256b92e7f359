"""pika and aio-pika helpers: the cases a user's code would write, with the case deadline applied."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

from conformance.verdicts import CaseTimeout, HarnessError

T = TypeVar("T")


def pika_connection(url: str, timeout: float) -> Any:
    """A pika BlockingConnection whose socket, handshake and blocked waits are bounded."""
    import pika
    from pika import exceptions as pex

    params = pika.URLParameters(url)
    params.socket_timeout = timeout
    params.stack_timeout = timeout
    params.blocked_connection_timeout = timeout
    params.connection_attempts = 1
    params.heartbeat = 0
    try:
        return pika.BlockingConnection(params)
    except pex.AMQPConnectionError as exc:
        raise HarnessError(f"pika could not connect: {exc!r}") from exc


@contextlib.contextmanager
def pika_session(url: str, timeout: float, what: str = "the pika scenario") -> Iterator[Any]:
    """A pika BlockingConnection whose *every* blocking call is bounded, closed on exit.

    pika's blocking RPCs (queue_declare, basic_get, ...) wait without a deadline when a broker
    never answers. pika runs its timers inside those waits, so one ``call_later`` that raises
    :class:`CaseTimeout` ends whichever call is waiting at the deadline (TIMEOUT, not a hang).
    """
    conn = pika_connection(url, timeout)

    def expire() -> None:
        raise CaseTimeout(what, timeout)

    conn.call_later(timeout, expire)
    try:
        yield conn
    finally:
        if conn.is_open:
            conn.call_later(min(timeout, 2.0), expire)  # the close is bounded too
            with contextlib.suppress(Exception):
                conn.close()


def pika_version() -> str:
    import pika

    return str(pika.__version__)


def aio_pika_version() -> str:
    import aio_pika

    return str(aio_pika.__version__)


def run_async(coro: Awaitable[T], timeout: float, what: str) -> T:
    """Run an aio-pika coroutine to completion within ``timeout`` seconds (TIMEOUT otherwise)."""

    async def bounded() -> T:
        try:
            return await asyncio.wait_for(coro, timeout)
        except TimeoutError as exc:
            raise CaseTimeout(what, timeout) from exc

    return asyncio.run(bounded())


async def aio_pika_settle_then_get(url: str, queue: str, settle: str, timeout: float) -> str:
    """aio-pika: publish one message to ``queue``, ``queue.get()`` it, settle it with
    ``message.<settle>(requeue=False)`` (``reject`` or ``nack``), then ``queue.get()`` again.

    Returns ``"queue empty"`` or a description of what the second get returned; a broker error is a
    Mismatch (the case expected none).
    """
    import aio_pika
    from aiormq.exceptions import AMQPError

    from conformance.verdicts import Mismatch

    conn = await aio_pika.connect(url, timeout=timeout)
    try:
        channel = await conn.channel()
        q = await channel.declare_queue(queue)
        await channel.default_exchange.publish(aio_pika.Message(b"a1"), routing_key=queue)
        msg = await q.get(timeout=timeout, fail=False)
        if msg is None:
            raise Mismatch("queue.get()", expected="the published message", observed="queue empty")
        await getattr(msg, settle)(requeue=False)
        again = await q.get(timeout=timeout, fail=False)
        return "queue empty" if again is None else f"message {again.body!r} redelivered={again.redelivered}"
    except AMQPError as exc:
        raise Mismatch(f"aio-pika {settle}", expected="no broker error", observed=repr(exc)) from exc
    finally:
        await conn.close()
