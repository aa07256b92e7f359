"""Exchanges, bindings and the matching rules of the four exchange types."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import amqp_type_name, precondition
from .topictrie import TopicTrie

EXCHANGE_TYPES = frozenset({"direct", "fanout", "topic", "headers"})

#: RabbitMQ pre-declares these in every vhost ("amq.match" is a headers exchange).
BUILTIN_EXCHANGES: tuple[tuple[str, str], ...] = (
    ("amq.direct", "direct"),
    ("amq.fanout", "fanout"),
    ("amq.topic", "topic"),
    ("amq.headers", "headers"),
    ("amq.match", "headers"),
)


def freeze(value: Any) -> Any:
    """A hashable, order-insensitive image of an AMQP field value (for binding identity)."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


@dataclass(eq=False)
class Binding:
    source: str
    dest_kind: str  # "q" or "e"
    dest: str
    routing_key: str
    arguments: dict[str, Any]

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.dest_kind, self.dest, self.routing_key, freeze(self.arguments))


def topic_match(pattern: str, key: str) -> bool:
    """AMQP topic matching of one binding key (the exchange itself routes through its trie)."""
    trie = TopicTrie()
    trie.add(pattern, 0)
    return bool(trie.match(key))


def same_value(a: Any, b: Any) -> bool:
    """Two field values equal as RabbitMQ's headers exchange compares them (Erlang's ==): numbers by
    value (1 == 1.0), strings and byte arrays by their bytes, a boolean only equal to a boolean."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (str, bytes, bytearray)) and isinstance(b, (str, bytes, bytearray)):
        return _octets(a) == _octets(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and bool(a == b)


def _octets(v: str | bytes | bytearray) -> bytes:
    return v.encode() if isinstance(v, str) else bytes(v)


def headers_match(binding_args: dict[str, Any], headers: dict[str, Any] | None) -> bool:
    headers = headers or {}
    mode = binding_args.get("x-match", "all")
    with_x = mode in ("all-with-x", "any-with-x")
    pairs = [
        (k, v) for k, v in binding_args.items() if k != "x-match" and (with_x or not k.startswith("x-"))
    ]
    hits = (k in headers and (v is None or same_value(v, headers[k])) for k, v in pairs)
    return any(hits) if mode in ("any", "any-with-x") else all(hits)


@dataclass(eq=False)
class Exchange:
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)
    bindings: dict[tuple[Any, ...], Binding] = field(default_factory=dict)
    deleted: bool = False
    trie: TopicTrie = field(default_factory=TopicTrie, repr=False)

    def add_binding(self, b: Binding) -> None:
        self.bindings[b.key] = b
        if self.type == "topic":
            self.trie.add(b.routing_key, b.key)

    def remove_binding(self, b: Binding) -> None:
        if self.bindings.pop(b.key, None) is not None and self.type == "topic":
            self.trie.remove(b.routing_key, b.key)

    def matches(self, routing_keys: tuple[str, ...], headers: dict[str, Any] | None) -> Iterator[Binding]:
        if self.type == "fanout":
            yield from self.bindings.values()
        elif self.type == "direct":
            for b in self.bindings.values():
                if b.routing_key in routing_keys:
                    yield b
        elif self.type == "topic":
            found: set[Any] = set()
            for rk in routing_keys:
                found |= self.trie.match(rk)
            for key in found:
                yield self.bindings[key]
        else:  # headers
            for b in self.bindings.values():
                if headers_match(b.arguments, headers):
                    yield b


def check_binding_args(x: Exchange, arguments: dict[str, Any]) -> None:
    """406 for a headers binding with a bad x-match (RabbitMQ: rabbit_exchange_type_headers)."""
    if x.type != "headers" or "x-match" not in arguments:
        return
    value = arguments["x-match"]
    if not isinstance(value, str):
        raise precondition(
            f"Invalid x-match field type {amqp_type_name(value)} (value {value}); expected longstr"
        )
    if value not in ("all", "any", "all-with-x", "any-with-x"):
        raise precondition(
            f'Invalid x-match field value <<"{value}">>; expected all, any, all-with-x, or any-with-x'
        )
