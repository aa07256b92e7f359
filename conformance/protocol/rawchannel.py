"""The channel of a :class:`~conformance.protocol.raw.RawConnection`: the primitives (send, wait,
rpc) and a helper for each common method.

This module does not import the connection: a channel uses it through :class:`ChannelHost`, and
``raw.RawChannel`` (the class everyone uses) is this :class:`Channel` with its ``conn`` typed as
the whole connection."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pamqp import commands as spec
from pamqp.base import Frame

from conformance.protocol.errors import AnswerTimeout
from conformance.protocol.rawevents import Event, UnexpectedClose
from conformance.protocol.wire import decoded, method_name, method_name_from_text


class ChannelHost(Protocol):
    """What a channel uses of its connection (``raw.RawConnection`` is the one there is)."""

    timeout: float

    def send_method(self, channel: int, method: Frame) -> None: ...

    def send_if_open(self, channel: int, method: Frame) -> bool: ...

    def send_content(self, channel: int, method: Frame, body: bytes = b"",
                     properties: spec.Basic.Properties | None = None, *,
                     frame_max: int | None = None) -> None: ...

    def wait_event(self, channel: int, match: Callable[[Event], bool], what: str, *,
                   timeout: float | None = None, close_is_error: bool = True) -> Event: ...

    def history(self, channel: int) -> list[Event]: ...

    def pending(self, channel: int) -> list[Event]: ...


class Channel:
    """A channel of a connection, with helpers for the common methods."""

    def __init__(self, conn: ChannelHost, channel_id: int) -> None:
        self.conn = conn
        self.id = channel_id
        self.publish_seq = 0  # publishes sent since confirm.select (the broker's confirm sequence)

    # -- primitives ---------------------------------------------------------------------------

    def send(self, method: Frame) -> None:
        self.conn.send_method(self.id, method)

    def wait(
        self, types: type | tuple[type, ...], what: str | None = None, *, timeout: float | None = None
    ) -> Event:
        """Wait for the next pending event of one of ``types`` on this channel."""
        label = what or " or ".join(method_name(t) for t in (types if isinstance(types, tuple) else (types,)))
        return self.conn.wait_event(self.id, lambda e: isinstance(e.method, types), label, timeout=timeout)

    def rpc(self, method: Frame, *, timeout: float | None = None) -> Any:
        """Send a synchronous method and return the broker's reply method."""
        self.send(method)
        names = tuple(method.valid_responses or ())
        what = " or ".join(method_name_from_text(n) for n in names) or "a reply"
        ev = self.conn.wait_event(
            self.id,
            lambda e: e.method.name in names,
            f"{what} (reply to {method_name(method)})",
            timeout=timeout,
        )
        return ev.method

    def history(self) -> list[Event]:
        return self.conn.history(self.id)

    def pending(self) -> list[Event]:
        return self.conn.pending(self.id)

    # -- convenience ------------------------------------------------------------------------

    def declare_queue(self, name: str = "", *, durable: bool = False, exclusive: bool = False,
                      auto_delete: bool = False, passive: bool = False,
                      arguments: dict[str, Any] | None = None) -> spec.Queue.DeclareOk:
        return self.rpc(spec.Queue.Declare(queue=name, durable=durable, exclusive=exclusive,
                                           auto_delete=auto_delete, passive=passive, arguments=arguments))

    def declare_exchange(self, name: str, type: str = "direct", *, durable: bool = False,
                         auto_delete: bool = False, passive: bool = False, internal: bool = False,
                         arguments: dict[str, Any] | None = None) -> spec.Exchange.DeclareOk:
        return self.rpc(spec.Exchange.Declare(exchange=name, exchange_type=type, durable=durable,
                                              auto_delete=auto_delete, passive=passive, internal=internal,
                                              arguments=arguments))

    def bind(
        self, queue: str, exchange: str, routing_key: str = "", arguments: dict[str, Any] | None = None
    ) -> None:
        self.rpc(
            spec.Queue.Bind(queue=queue, exchange=exchange, routing_key=routing_key, arguments=arguments)
        )

    def delete_queue(
        self, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> spec.Queue.DeleteOk:
        return self.rpc(spec.Queue.Delete(queue=name, if_unused=if_unused, if_empty=if_empty))

    def purge(self, name: str) -> spec.Queue.PurgeOk:
        return self.rpc(spec.Queue.Purge(queue=name))

    def message_count(self, queue: str) -> int:
        """Messages ready in ``queue`` (passive queue.declare)."""
        return decoded(self.declare_queue(queue, passive=True).message_count)

    def publish(self, exchange: str, routing_key: str, body: bytes = b"", *,
                properties: spec.Basic.Properties | None = None, mandatory: bool = False,
                immediate: bool = False, persistent: bool = False) -> int:
        """Publish; returns the publish sequence number (meaningful in confirm mode)."""
        props = properties or spec.Basic.Properties(delivery_mode=2 if persistent else None)
        self.conn.send_content(
            self.id,
            spec.Basic.Publish(
                exchange=exchange, routing_key=routing_key, mandatory=mandatory, immediate=immediate
            ),
            body,
            props,
        )
        self.publish_seq += 1
        return self.publish_seq

    def confirm_select(self, *, nowait: bool = False) -> None:
        if nowait:
            self.send(spec.Confirm.Select(nowait=True))
        else:
            self.rpc(spec.Confirm.Select())
        self.publish_seq = 0

    def tx_select(self) -> None:
        self.rpc(spec.Tx.Select())

    def tx_commit(self) -> None:
        self.rpc(spec.Tx.Commit())

    def tx_rollback(self) -> None:
        self.rpc(spec.Tx.Rollback())

    def qos(self, prefetch_count: int, *, global_: bool = False, prefetch_size: int = 0) -> None:
        self.rpc(spec.Basic.Qos(prefetch_size=prefetch_size, prefetch_count=prefetch_count, global_=global_))

    def consume(self, queue: str, *, no_ack: bool = False, exclusive: bool = False, consumer_tag: str = "",
                arguments: dict[str, Any] | None = None) -> str:
        ok = self.rpc(spec.Basic.Consume(queue=queue, consumer_tag=consumer_tag, no_ack=no_ack,
                                         exclusive=exclusive, arguments=arguments))
        return str(ok.consumer_tag)

    def cancel(self, consumer_tag: str) -> None:
        self.rpc(spec.Basic.Cancel(consumer_tag=consumer_tag))

    def get(self, queue: str, *, no_ack: bool = False, timeout: float | None = None) -> Event | None:
        """basic.get: the get-ok event (method, properties, body), or None on get-empty."""
        self.send(spec.Basic.Get(queue=queue, no_ack=no_ack))
        ev = self.wait(
            (spec.Basic.GetOk, spec.Basic.GetEmpty), "basic.get-ok or basic.get-empty", timeout=timeout
        )
        return ev if isinstance(ev.method, spec.Basic.GetOk) else None

    def ack(self, delivery_tag: int, *, multiple: bool = False) -> None:
        self.send(spec.Basic.Ack(delivery_tag=delivery_tag, multiple=multiple))

    def nack(self, delivery_tag: int, *, multiple: bool = False, requeue: bool = True) -> None:
        self.send(spec.Basic.Nack(delivery_tag=delivery_tag, multiple=multiple, requeue=requeue))

    def reject(self, delivery_tag: int, *, requeue: bool = True) -> None:
        self.send(spec.Basic.Reject(delivery_tag=delivery_tag, requeue=requeue))

    def recover(self, *, requeue: bool = True) -> None:
        self.rpc(spec.Basic.Recover(requeue=requeue))

    def next_delivery(self, *, timeout: float | None = None, what: str = "basic.deliver") -> Event:
        return self.wait(spec.Basic.Deliver, what, timeout=timeout)

    def deliveries(self, n: int, *, timeout: float | None = None) -> list[Event]:
        """The next ``n`` deliveries; TIMEOUT (with how many came) if fewer arrive in time."""
        limit = self.conn.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        got: list[Event] = []
        while len(got) < n:
            remaining = deadline - time.monotonic()
            try:
                got.append(self.next_delivery(timeout=max(remaining, 0.0),
                                              what=f"{n} deliveries (had {len(got)})"))
            except AnswerTimeout as exc:
                raise AnswerTimeout(f"{n} deliveries", limit, observed=f"{len(got)} deliveries") from exc
        return got

    def barrier(self, *, timeout: float | None = None) -> None:
        """A round trip that proves the broker processed everything sent before on this channel.

        Uses a passive declare of ``amq.direct`` (every 0-9-1 broker has it: spec rule
        ``exchange/required-types``); any channel.close that comes first is raised.
        """
        self.barrier_send(timeout=timeout)
        self.conn.wait_event(self.id, lambda e: isinstance(e.method, spec.Exchange.DeclareOk),
                             "exchange.declare-ok (reply to exchange.declare)", timeout=timeout)

    def barrier_send(self, *, timeout: float | None = None) -> None:
        """Send the barrier's probe (a passive declare of ``amq.direct``) without waiting for its
        answer; when the broker has closed this channel already, raise that close instead."""
        probe = spec.Exchange.Declare(exchange="amq.direct", exchange_type="direct", passive=True)
        if not self.conn.send_if_open(self.id, probe):
            # The broker closed this channel already: report that close (filed right after
            # our close-ok) instead of sending a method the broker would take as a 504.
            ev = self.conn.wait_event(
                self.id,
                lambda e: isinstance(e.method, spec.Channel.Close),
                "the channel.close already answered",
                timeout=timeout,
                close_is_error=False,
            )
            raise UnexpectedClose("exchange.declare-ok (barrier)", ev)

    def close(self, *, timeout: float | None = None) -> None:
        self.send(spec.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        self.conn.wait_event(
            self.id,
            lambda e: isinstance(e.method, (spec.Channel.CloseOk, spec.Channel.Close)),
            "channel.close-ok",
            timeout=timeout,
            close_is_error=False,
        )



def tags(events: Iterable[Event]) -> list[int]:
    return [int(e.method.delivery_tag) for e in events]


def bodies(events: Iterable[Event]) -> list[bytes]:
    return [e.body or b"" for e in events]
