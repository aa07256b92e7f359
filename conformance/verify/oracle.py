"""The routing oracle on the wire: generated batches (``conformance.model.routing_gen``) published
to a broker, where each message landed compared with the routing model, every difference shrunk to
the smallest binding/message pair the broker still routes otherwise.

A batch is one exchange, one exclusive queue per generated binding, every message published
mandatory on a confirm channel at once; then each queue's count (passive declare) and a no-ack
consumer per queue until that many deliveries came (bounded by the deadline: no sleeps). The
broker's answer for pair (binding b, message m) is whether message m reached b's queue; the
basic.returns are checked against the model's unroutable messages too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pamqp import commands as spec

from conformance.model.cases import Case, Level, param
from conformance.model.routing import VOID, Message, exact_values
from conformance.model.routing_gen import Batch, Pair, Shrunk, batches, shrink
from conformance.model.verdicts import CaseTimeout, Mismatch
from conformance.protocol.raw import RawChannel, SocketClosed, UnexpectedClose
from conformance.verify.confirms import settle_all
from conformance.verify.unsupported import Unsupported

OpenChannel = Callable[[], RawChannel]


@dataclass(frozen=True)
class Difference:
    family: str
    seed: int
    batch: int
    binding: int  # index in the batch (queue q<binding>)
    message: int  # index in the batch, or -1 for a return difference of the message below
    pair: Pair | None
    expected: str
    observed: str

    def line(self) -> str:
        where = f"seed {self.seed} batch {self.batch} binding {self.binding} message {self.message}"
        what = self.pair.describe() if self.pair else "a mandatory publish"
        return f"{self.family}: {what}: expected {self.expected}, observed {self.observed} ({where})"


@dataclass
class Report:
    family: str
    seed: int
    count: int
    flavour: str = "rabbitmq"
    stopped: str = ""  # why the run ended before its count (the command's report)
    batches: int = 0
    pairs: int = 0
    bindings: int = 0
    messages: int = 0
    seconds: float = 0.0
    differences: list[Difference] = field(default_factory=list)
    shrunk: list[tuple[Difference, Shrunk]] = field(default_factory=list)
    # a difference seen only beside the rest of its batch: the one other binding that brings it back
    contexts: list[tuple[Difference, str]] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.family}: {self.pairs} binding/message pairs ({self.batches} batches, {self.bindings} "
                f"bindings, {self.messages} messages), {len(self.differences)} differences, "
                f"{self.seconds:.1f} s")


def _wire_table(table: Any) -> dict[str, Any] | None:
    if not table:
        return None
    return {k: (None if v is VOID else v) for k, v in table.items()}


def _pipelined(ch: RawChannel, methods: list[Any], ok: type, what: str) -> list[Any]:
    for method in methods:
        ch.send(method)
    return [ch.wait(ok, f"{what} ({i} of {len(methods)})").method for i in range(len(methods))]


class Runner:
    """Runs batches (and shrink probes) against a broker through ``open_channel``."""

    def __init__(self, open_channel: OpenChannel, prefix: str, timeout: float,
                 register: Callable[[str, str], None] | None = None, flavour: str = "rabbitmq") -> None:
        self.open_channel = open_channel
        self.flavour = flavour
        self.prefix = prefix
        self.timeout = timeout
        self.register = register  # (kind "q"/"x", name): the suite's clean-up list
        self._n = 0

    def _name(self, what: str) -> str:
        self._n += 1
        return f"{self.prefix}-{self._n}-{what}"

    def land(self, family: str, bindings: list[tuple[str, Any]], messages: list[Message],
             ) -> tuple[list[dict[int, int]], set[int]]:
        """Publish ``messages`` through one exchange of ``family``'s type with one queue per binding;
        for each binding the copies of each message its queue got, and the messages returned."""
        ch = self.open_channel()
        try:
            return self._land(ch, family, bindings, messages)
        finally:
            ch.conn.close()

    def _land(self, ch: RawChannel, family: str, bindings: list[tuple[str, Any]], messages: list[Message],
              ) -> tuple[list[dict[int, int]], set[int]]:
        base = self._name(family)
        queues = [f"{base}-{key}" if family == "default" else f"{base}-q{i}"
                  for i, (key, _args) in enumerate(bindings)]
        x = ""
        if family != "default":
            x = f"{base}-x"
            if self.register:
                self.register("x", x)
            ch.rpc(spec.Exchange.Declare(exchange=x, exchange_type=family, auto_delete=True))
        for q in queues:
            if self.register:
                self.register("q", q)
        _pipelined(ch, [spec.Queue.Declare(queue=q, exclusive=True) for q in queues], spec.Queue.DeclareOk,
                   "queue.declare-ok")
        if family != "default":
            binds = [spec.Queue.Bind(queue=q, exchange=x, routing_key=key, arguments=_wire_table(args))
                     for q, (key, args) in zip(queues, bindings, strict=True)]
            try:
                _pipelined(ch, binds, spec.Queue.BindOk, "queue.bind-ok")
            except UnexpectedClose as exc:
                if self.flavour != "rabbitmq" or isinstance(exc.event, SocketClosed):
                    raise
                # RabbitMQ's extensions of the headers binding (*-with-x) refused: not offered
                raise Unsupported("the broker refuses a binding the rabbitmq flavour generates",
                                  expected="queue.bind-ok for every binding", observed=exc.event.describe()
                                  ) from exc
        ch.confirm_select()
        names = {key: q for q, (key, _a) in zip(queues, bindings, strict=True)} if family == "default" else {}
        returned = self._publish(ch, x, messages, names)
        return self._collect(ch, queues), returned

    def _publish(self, ch: RawChannel, x: str, messages: list[Message], names: dict[str, str]) -> set[int]:
        """Publish every message mandatory, wait for all confirms; the indices returned."""
        for m, msg in enumerate(messages):
            rk, headers = _real(msg, names), msg.headers
            if names and headers:
                headers = {k: ([_real_key(v, names) for v in vs] if k in ("CC", "BCC") else vs)
                           for k, vs in headers.items()}
            ch.publish(x, rk, str(m).encode(), mandatory=True,
                       properties=spec.Basic.Properties(headers=_wire_table(headers)))
        st = settle_all(ch, len(messages), self.timeout, what="confirms for the oracle's batch")
        if st.nacked:
            raise Mismatch("publisher confirms of the oracle's batch", expected="every publish acked",
                           observed=st.summary())
        return {int(e.body or b"-1") for e in ch.history() if isinstance(e.method, spec.Basic.Return)}

    def _collect(self, ch: RawChannel, queues: list[str]) -> list[dict[int, int]]:
        """Each queue's messages (index -> copies): its count, then a no-ack consumer on it until that
        many came, one queue after the other (one consumer at a time: garagemq interleaves the
        content frames of two consumers' deliveries on one channel)."""
        counts = [int(ok.message_count) for ok in _pipelined(
            ch, [spec.Queue.Declare(queue=q, passive=True) for q in queues], spec.Queue.DeclareOk,
            "passive queue.declare-ok")]
        got: list[dict[int, int]] = [{} for _ in queues]
        for i, q in enumerate(queues):
            if not counts[i]:
                continue
            deadline = time.monotonic() + self.timeout  # each queue's deliveries within the timeout
            ch.send(spec.Basic.Consume(queue=q, consumer_tag=f"c{i}", no_ack=True))
            for seen in range(counts[i]):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CaseTimeout(f"{counts[i]} deliveries from {q}", self.timeout,
                                      observed=f"{seen} deliveries")
                ev = ch.wait(spec.Basic.Deliver, f"deliveries from {q} ({seen} of {counts[i]})",
                             timeout=remaining)
                m = int(ev.body or b"-1")
                got[i][m] = got[i].get(m, 0) + 1
            ch.rpc(spec.Basic.Cancel(consumer_tag=f"c{i}"))
        return got

    def probe(self, pairs: list[Pair]) -> list[bool]:
        """For each pair: did its message land in its binding's queue (all pairs in one batch)?"""
        if not pairs:
            return []
        family = pairs[0].family
        if family == "default":
            return [bool(self.land(family, [(p.key, {})], [p.msg])[0][0]) for p in pairs]
        got, _ = self.land(family, [(p.key, p.args) for p in pairs], [p.msg for p in pairs])
        return [bool(got[i].get(i)) for i in range(len(pairs))]


def _real_key(sym: str, names: dict[str, str]) -> str:
    if sym in names:
        return names[sym]
    if sym.lower() in names and sym.isupper():
        return names[sym.lower()].upper()
    if sym.endswith("x") and sym[:-1] in names:
        return names[sym[:-1]] + "x"
    return sym


def _real(msg: Message, names: dict[str, str]) -> str:
    return _real_key(msg.routing_key, names) if names else msg.routing_key


def compare(batch: Batch, seed: int, got: list[dict[int, int]], returned: set[int]) -> list[Difference]:
    expected = batch.expected()
    out = []
    for b, exp in enumerate(expected):
        for m in range(len(batch.messages)):
            copies = got[b].get(m, 0)
            want = 1 if m in exp else 0
            if copies != want:
                out.append(Difference(batch.family, seed, batch.index, b, m, batch.pair(b, m),
                                      _copies(want), _copies(copies)))
    unroutable = set(range(len(batch.messages))) - set().union(*expected)
    for m in sorted(unroutable ^ returned):
        out.append(Difference(batch.family, seed, batch.index, -1, m, None,
                              "basic.return" if m in unroutable else "no basic.return",
                              "basic.return" if m in returned else "no basic.return"))
    return out


def _copies(n: int) -> str:
    return {0: "not routed", 1: "routed"}.get(n, f"routed {n} times")


def run(runner: Runner, family: str, seed: int, count: int, *, bindings: int = 50, messages: int = 200,
        shrink_at_most: int = 3, on_batch: Callable[[Report], None] | None = None,
        release: str | None = None, flavour: str = "rabbitmq") -> Report:
    """Generate ``count`` pairs (at least) for ``family`` from ``seed``, run them, compare, shrink;
    the model judges by RabbitMQ ``release`` where its rules changed (None: 3.10.8)."""
    report = Report(family, seed, count, flavour)
    start = time.monotonic()
    for batch in batches(family, seed, count, bindings=bindings, messages=messages,
                         exact=exact_values(release), flavour=flavour):
        got, returned = runner.land(family, list(batch.bindings), list(batch.messages))
        report.batches += 1
        report.pairs += batch.pairs()
        report.bindings += len(batch.bindings)
        report.messages += len(batch.messages)
        report.differences.extend(compare(batch, seed, got, returned))
        if on_batch:
            on_batch(report)
    shrunk_seen: set[str] = set()
    for d in report.differences:
        if len(report.shrunk) >= shrink_at_most or d.pair is None:
            continue
        if d.observed not in ("routed", "not routed"):
            continue
        s = shrink(d.pair, runner.probe)
        if s.smallest.describe() in shrunk_seen:
            continue
        shrunk_seen.add(s.smallest.describe())
        report.shrunk.append((d, s))
        if not s.alone:
            batch = next(b for b in batches(family, seed, count, bindings=bindings, messages=messages,
                                            exact=exact_values(release), flavour=flavour)
                         if b.index == d.batch)
            report.contexts.append((d, beside(runner, batch, d)))
    report.seconds = time.monotonic() - start
    return report


def beside(runner: Runner, batch: Batch, d: Difference) -> str:
    """For a difference that does not show on its own: the first other binding of its batch that,
    bound beside it to its own queue, brings the difference back (the smallest context: two bindings)."""
    key, args = batch.bindings[d.binding]
    msg = batch.messages[d.message]
    want = d.pair.expected() if d.pair else False
    for j, (k2, a2) in enumerate(batch.bindings):
        if j == d.binding:
            continue
        for mine in (0, 1):  # its queue bound first, then second
            pair = [(key, args), (k2, a2)] if mine == 0 else [(k2, a2), (key, args)]
            got, _ = runner.land(batch.family, pair, [msg])
            if bool(got[mine].get(0)) != want:
                other = batch.pair(j, d.message)
                seen = "routed" if got[mine].get(0) else "not routed"
                return (f"differs when bound {('before', 'after')[mine]} a second queue with "
                        f"{other.describe().split(', routing key')[0]}: observed {seen}; the second queue "
                        f"got {got[1 - mine].get(0, 0)} copies, expected {int(other.expected())}")
    return "no single other binding of its batch brings it back"


def replay_command(family: str, seed: int, count: int, flavour: str = "rabbitmq") -> str:
    return (f"amqp-conformance routing --type {family} --seed {seed} --count {count}"
            + (f" --flavour {flavour}" if flavour != "rabbitmq" else ""))


def mismatch_text(report: Report, limit: int = 5) -> str:
    lines = [report.summary()]
    for d, s in report.shrunk:
        verdict = "routed" if s.observed else "not routed"
        lines.append(f"smallest: {s.smallest.describe()}: expected "
                     f"{'routed' if s.smallest.expected() else 'not routed'}, observed {verdict}"
                     + ("" if s.alone else " (only beside the rest of its batch)")
                     + f" [from {d.line()}]")
    lines.extend(f"context: {text} [{d.line()}]" for d, text in report.contexts)
    lines.extend(d.line() for d in report.differences[:limit])
    lines.append(f"replay: {replay_command(report.family, report.seed, report.count, report.flavour)}")
    return "\n".join(lines)


# -- the suite's oracle cases: a fixed seed, a bounded count (about a second each) ----------------------

SUITE_SEED = 42
SUITE_BINDINGS, SUITE_MESSAGES = 25, 80
#: fanout routes every message to every queue: fewer of both check its one rule as well
SUITE_SIZES = {"fanout": (8, 30)}
_SOURCES = {"topic": ("amqp0-9-1-pdf#topic", "rabbitmq-source-3.10.8#topic-split"),
            "direct": ("amqp0-9-1-pdf#direct",), "fanout": ("amqp0-9-1-pdf#fanout",),
            "headers": ("amqp0-9-1-pdf#headers", "rabbitmq-source-3.10.8#headers-match"),
            "default": ("amqp0-9-1-pdf#direct",)}
_RULES = {"direct": ("queue.bind/direct-exchange-key-matching",), "default": ("exchange/default-exchange",),
          "fanout": ("exchange/required-types",)}


def _oracle_case(family: str, flavour: str) -> Any:
    nb, nm = SUITE_SIZES.get(family, (SUITE_BINDINGS, SUITE_MESSAGES))
    what = "queues named by the keys" if family == "default" else f"{nb} bindings"
    rabbit = flavour == "rabbitmq"
    rules = (
        "RabbitMQ's rules besides the spec's (empty words, CC/BCC, x- entries, *-with-x, 1 vs 1.0, any of "
        "nothing)" if rabbit else "only what the AMQP 0-9-1 text defines")
    return param(Case(
        f"routing.oracle-{family}{'-rabbitmq' if rabbit else ''}",
        level=Level.EXTENSION if rabbit else Level.MUST, rules=() if rabbit else _RULES.get(family, ()),
        sources=_SOURCES[family] + (("rabbitmq-sender-selected#cc-bcc",) if rabbit else ()),
        requires=("publisher_confirms",), wedges=True, queue_types=("classic",),
        premise="an exchange's matching rule: the queues it routes to are exclusive classic queues",
        description=f"The routing oracle, {family} exchange, {flavour} flavour ({rules}): {what} and "
                    f"{nm} messages generated from seed {SUITE_SEED}, each published mandatory",
        expectation="every message lands in exactly the queues the routing model names (one copy each) and "
                    "is returned iff it names none"), family, flavour)


ORACLE_CASES = [_oracle_case(f, fl) for fl in ("spec", "rabbitmq")
                for f in ("topic", "direct", "fanout", "headers", "default")
                if not (fl == "rabbitmq" and f == "fanout")]


def run_oracle_case(isolated: Any, ctx: Any, family: str, flavour: str) -> None:
    def register(kind: str, name: str) -> None:
        (isolated.exchange if kind == "x" else isolated.queue)(name)

    runner = Runner(isolated.channel, ctx.name("o"), ctx.timeout, register, flavour)
    nb, nm = SUITE_SIZES.get(family, (SUITE_BINDINGS, SUITE_MESSAGES))
    release = ctx.release if ctx.profile == "rabbitmq" else None
    report = run(runner, family, SUITE_SEED, nb * nm, bindings=nb, messages=nm,
                 shrink_at_most=1, release=release, flavour=flavour)
    ctx.observe("oracle", report.summary())
    ctx.extra["routing_row"] = ctx.case.id.removeprefix("routing.")
    ctx.extra["routing_observed"] = f"{len(report.differences)} differences"
    if report.differences:
        raise Mismatch(f"where the oracle's messages landed ({family}, {flavour})",
                       expected="as the routing model says", observed=mismatch_text(report))


def families(text: Iterable[str] | None) -> list[str]:
    from conformance.model.routing_gen import FAMILIES

    chosen = list(text or FAMILIES)
    bad = [f for f in chosen if f not in FAMILIES]
    if bad:
        raise ValueError(f"unknown exchange type(s) {', '.join(bad)} (known: {', '.join(FAMILIES)})")
    return chosen
