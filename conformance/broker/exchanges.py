"""Exchanges, bindings and the matching rules of the four exchange types."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import amqp_type_name, precondition

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
    """AMQP topic matching: '*' is exactly one word, '#' zero or more words."""
    pw = pattern.split(".")
    kw = key.split(".")
    # dp over (pattern index, key index); small inputs, so a set of reachable states.
    states = {(0, 0)}
    seen: set[tuple[int, int]] = set()
    while states:
        i, j = states.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(pw):
            if j == len(kw):
                return True
            continue
        word = pw[i]
        if word == "#":
            states.add((i + 1, j))
            if j < len(kw):
                states.add((i, j + 1))
        elif j < len(kw) and (word == "*" or word == kw[j]):
            states.add((i + 1, j + 1))
    return False


def headers_match(binding_args: dict[str, Any], headers: dict[str, Any] | None) -> bool:
    headers = headers or {}
    mode = binding_args.get("x-match", "all")
    with_x = mode in ("all-with-x", "any-with-x")
    pairs = [
        (k, v) for k, v in binding_args.items() if k != "x-match" and (with_x or not k.startswith("x-"))
    ]
    if mode in ("any", "any-with-x"):
        return any(k in headers and (v is None or headers[k] == v) for k, v in pairs)
    return all(k in headers and (v is None or headers[k] == v) for k, v in pairs)


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

    def matches(self, routing_keys: tuple[str, ...], headers: dict[str, Any] | None) -> Iterator[Binding]:
        if self.type == "fanout":
            yield from self.bindings.values()
        elif self.type == "direct":
            for b in self.bindings.values():
                if b.routing_key in routing_keys:
                    yield b
        elif self.type == "topic":
            for b in self.bindings.values():
                if any(topic_match(b.routing_key, rk) for rk in routing_keys):
                    yield b
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
