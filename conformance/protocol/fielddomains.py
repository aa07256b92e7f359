"""What the spec XML says every field of a broker-sent method may hold.

The wire invariant monitor checks each method the broker sends against this table, so a default
that slips into a field (channel.open-ok's reserved long string carrying "0", say) is caught by
every case that sees the method, not only by a case written for it.

Checked, per field of every method whose ``<chassis name="client">`` says the server sends it:

- ``reserved="1"``: the field holds its type's empty value (shortstr/longstr "", integers 0,
  bit 0, table empty);
- ``<assert check="notnull"/>`` on the field or its domain (reply-code, reply-text, the queue of
  queue.declare-ok): the value is non-zero / non-empty.

Not checked: a shortstr's length ≤ 255 cannot be broken once the frame decoded (its length is one
octet); the ``length`` 127 and ``regexp`` asserts of exchange and queue names, because a broker
echoes the names the client chose in those fields (a case declaring a long name would blame the
broker for the client's choice).
"""

from __future__ import annotations

import inspect
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from pamqp import commands as pcommands

from conformance.data import SPEC_FILE, SPEC_PACKAGE

_EMPTY: dict[str, tuple[Any, ...]] = {
    "shortstr": ("", b""),
    "longstr": ("", b""),
    "octet": (0,),
    "short": (0,),
    "long": (0,),
    "longlong": (0,),
    "timestamp": (0,),
    "bit": (False,),  # 0 == False: an int 0 passes too
    "table": ({},),
}


@dataclass(frozen=True)
class FieldRule:
    method: str  # as the spec names it: ``channel.open-ok``
    field: str  # the XML field name: ``reserved-1``
    attr: str  # the pamqp attribute that holds it: ``channel_id``
    type: str  # the wire type: ``longstr``
    reserved: bool
    notnull: bool


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def parse(xml_text: str) -> dict[str, tuple[FieldRule, ...]]:
    """``{pamqp method name ("Channel.OpenOk"): its field rules}`` for every broker-sent method."""
    root = ET.fromstring(xml_text)
    domains = {d.get("name", ""): d for d in root.findall("domain")}
    out: dict[str, tuple[FieldRule, ...]] = {}
    for cls in root.findall("class"):
        cname = cls.get("name", "")
        for meth in cls.findall("method"):
            if "client" not in {c.get("name") for c in meth.findall("chassis")}:
                continue  # a method only the server receives: the broker never sends it
            mname = meth.get("name", "")
            pclass = getattr(getattr(pcommands, _camel(cname)), _camel(mname))
            # pamqp's constructor takes the fields in the XML's order, under its own names
            fields = meth.findall("field")
            if not fields:
                out[pclass.name] = ()
                continue
            attrs = [p for p in inspect.signature(pclass.__init__).parameters if p != "self"]
            if len(attrs) != len(fields):
                raise ValueError(f"{cname}.{mname}: {len(fields)} fields in the XML, pamqp has {attrs}")
            rules = []
            for fld, attr in zip(fields, attrs, strict=True):
                dom = domains.get(fld.get("domain") or fld.get("type") or "")
                wire_type = dom.get("type", "") if dom is not None else fld.get("type", "")
                checks = {a.get("check") for a in fld.findall("assert")}
                if dom is not None:
                    checks |= {a.get("check") for a in dom.findall("assert")}
                rules.append(FieldRule(f"{cname}.{mname}", fld.get("name", ""), attr, wire_type,
                                       fld.get("reserved") == "1", "notnull" in checks))
            out[pclass.name] = tuple(r for r in rules if r.reserved or r.notnull)
    return out


@cache
def table() -> dict[str, tuple[FieldRule, ...]]:
    text = resources.files(SPEC_PACKAGE).joinpath(SPEC_FILE).read_text(encoding="utf-8")
    return parse(text)


def breaches(frm: Any) -> list[tuple[str, str]]:
    """``(invariant id, detail)`` for each field of ``frm`` the spec XML forbids it to hold."""
    out: list[tuple[str, str]] = []
    for rule in table().get(getattr(frm, "name", ""), ()):
        value = getattr(frm, rule.attr, None)
        if rule.reserved and rule.type in _EMPTY and value not in _EMPTY[rule.type]:
            out.append(("wire.reserved-fields",
                        f"{rule.method} {rule.field} ({rule.type}, reserved) is {value!r}, not empty"))
        if rule.notnull and (value is None or value in ("", b"", 0)):
            out.append(("wire.field-asserts",
                        f"{rule.method} {rule.field} ({rule.type}, notnull) is {value!r}"))
    return out
