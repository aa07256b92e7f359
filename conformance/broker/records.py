"""The durable log's record types and their encoding.

Each record is a frozen dataclass.  On disk a record is the tuple ``(KIND, *fields)``
(pickled inside the store's CRC frame): the kind letters and field orders are the ones
the log has always used, so a log written before these types existed recovers unchanged.
``encode`` and ``decode`` are the only places that know the tuple layout.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class ExchangeDeclared:
    KIND: ClassVar[str] = "x"
    vhost: str
    name: str
    type: str
    auto_delete: bool
    internal: bool
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ExchangeDeleted:
    KIND: ClassVar[str] = "X"
    vhost: str
    name: str


@dataclass(frozen=True, slots=True)
class QueueDeclared:
    KIND: ClassVar[str] = "q"
    vhost: str
    name: str
    auto_delete: bool
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class QueueDeleted:
    KIND: ClassVar[str] = "Q"
    vhost: str
    name: str


@dataclass(frozen=True, slots=True)
class BindingAdded:
    KIND: ClassVar[str] = "b"
    vhost: str
    source: str
    dest_kind: str  # "q" or "e"
    dest: str
    routing_key: str
    arguments: dict[str, Any]

    @property
    def key(self) -> tuple[Any, ...]:
        """Binding identity (arguments by their repr: AMQP tables are not hashable)."""
        return (self.vhost, self.source, self.dest_kind, self.dest, self.routing_key, repr(self.arguments))


@dataclass(frozen=True, slots=True)
class BindingRemoved(BindingAdded):
    KIND: ClassVar[str] = "B"


@dataclass(frozen=True, slots=True)
class MessageStored:
    """A persistent message on a durable queue; ``expires_at`` is epoch seconds (wall
    clock, so the TTL keeps running across a restart)."""

    KIND: ClassVar[str] = "m"
    vhost: str
    queue: str
    seq: int
    exchange: str
    routing_key: str
    props: bytes
    body: bytes
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class MessageDelivered:
    """Delivered at least once: comes back redelivered after a restart."""

    KIND: ClassVar[str] = "d"
    vhost: str
    queue: str
    seq: int


@dataclass(frozen=True, slots=True)
class MessagesRemoved:
    """Gone from the queue: acked, purged, expired or dead-lettered."""

    KIND: ClassVar[str] = "r"
    vhost: str
    queue: str
    seqs: tuple[int, ...]


Record = (
    ExchangeDeclared
    | ExchangeDeleted
    | QueueDeclared
    | QueueDeleted
    | BindingAdded
    | BindingRemoved
    | MessageStored
    | MessageDelivered
    | MessagesRemoved
)

_BY_KIND: dict[str, type[Record]] = {
    cls.KIND: cls
    for cls in (
        ExchangeDeclared,
        ExchangeDeleted,
        QueueDeclared,
        QueueDeleted,
        BindingAdded,
        BindingRemoved,
        MessageStored,
        MessageDelivered,
        MessagesRemoved,
    )
}


def encode(rec: Record) -> tuple[Any, ...]:
    """The on-disk tuple: the kind letter, then the fields in declaration order."""
    names = _NAMES.get(type(rec))
    if names is None:
        names = _NAMES[type(rec)] = tuple(f.name for f in fields(rec))  # once per type: fields() is slow
    return (rec.KIND, *[getattr(rec, name) for name in names])


_NAMES: dict[type, tuple[str, ...]] = {}


def decode(raw: object) -> Record:
    """The record an on-disk tuple stands for; ``ValueError`` if it is not one."""
    if not isinstance(raw, tuple) or not raw:
        raise ValueError(f"log record is not a non-empty tuple: {type(raw).__name__}")
    cls = _BY_KIND.get(raw[0]) if isinstance(raw[0], str) else None
    if cls is None:
        raise ValueError(f"unknown log record kind {raw[0]!r}")
    values = raw[1:]
    if len(values) != len(fields(cls)):
        raise ValueError(f"log record {raw[0]!r} has {len(values)} fields, expected {len(fields(cls))}")
    if cls is MessagesRemoved:
        # the first format wrote the sequence numbers as a list
        values = (*values[:2], tuple(values[2]))
    return cls(*values)
