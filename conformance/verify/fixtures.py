"""Fixtures for scenario modules (registered with the plugin, which imports this module).

``declared_queue`` does in one call what most cases begin with: open a channel on a new
connection, give a queue a unique name, declare it and register its deletion after the case::

    def test_double_ack(declared_queue, ctx):
        ch, q = declared_queue()

``declared_exchange`` does the same for an exchange: ``ch, x = declared_exchange("fanout")``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from conformance.model.cases import case_of
from conformance.protocol.raw import RawChannel
from conformance.protocol.wire import URL
from conformance.verify.expect import ACTIVE_CONTEXT
from conformance.verify.extensions import Isolated
from conformance.verify.queue_types import declare_fields
from conformance.verify.unsupported import Unsupported

__all__ = [
    "DeclareExchange", "DeclareQueue", "active_case_context", "consumer_timeout_broker", "declared_exchange",
    "declared_queue", "isolated", "private_broker",
]


class DeclareQueue(Protocol):
    def __call__(self, suffix: str = "q", *, ch: RawChannel | None = None, confirm: bool = False,
                 **declare: Any) -> tuple[RawChannel, str]:
        """A channel and a declared queue named ``ctx.name(suffix)``, deleted after the case.

        ``ch``: declare on this channel instead of a new connection's; ``confirm``: put the new
        channel in confirm mode first; ``declare``: queue.declare fields (durable, exclusive,
        auto_delete, arguments).
        """
        ...


@pytest.fixture
def declared_queue(amqp: Any, ctx: Any, cleanup: Any, queue_type: str) -> DeclareQueue:
    # ``queue_type``: the queue is of the selected type (--amqp-queue-type); asking for it here
    # makes every case that uses this fixture run once per selected type.
    # ``amqp`` depends on ``cleanup``: connections close before the queues are deleted.
    def make(suffix: str = "q", *, ch: RawChannel | None = None, confirm: bool = False,
             **declare: Any) -> tuple[RawChannel, str]:
        channel = ch if ch is not None else amqp.channel()
        if confirm:
            channel.confirm_select()
        queue = cleanup.queue(ctx.name(suffix))
        channel.declare_queue(queue, **declare_fields(queue_type, declare))
        return channel, queue

    return make


class DeclareExchange(Protocol):
    def __call__(self, type_: str = "direct", suffix: str = "x", *, ch: RawChannel | None = None,
                 **declare: Any) -> tuple[RawChannel, str]:
        """A channel and a declared exchange of ``type_`` named ``ctx.name(suffix)``, deleted
        after the case. ``ch``: declare on this channel instead of a new connection's;
        ``declare``: exchange.declare fields (durable, auto_delete, internal, arguments).
        """
        ...


@pytest.fixture
def declared_exchange(amqp: Any, ctx: Any, cleanup: Any) -> DeclareExchange:
    def make(type_: str = "direct", suffix: str = "x", *, ch: RawChannel | None = None,
             **declare: Any) -> tuple[RawChannel, str]:
        channel = ch if ch is not None else amqp.channel()
        exchange = cleanup.exchange(ctx.name(suffix))
        channel.declare_exchange(exchange, type_, **declare)
        return channel, exchange

    return make


@pytest.fixture(autouse=True)
def active_case_context(request: pytest.FixtureRequest) -> Iterator[None]:
    """While a conformance case runs, its ``ctx`` is the one ``expect.check`` records into."""
    if case_of(request.node) is None:
        yield  # not a conformance case (the project's own tests): no context, nothing started
        return
    token = ACTIVE_CONTEXT.set(request.getfixturevalue("ctx"))
    try:
        yield
    finally:
        ACTIVE_CONTEXT.reset(token)


@pytest.fixture
def private_broker(
    request: pytest.FixtureRequest, broker_url: URL
) -> Iterator[tuple[URL, dict[str, bool] | None]]:
    """(url, health) of a broker private to this worker where the suite can spawn one, else the target
    itself. For a case that can take a broker down (garagemq stops answering after a queue is deleted
    under an active consumer; its process ends on connection.update-secret), so that it does not
    cascade into other cases: the private broker is killed and started again after the case unless
    the case sets ``health["healthy"] = True``."""


    try:
        target = request.getfixturevalue("restartable")
    except Unsupported:
        yield broker_url, None
        return
    health = {"healthy": False}
    yield target.url, health
    if not health["healthy"]:
        # Killed, not stopped: nothing of its state is needed after the case, and a wedged broker
        # ignores a clean stop (garagemq, wedged, never exits on SIGTERM: each reset waited out its
        # 20 s stop timeout before the kill it came to anyway).
        target.controller.restart(kill=True)


@pytest.fixture
def isolated(request: pytest.FixtureRequest, private_broker: tuple[URL, dict[str, bool] | None],
             cleanup: Any, case_timeout: float) -> Iterator[Isolated]:
    """Where an extension case runs (:class:`conformance.verify.extensions.Isolated`): the worker's
    private broker, kept for the next case only when it is still fit after this one; else the
    target, the entities going to ``cleanup``."""
    url, health = private_broker
    if health is None:
        iso = Isolated(url, case_timeout, cleanup)
        yield iso
        iso.close()  # before ``cleanup`` deletes the queues the case's consumers are on
        return
    iso = Isolated(url, case_timeout, type(cleanup)(url, case_timeout, cleanup.notes))
    yield iso
    health["healthy"] = iso.tidy(request.node.nodeid)


#: The delivery acknowledgement timeout of the private broker the consumer_timeout cases get on a
#: spawned target (ms): short, so the case waits little; that broker serves nothing else.
PRIVATE_CONSUMER_TIMEOUT = 1000
CONSUMER_TIMEOUT_KINDS = ("reference", "local:rabbitmq", "local:rabbitmq@")  # registry kinds


@pytest.fixture
def consumer_timeout_broker(conformance_state: Any) -> tuple[Any, int]:
    """(url, timeout in ms) of a broker with a known delivery acknowledgement timeout: on a spawned
    reference or local:rabbitmq target a broker private to this worker started with
    :data:`PRIVATE_CONSUMER_TIMEOUT` (the shared one keeps the default, so no other case's unacked
    deliveries are ever timed out); a url target gives its value with --amqp-consumer-timeout;
    UNSUPPORTED otherwise, naming the option."""
    from conformance.model.verdicts import CaseTimeout
    from conformance.targets import spawn_private
    from conformance.targets.base import TargetError
    from conformance.targets.kinds import kind_of

    state = conformance_state
    kind = state.target_name or ""
    if kind == "url":
        value = state.limits.get("consumer_timeout")
        if value is None:
            raise Unsupported("the consumer_timeout cases need the broker's delivery "
                              "acknowledgement timeout: "
                              "give --amqp-consumer-timeout MS with --broker-url")
        return state.url, int(value)
    registered = kind_of(kind)
    if registered is None or registered.name not in CONSUMER_TIMEOUT_KINDS:
        raise Unsupported(f"the suite cannot set the consumer timeout of a {kind} broker (spawned reference "
                          "and local:rabbitmq targets, or --amqp-consumer-timeout with --broker-url)")
    key = f"{kind}+consumer-timeout"
    if key not in state.private:
        try:
            state.private[key] = spawn_private(kind, tls=state.settings.target.tls, restricted=False,
                                               consumer_timeout=PRIVATE_CONSUMER_TIMEOUT)
        except TargetError as exc:
            raise CaseTimeout(f"a private {kind} broker with a consumer timeout", state.case_timeout,
                              observed=str(exc)) from exc
    return state.private[key].url, PRIVATE_CONSUMER_TIMEOUT
