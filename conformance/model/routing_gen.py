"""The routing oracle's inputs: bindings and messages generated from a seed, the model's answer for
each pair, and the shrinking of a pair the broker routes otherwise.

A seeded generator, not hypothesis: the oracle's unit of work is a *batch* (an exchange with many
bindings, many messages, published at once and drained with consumers), and a broker round trip
per example — hypothesis's model, one example at a time, each shrink step a new example — would
cost a live broker thousands of round trips per difference. Here a batch of B bindings and M
messages checks B × M pairs in one pass, and shrinking tests every simpler candidate of a pair in
one batch per step (``Shrinker``). The same seed gives the same batches, so a seed and a count
replay a run exactly.

Pure Python: the wire side is ``conformance.verify.oracle``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from conformance.model.routing import VOID, Message, binding_matches

FAMILIES = ("topic", "direct", "fanout", "headers", "default")
# Two flavours. "spec": only what the AMQP 0-9-1 text defines (no empty words inside a key, no CC,
# headers without x- names, *-with-x modes, floats or an any of nothing): the MUST oracle cases.
# "rabbitmq": RabbitMQ's rules besides (empty words, CC/BCC, x- entries, *-with-x, 1 vs 1.0, any of
# nothing): the EXTENSION oracle cases and the command's default.
FLAVOURS = ("spec", "rabbitmq")
TOPIC_PATTERN_WORDS = {"spec": ("a", "b", "c", "*", "#", "A"), "rabbitmq": ("a", "b", "c", "*", "#", "", "A")}
TOPIC_KEY_WORDS = {"spec": ("a", "b", "c", "A"), "rabbitmq": ("a", "b", "c", "", "A")}
DIRECT_KEYS = ("", "a", "b", "a.b", "*", "#", "A", "a.*", "b.#")
HEADER_NAMES = {"spec": ("a", "b", "d"), "rabbitmq": ("a", "b", "x-c", "d")}
HEADER_VALUES: dict[str, tuple[Any, ...]] = {"spec": ("1", 1, True, "v", 2, False),
                                             "rabbitmq": ("1", 1, True, 1.0, "v", 2, False)}
X_MATCHES = {"spec": (None, "all", "any"), "rabbitmq": (None, "all", "any", "all-with-x", "any-with-x")}

@dataclass(frozen=True)
class Pair:
    """One binding (key, args) of an exchange of ``family``'s type and one message."""

    family: str
    key: str
    args: Mapping[str, Any]
    msg: Message
    exact: bool = False  # headers values compared as RabbitMQ 4.0 does (model.routing.exact_values)

    @property
    def type_(self) -> str:
        return "direct" if self.family == "default" else self.family

    def expected(self) -> bool:
        if self.family == "default":
            return self.key in self.msg.keys()  # key = the queue's symbolic name
        return binding_matches(self.type_, self.key, self.args, self.msg, exact=self.exact)

    def size(self) -> int:
        """How big the pair is (shrinking makes it smaller)."""
        return (len(self.key) + len(self.msg.routing_key) + 3 * len(self.args)
                + 3 * len(self.msg.headers) + sum(len(str(v)) for v in self.msg.headers.values()))

    def describe(self) -> str:
        if self.family == "headers":
            return f"binding arguments {_show(self.args)}, message headers {_show(self.msg.headers)}"
        cc = {k: list(v) for k, v in self.msg.headers.items() if k in ("CC", "BCC")}
        extra = f", {cc}" if cc else ""
        return f"binding key {self.key!r}, routing key {self.msg.routing_key!r}{extra}"


def _show(table: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in table.items()) + "}"


@dataclass(frozen=True)
class Batch:
    family: str
    index: int
    bindings: tuple[tuple[str, Mapping[str, Any]], ...]  # one queue each: (key, args)
    messages: tuple[Message, ...]
    exact: bool = False

    def pairs(self) -> int:
        return len(self.bindings) * len(self.messages)

    def pair(self, b: int, m: int) -> Pair:
        key, args = self.bindings[b]
        return Pair(self.family, key, args, self.messages[m], self.exact)

    def expected(self) -> list[set[int]]:
        """For each binding (queue), the indices of the messages the model routes to it."""
        return [{m for m in range(len(self.messages)) if self.pair(b, m).expected()}
                for b in range(len(self.bindings))]


