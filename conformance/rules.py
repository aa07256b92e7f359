"""The spec XML's rules with stable ids, the key of case-to-rule traceability.

A rule's id is ``class.method/rule-name`` (rules in a method or one of its fields),
``class/rule-name`` (class level) or ``domain/rule-name`` (rules of a top-level domain). Where
that is not unique — the XML reuses names such as ``01`` or ``types`` across fields of one
method — every rule of a field in the clash is qualified with its field:
``class.method.field/rule-name``. Spaces in rule names become dashes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

SPEC_PATH = Path(str(resources.files("conformance").joinpath("data/amqp0-9-1.xml")))


@dataclass(frozen=True)
class SpecRule:
    id: str
    class_name: str  # "" for domain-level rules
    method: str
    field: str
    name: str
    on_failure: str
    doc: str
    scenario: str
    level: str  # MUST | SHOULD | MAY, the strongest keyword in the rule text
    actor: str  # server | client: who the rule binds, from its text


def _text(el: ET.Element | None) -> str:
    return " ".join((el.text or "").split()) if el is not None else ""


def _level(doc: str) -> str:
    if re.search(r"\bMUST\b", doc):
        return "MUST"
    if re.search(r"\bSHOULD\b", doc):
        return "SHOULD"
    return "MAY"


def _actor(doc: str) -> str:
    head = doc.split(".")[0].lower()
    if re.search(r"\b(client|applications?)\s+(must|should|may)", head):
        return "client"
    return "server"


@cache
def load_rules(path: Path = SPEC_PATH) -> tuple[SpecRule, ...]:
    root = ET.parse(path).getroot()
    raw: list[tuple[str, str, str, str, ET.Element]] = []  # class, method, field, top, rule
    for child in root:
        if child.tag in ("domain", "constant"):
            raw.extend(("", "", "", child.get("name", ""), r) for r in child.findall("rule"))
        elif child.tag == "class":
            cls = child.get("name", "")
            raw.extend((cls, "", "", "", r) for r in child.findall("rule"))
            for m in child.findall("method"):
                meth = m.get("name", "")
                raw.extend((cls, meth, "", "", r) for r in m.findall("rule"))
                for f in m.findall("field"):
                    raw.extend((cls, meth, f.get("name", ""), "", r) for r in f.findall("rule"))

    def base(cls: str, meth: str, top: str, name: str) -> str:
        name = name.replace(" ", "-")
        if not cls:
            return f"{top}/{name}"
        return f"{cls}.{meth}/{name}" if meth else f"{cls}/{name}"

    counts = Counter(base(c, m, t, r.get("name", "")) for c, m, _f, t, r in raw)
    rules: list[SpecRule] = []
    for cls, meth, field, top, el in raw:
        name = el.get("name", "")
        rid = base(cls, meth, top, name)
        if counts[rid] > 1 and field:
            rid = f"{cls}.{meth}.{field}/{name.replace(' ', '-')}"
        doc = _text(el.find("doc"))
        scenario = " ".join(_text(d) for d in el.findall("doc") if d.get("type") == "scenario")
        doc_main = " ".join(_text(d) for d in el.findall("doc") if d.get("type") != "scenario")
        rules.append(SpecRule(rid, cls, meth, field, name, el.get("on-failure", ""), doc_main or doc,
                              scenario, _level(doc_main or doc), _actor(doc_main or doc)))
    ids = [r.id for r in rules]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"rule ids are not unique: {dupes}")
    return tuple(rules)


def rule_ids() -> frozenset[str]:
    return frozenset(r.id for r in load_rules())


if __name__ == "__main__":
    for r in load_rules():
        print(f"{r.id:55} {r.level:6} {r.actor:6} {r.on_failure or '-':20} {r.doc[:90]}")
