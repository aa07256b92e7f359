"""The routing model: where RabbitMQ's exchange types send a message, in plain Python.

The oracle (``conformance.verify.oracle``) and the routing table (``profiles/routing.toml``) are
judged against this model, and the model is tested against the table (tests/unit/test_routing_model.py).
It states RabbitMQ 3.10.8's rules, read from its source and checked on the wire:

- topic (``rabbit_exchange_type_topic`` / ``rabbit_db_topic_exchange``): a key is split on ``.``
  into words, the empty key into *no* words (``split_topic_key(<<>>) -> []``), so ``a..b`` has an
  empty middle word and ``*`` never matches the empty key; ``*`` is exactly one word (an empty one
  too), ``#`` zero or more; words compare byte for byte (case-sensitive);
- direct: the binding key equals the routing key, byte for byte; ``*`` and ``#`` are plain
  characters (spec rule queue.bind/direct-exchange-key-matching);
- fanout: every binding, whatever the key;
- headers (``rabbit_exchange_type_headers:headers_match``; 4.0 compares values with ``=:=``, so an
  integer no longer equals a float: ``exact``, release data routing-headers-exact-values): ``x-match``
  all (the default) / any,
  and ``all-with-x`` / ``any-with-x``; binding entries whose name starts with ``x-`` are left out
  unless the mode is ``*-with-x`` (``x-match`` itself always is); a void binding value asks only
  that the header be present; other values compare with Erlang's ``==`` on the decoded values:
  integers and floats by number (1 == 1.0), strings and byte arrays by their bytes, booleans only
  with booleans (true is not 1), so the string "1" does not match the integer 1; ``all`` of no
  entries is true, ``any`` of none is false;
- the default exchange: the queue named by the routing key;
- a message carries the routing key plus its ``CC`` and ``BCC`` header values (RabbitMQ's
  sender-selected distribution); direct and topic match any of them, fanout and headers ignore
  keys; a queue gets a message once however many bindings match (queue.bind/unique);
- x-local-random (4.0) and x-modulus-hash (4.3) route to exactly one bound queue;
- exchange-to-exchange bindings and alternate exchanges (``rabbit_exchange:route``): the exchanges
  reached are walked once each (cycles end), an exchange whose own bindings match nothing hands
  the message to its alternate exchange.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: the exchange types the model knows (x-local-random picks one queue at random: see ``route``)
MODEL_TYPES = ("direct", "fanout", "topic", "headers")
X_MATCH = ("all", "any", "all-with-x", "any-with-x")
#: types that route a message to exactly one of the bound queues (random, or by a hash of the key)
PICK_ONE = ("x-local-random", "x-modulus-hash")


class Void:
    """A field-table value of type void ('V'): a headers binding entry that asks for presence."""

    _instance: Void | None = None

    def __new__(cls) -> Void:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "void"


VOID = Void()


def words(key: str) -> list[str]:
    """A topic key's words: split on '.', the empty key has none (RabbitMQ's split_topic_key)."""
    return [] if key == "" else key.split(".")


def topic_match(pattern: str, key: str) -> bool:
    """Does binding key ``pattern`` match routing key ``key`` on a topic exchange?"""
    pw, kw = words(pattern), words(key)
    # reach[j]: pattern prefix consumed so far can end at key position j
    reach = [True] + [False] * len(kw)
    for p in pw:
        if p == "#":
            nxt, seen = [], False
            for r in reach:
                seen = seen or r
                nxt.append(seen)
        else:
            nxt = [False] + [reach[j] and (p == "*" or p == kw[j]) for j in range(len(kw))]
        reach = nxt
        if not any(reach):
            return False
    return reach[-1]


def erlang_equal(a: Any, b: Any, *, exact: bool = False) -> bool:
    """Erlang's ``==`` on two decoded field values (how 3.10.8's headers_match compares them), or
    with ``exact`` its ``=:=`` (4.0: an integer is not equal to a float of the same number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        if exact and isinstance(a, float) is not isinstance(b, float):
            return False
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
    if isinstance(a, (str, bytes, bytearray)) and isinstance(b, (str, bytes, bytearray)):
        return _bytes(a) == _bytes(b)
    if isinstance(a, Void) or isinstance(b, Void) or a is None or b is None:
        return (a is None or isinstance(a, Void)) and (b is None or isinstance(b, Void))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(erlang_equal(a[k], b[k], exact=exact) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(erlang_equal(x, y, exact=exact) for x, y in zip(a, b, strict=True))
    return bool(type(a) is type(b) and a == b)


def _bytes(v: str | bytes | bytearray) -> bytes:
    return v.encode() if isinstance(v, str) else bytes(v)


def headers_match(binding: Mapping[str, Any], headers: Mapping[str, Any] | None, *,
                  exact: bool = False) -> bool:
    """Does a headers-exchange binding with arguments ``binding`` match a message's ``headers``?
    ``exact``: values compare as 4.0 does (``=:=``: release data routing-headers-exact-values)."""
    headers = headers or {}
    mode = binding.get("x-match", "all")
    if mode not in X_MATCH:
        mode = "all"  # parse_x_match/1: "legacy; we didn't validate"
    with_x = mode.endswith("-with-x")
    results = []
    for k, v in binding.items():
        if k == "x-match" or (k.startswith("x-") and not with_x):
            continue
        present = k in headers
        results.append(present and (isinstance(v, Void) or erlang_equal(v, headers[k], exact=exact)))
    return any(results) if mode.startswith("any") else all(results)


def direct_match(binding_key: str, key: str) -> bool:
    return binding_key == key


@dataclass(frozen=True)
class Message:
    routing_key: str = ""
    headers: Mapping[str, Any] = field(default_factory=dict)

    def keys(self) -> tuple[str, ...]:
        """The routing key and the CC and BCC values (sender-selected distribution), in order."""
        out = [self.routing_key]
        for name in ("CC", "BCC"):
            value = self.headers.get(name)
            if isinstance(value, (list, tuple)):
                out.extend(v.decode() if isinstance(v, (bytes, bytearray)) else str(v) for v in value)
        return tuple(out)


def binding_matches(type_: str, key: str, args: Mapping[str, Any], msg: Message, *,
                    exact: bool = False) -> bool:
    """One binding of an exchange of ``type_`` (key, arguments) against a message (``exact``: the
    headers values compared as RabbitMQ 4.0 does)."""
    if type_ == "fanout":
        return True
    if type_ == "direct":
        return any(direct_match(key, k) for k in msg.keys())
    if type_ == "topic":
        return any(topic_match(key, k) for k in msg.keys())
    if type_ == "headers":
        return headers_match(args, msg.headers, exact=exact)
    raise ValueError(f"the model has no matching rule for exchange type {type_!r}")


@dataclass(frozen=True)
class Binding:
    source: str
    destination: str  # "q:NAME" or "e:NAME"
    key: str = ""
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Topology:
    """Exchanges (name -> type), their alternate exchanges, queues and bindings."""

    exchanges: dict[str, str] = field(default_factory=dict)
    alternates: dict[str, str] = field(default_factory=dict)
    queues: list[str] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    exact: bool = False  # headers values compared as RabbitMQ 4.0 does

    def route(self, exchange: str, msg: Message) -> set[str] | None:
        """The queues ``msg`` published to ``exchange`` lands in; None when the result is a pick of
        one queue (an exchange of a PICK_ONE type was reached: see :meth:`choices`)."""
        queues, random_sets = self._walk(exchange, msg)
        return None if random_sets else queues

    def choices(self, exchange: str, msg: Message) -> tuple[set[str], list[set[str]]]:
        """The queues a message surely lands in, and for each x-local-random exchange reached the
        set of bound queues of which it lands in exactly one (x-modulus-hash too: the model does not
        compute RabbitMQ's hash)."""
        return self._walk(exchange, msg)

    def _walk(self, exchange: str, msg: Message) -> tuple[set[str], list[set[str]]]:
        if exchange == "":
            return {k for k in msg.keys() if k in self.queues}, []
        queues: set[str] = set()
        random_sets: list[set[str]] = []
        seen: set[str] = set()
        work = [exchange]
        while work:
            x = work.pop(0)
            if x in seen or x not in self.exchanges:
                continue
            seen.add(x)
            type_ = self.exchanges[x]
            dests = self._dests(x, type_, msg)
            routed = bool(dests)
            if type_ in PICK_ONE:
                picks = {d[2:] for d in dests if d.startswith("q:")}
                if picks:
                    random_sets.append(picks)
                dests = [d for d in dests if not d.startswith("q:")]
            if not routed and x in self.alternates:
                work.append(self.alternates[x])
            for d in dests:
                if d.startswith("q:"):
                    queues.add(d[2:])
                elif d.startswith("e:"):
                    work.append(d[2:])
        return queues, random_sets

    def _dests(self, x: str, type_: str, msg: Message) -> list[str]:
        out = []
        for b in self.bindings:
            if b.source != x:
                continue
            if type_ in PICK_ONE or binding_matches(type_, b.key, b.args, msg, exact=self.exact):
                if b.destination not in out and (not b.destination.startswith("q:")
                                                  or b.destination[2:] in self.queues):
                    out.append(b.destination)
        return out


def exact_values(release: str | None) -> bool:
    """Whether RabbitMQ ``release`` compares headers values exactly (release data
    ``routing-headers-exact-values``); False for no release (the model's 3.10.8 default)."""
    from conformance.profiles.releases import changes, parse_release

    at = parse_release(release)
    change = next(c for c in changes() if c.key == "routing-headers-exact-values")
    return at is not None and at >= change.since_t


def single(type_: str, bindings: Iterable[tuple[str, str, Mapping[str, Any]]],
           msg: Message) -> set[str]:
    """The queues of one exchange of ``type_`` with bindings (queue, key, args) that match ``msg``."""
    return {q for q, key, args in bindings if binding_matches(type_, key, args, msg)}


def describe_binding(type_: str, key: str, args: Mapping[str, Any] | None) -> str:
    """One line for a binding, as reports show it."""
    if type_ == "headers":
        return f"headers binding {dict(args or {})!r}"
    return f"{type_} binding key {key!r}"


def describe_message(type_: str, msg: Message) -> str:
    if type_ == "headers":
        return f"headers {dict(msg.headers)!r}"
    extra = {k: list(v) for k, v in msg.headers.items() if k in ("CC", "BCC")}
    return f"routing key {msg.routing_key!r}" + (f" {extra}" if extra else "")


def as_list(value: Sequence[str] | str) -> list[str]:
    return [value] if isinstance(value, str) else list(value)
