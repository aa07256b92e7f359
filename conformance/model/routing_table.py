"""The routing table (``conformance/profiles/routing.toml``) read into rows: each row a topology,
one message, and where the message must land. Its header says the format."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from conformance.model.routing import VOID, Binding, Message, Topology
from conformance.profiles import load_table

_WORDS = re.compile(r"\{(\d+) words ([^}]+)\}")
_NAME = re.compile(r"\{(\w+)\}")
#: the areas' name for a row's exchange type (the report groups rows by it)
FAMILIES = ("topic", "direct", "fanout", "headers", "default", "e2e", "ae", "local-random", "modulus-hash")


def expand(text: str, name_of: Callable[[str], str] | None = None) -> str:
    """A key of the table as sent: ``{N words W}`` expanded, ``{q}`` / ``{Q}`` the queue's name."""
    text = _WORDS.sub(lambda m: ".".join([m.group(2)] * int(m.group(1))), text)
    if name_of is None:
        return text

    def name(m: re.Match[str]) -> str:
        sym = m.group(1)
        real = name_of(sym.lower())
        return real.upper() if sym.isupper() else real

    return _NAME.sub(name, text)


@dataclass(frozen=True)
class Row:
    id: str
    level: str
    rules: tuple[str, ...]
    sources: tuple[str, ...]
    why: str
    since: str | None
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def case_id(self) -> str:
        return f"routing.{self.id}"

    @property
    def family(self) -> str:
        for f in FAMILIES:
            if self.id.startswith(f + "-"):
                return f
        return "other"

    @property
    def short(self) -> bool:
        return "type" in self.raw

    @property
    def bind_error(self) -> int | None:
        return self.raw.get("bind_error")

    @property
    def one_of(self) -> tuple[str, ...]:
        return tuple(self.raw.get("one_of", ()))

    @property
    def expect(self) -> tuple[str, ...]:
        if self.short:
            return ("q",) if self.raw.get("routed") else ()
        return tuple(self.raw.get("expect", ()))

    def exchange_types(self) -> dict[str, str]:
        return {"x": self.raw["type"]} if self.short else dict(self.raw.get("exchanges", {}))

    def queues(self) -> list[str]:
        return ["q"] if self.short else list(self.raw.get("queues", []))

    def build(self, name_of: Callable[[str], str] = str) -> tuple[Topology, str, Message]:
        """The row's topology and message, entities named by ``name_of(symbol)`` (the model uses the
        symbols themselves); returns (topology, the exchange published to, the message)."""
        r = self.raw
        topo = Topology(
            exchanges={name_of(x): t for x, t in self.exchange_types().items()},
            alternates={name_of(x): name_of(a) for x, a in r.get("alternates", {}).items()},
            queues=[name_of(q) for q in self.queues()],
        )
        if self.short:
            args = dict(r.get("args", {}))
            for v in r.get("void", ()):
                args[v] = VOID
            bindings = [{"source": "x", "to": "q:q", "key": r.get("bind", ""), "args": args}]
            publish = {k: r[k] for k in ("key", "headers", "cc", "bcc") if k in r}
            publish["exchange"] = "x"
        else:
            bindings = list(r.get("bindings", []))
            publish = dict(r["publish"])
        for b in bindings:
            topo.bindings.append(_binding(b, name_of))
        headers: dict[str, Any] = dict(publish.get("headers", {}))
        for h in ("cc", "bcc"):
            if h in publish:
                headers[h.upper()] = [expand(k, name_of) for k in publish[h]]
        x = publish["exchange"]
        msg = Message(expand(publish.get("key", ""), name_of), headers)
        return topo, (name_of(x) if x else ""), msg

    def unbinds(self, name_of: Callable[[str], str] = str) -> list[Binding]:
        """The bindings the row removes again (queue.unbind / exchange.unbind) before it publishes;
        ``build``'s topology still holds them (bound first), the model's answer drops them."""
        return [_binding(b, name_of) for b in self.raw.get("unbind", ())]

    def has_headers(self) -> bool:
        """Whether the row's message carries a headers table (``headers-no-headers-property`` has none)."""
        r = self.raw if self.short else self.raw["publish"]
        return any(k in r for k in ("headers", "cc", "bcc"))


def _binding(b: Mapping[str, Any], name_of: Callable[[str], str]) -> Binding:
    kind, _, dest = b["to"].partition(":")
    return Binding(name_of(b["source"]), f"{kind}:{name_of(dest)}", expand(b.get("key", ""), name_of),
                   dict(b.get("args", {})))


@cache
def rows() -> tuple[Row, ...]:
    table = load_table("routing")
    default_level = table["defaults"]["level"]
    out = []
    for r in table["rows"]:
        out.append(Row(r["id"], r.get("level", default_level), tuple(r.get("rules", ())),
                       tuple(r.get("sources", ())), r.get("why", ""), r.get("since"), r))
    return tuple(out)


def describe(row: Row) -> str:
    """The row in one line: what is bound, what is published."""
    r = row.raw
    if row.short:
        bound = (f"args {dict(r.get('args', {}))}" + (f" void {r['void']}" if "void" in r else "")
                 if r["type"] == "headers" else f"key {expand(r.get('bind', ''))[:40]!r}")
        sent = []
        if r["type"] != "headers" or "key" in r:
            sent.append(f"key {expand(r.get('key', ''))[:40]!r}")
        if "headers" in r or r["type"] == "headers":
            sent.append(f"headers {r.get('headers', 'none')}")
        for h in ("cc", "bcc"):
            if h in r:
                sent.append(f"{h.upper()} {r[h]}")
        return f"A {r['type']} exchange, a queue bound with {bound}; a message with {', '.join(sent)}"
    binds = "; ".join(f"{b['source']}->{b['to']}" + (f" {b['key']!r}" if b.get("key") else "")
                      for b in r.get("bindings", []))
    if r.get("unbind"):
        binds += "; then unbound: " + "; ".join(
            f"{b['source']}->{b['to']}" + (f" {b['key']!r}" if b.get("key") else "") for b in r["unbind"])
    xs = ", ".join(f"{x} {t}" for x, t in r.get("exchanges", {}).items()) or "none declared"
    ae = ", ".join(f"{x} AE {a}" for x, a in r.get("alternates", {}).items())
    p = r["publish"]
    pub = f"published to {p['exchange'] or 'the default exchange'!s} with key {p.get('key', '')!r}" + "".join(
        f", {h.upper()} {p[h]}" for h in ("cc", "bcc") if h in p)
    return f"Exchanges {xs}{'; ' + ae if ae else ''}; bindings {binds or 'none'}; {pub}"


def expectation(row: Row) -> str:
    if row.bind_error:
        return f"the binding is refused: channel.close {row.bind_error}"
    if row.one_of:
        return f"exactly one of {', '.join(row.one_of)} gets one copy, the rest nothing"
    if row.short:
        return "q gets one copy" if row.raw.get("routed") else "q gets nothing (mandatory: basic.return 312)"
    if not row.expect:
        return "no queue gets it (mandatory: basic.return 312)"
    return f"{', '.join(row.expect)} get one copy each, the rest nothing"