def _topic_key(rng: random.Random, words: tuple[str, ...], most: int) -> str:
    n = rng.choice((0, 1, 1, 2, 2, 2, 3, 3, 4))
    return ".".join(rng.choice(words) for _ in range(min(n, most)))


def _cc(rng: random.Random, make: Callable[[], str], flavour: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if flavour == "spec":
        return out
    if rng.random() < 0.15:
        out["CC"] = [make() for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.1:
        out["BCC"] = [make()]
    return out


def _headers_binding(rng: random.Random, flavour: str) -> dict[str, Any]:
    args: dict[str, Any] = {}
    mode = rng.choice(X_MATCHES[flavour])
    if mode is not None:
        args["x-match"] = mode
    names = HEADER_NAMES[flavour]
    least = 1 if flavour == "spec" else 0  # all / any of nothing: RabbitMQ's answer only
    for name in rng.sample(names, rng.randint(least, 3)):
        args[name] = VOID if rng.random() < 0.15 else rng.choice(HEADER_VALUES[flavour])
    return args


def _headers_message(rng: random.Random, flavour: str) -> dict[str, Any]:
    names = HEADER_NAMES[flavour]
    return {name: (VOID if rng.random() < 0.05 else rng.choice(HEADER_VALUES[flavour]))
            for name in rng.sample(names, rng.randint(0, len(names)))}


def binding_for(family: str, rng: random.Random, flavour: str = "rabbitmq") -> tuple[str, dict[str, Any]]:
    if family == "topic":
        return _topic_key(rng, TOPIC_PATTERN_WORDS[flavour], 4), {}
    if family in ("direct", "fanout"):
        return rng.choice(DIRECT_KEYS), {}
    if family == "headers":
        return "", _headers_binding(rng, flavour)
    raise ValueError(family)


def message_for(family: str, rng: random.Random, queue_names: list[str],
                flavour: str = "rabbitmq") -> Message:
    if family == "topic":
        words = TOPIC_KEY_WORDS[flavour]
        return Message(_topic_key(rng, words, 4), _cc(rng, lambda: _topic_key(rng, words, 3), flavour))
    if family in ("direct", "fanout"):
        return Message(rng.choice(DIRECT_KEYS), _cc(rng, lambda: rng.choice(DIRECT_KEYS), flavour))
    if family == "headers":
        return Message(rng.choice(DIRECT_KEYS), _headers_message(rng, flavour))
    if family == "default":
        def key() -> str:
            name = rng.choice(queue_names)
            return rng.choice((name, name, name.upper(), name + "x", "", "nowhere"))
        return Message(key(), _cc(rng, key, flavour))
    raise ValueError(family)


def batches(family: str, seed: int, count: int, *, bindings: int = 50, messages: int = 200,
            exact: bool = False, flavour: str = "rabbitmq") -> Iterator[Batch]:
    """Batches of generated bindings and messages whose pairs add up to at least ``count``; batch k
    depends only on (family, flavour, seed, k), so a seed replays exactly."""
    if family not in FAMILIES:
        raise ValueError(f"unknown routing family {family!r} (known: {', '.join(FAMILIES)})")
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown flavour {flavour!r} (known: {', '.join(FLAVOURS)})")
    per = bindings * messages
    for k in range(max(1, -(-count // per))):
        rng = random.Random(f"{family}:{flavour}:{seed}:{k}")
        names = [f"q{i}" for i in range(bindings)]
        if family == "default":
            binds: tuple[tuple[str, Mapping[str, Any]], ...] = tuple((n, {}) for n in names)
        else:
            binds = tuple(binding_for(family, rng, flavour) for _ in range(bindings))
        msgs = tuple(message_for(family, rng, names, flavour) for _ in range(messages))
        yield Batch(family, k, binds, msgs, exact)


# -- shrinking ---------------------------------------------------------------------------------------

def _key_candidates(key: str, words: tuple[str, ...]) -> Iterator[str]:
    parts = key.split(".") if key else []
    if len(parts) > 1:
        yield ""  # every word at once: greedy steps of one word can miss the empty key
        yield parts[0]
    for i in range(len(parts)):
        yield ".".join(parts[:i] + parts[i + 1:])  # a word less
    for i, w in enumerate(parts):
        for simpler in words:
            if simpler != w and words.index(simpler) < (words.index(w) if w in words else len(words)):
                yield ".".join([*parts[:i], simpler, *parts[i + 1:]])


def _table_candidates(table: Mapping[str, Any], keep: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    for k in table:
        if k not in keep:
            yield {n: v for n, v in table.items() if n != k}
    for k, v in table.items():
        for simpler in (VOID, "1", 1):
            if k not in keep and k != "x-match" and _rank(simpler) < _rank(v):
                yield {**table, k: simpler}


def _rank(v: Any) -> int:
    """How simple a header value is (a shrink step only ever makes one simpler)."""
    if v is VOID:
        return 0
    if isinstance(v, str) and v == "1":
        return 1
    if type(v) is int and v == 1:
        return 2
    return 3


def _with(p: Pair, key: str, args: Mapping[str, Any], msg: Message) -> Pair:
    return Pair(p.family, key, args, msg, p.exact)


def candidates(p: Pair) -> Iterator[Pair]:
    """Every pair one step simpler than ``p`` (a word, entry or CC value less, a simpler word or value)."""
    msg = p.msg
    cc = {k: v for k, v in msg.headers.items() if k in ("CC", "BCC")}
    for k in cc:
        rest = {n: v for n, v in msg.headers.items() if n != k}
        yield _with(p, p.key, p.args, Message(msg.routing_key, rest))
    if p.family == "headers":
        for args in _table_candidates(p.args):
            yield _with(p, p.key, args, msg)
        for hs in _table_candidates(msg.headers):
            yield _with(p, p.key, p.args, Message(msg.routing_key, hs))
        if msg.routing_key:
            yield _with(p, p.key, p.args, Message("", msg.headers))
        return
    if p.family in ("topic", "direct", "fanout"):
        for key in _key_candidates(p.key, ("a", "*", "#", "b", "c", "", "A")):
            yield _with(p, key, p.args, msg)
    for rk in _key_candidates(msg.routing_key, ("a", "b", "c", "", "A")):
        yield _with(p, p.key, p.args, Message(rk, msg.headers))


#: the broker's answer for a list of pairs: for each, did the message land in the binding's queue?
Probe = Callable[[list[Pair]], list[bool]]


@dataclass(frozen=True)
class Shrunk:
    original: Pair
    smallest: Pair
    observed: bool  # what the broker did with the smallest pair
    steps: int
    alone: bool  # the original pair differs on its own too (not only beside the rest of its batch)


def shrink(p: Pair, probe: Probe, *, rounds: int = 40) -> Shrunk:
    """The smallest pair reachable from ``p`` by simplification steps that the broker still routes
    otherwise than the model. Each round asks ``probe`` about every candidate at once."""
    first = probe([p])[0]
    if first == p.expected():
        return Shrunk(p, p, first, 0, alone=False)
    current, observed, steps = p, first, 0
    for _ in range(rounds):
        unique = {c.describe(): c for c in candidates(current) if c.size() <= current.size()}
        unique.pop(current.describe(), None)
        cands = sorted(unique.values(), key=lambda c: (c.size(), c.describe()))[:60]
        if not cands:
            break
        answers = probe(cands)
        better = [(c, a) for c, a in zip(cands, answers, strict=True) if a != c.expected()]
        if not better:
            break
        current, observed = better[0]
        steps += 1
    return Shrunk(p, current, observed, steps, alone=True)
