"""The rules of the AMQP 0-9-1 specification XML (``conformance/data/amqp0-9-1.xml``).

Every ``<rule>`` element becomes one :class:`Rule`. Its id is how cases cite it in their
``rules`` field:

- a rule inside a method, or inside a field of a method: ``class.method/rule-name``
  (e.g. ``basic.ack/exists`` for the rule on the ``multiple`` field of ``basic.ack``); where
  the XML reuses a rule name within one method (three rules named ``01`` under
  ``basic.consume``), every field rule of the clash is qualified with its field:
  ``class.method.field/rule-name`` (``basic.consume.exclusive/01``), so each of the 115 rules
  has an id of its own;
- a rule at class level: ``class/rule-name`` (e.g. ``exchange/required-types``);
- a rule of a top-level domain or constant: ``<domain-or-constant>/<rule-name>``
  (e.g. ``delivery-tag/channel-local``).

Rule names in the XML may contain spaces (``tx``: "not multiple queues"); ids turn spaces into
hyphens so every id matches :data:`conformance.model.cases.RULE_RE`.

Run ``python -m conformance.model.spec`` for the list of ids, levels and texts.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path

from conformance.data import SPEC_FILE, SPEC_PACKAGE

_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Rule:
    id: str
    class_name: str | None  # None for a rule of a top-level domain or constant
    method: str | None  # None for a class-level or domain-level rule
    name: str  # as written in the XML
    on_failure: str | None  # the reply-code name of the ``on-failure`` attribute, if any
    doc: str  # the rule's text, whitespace collapsed
    scenario: str  # the ``<doc type="scenario">`` text, whitespace collapsed ("" if none)
    field: str | None = None  # the field the rule sits on, when it sits on one
    domain: str | None = None  # the domain or constant the rule sits on, for top-level rules

    @property
    def actor(self) -> str:
        """``client`` when the rule's first sentence binds the client or application, else ``server``."""
        head = self.doc.split(".")[0].lower()
        return "client" if re.search(r"\b(client|applications?)\s+(must|should|may)", head) else "server"

    @property
    def level(self) -> str:
        """MUST / SHOULD / MAY as the rule's text states it (the strongest keyword wins)."""
        text = f"{self.doc} {self.scenario}"
        for word in ("MUST", "SHOULD", "MAY"):
            if re.search(rf"\b{word}\b", text):
                return word
        return "INFO"


def slug(name: str) -> str:
    return _WS.sub("-", name.strip().lower())


def _text(elem: ET.Element) -> str:
    return _WS.sub(" ", "".join(elem.itertext())).strip()


def _docs(rule: ET.Element) -> tuple[str, str]:
    doc_parts: list[str] = []
    scenario_parts: list[str] = []
    for d in rule.findall("doc"):
        (scenario_parts if d.get("type") == "scenario" else doc_parts).append(_text(d))
    return " ".join(p for p in doc_parts if p), " ".join(p for p in scenario_parts if p)


def parse_rules(xml_text: str) -> list[Rule]:
    """Every ``<rule>`` of a spec XML document, in document order."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"the spec XML does not parse: {exc}") from exc
    out: list[Rule] = []

    def visit(
        elem: ET.Element, cls: str | None, method: str | None, fld: str | None, dom: str | None
    ) -> None:
        for child in elem:
            tag = child.tag
            name = child.get("name", "")
            if tag == "class":
                visit(child, name, None, None, None)
            elif tag == "method":
                visit(child, cls, name, None, None)
            elif tag == "field":
                visit(child, cls, method, name, dom)
            elif tag in ("domain", "constant") and cls is None:
                visit(child, None, None, None, name)
            elif tag == "rule":
                rule_name = child.get("name", "")
                if cls is not None:
                    scope = f"{cls}.{method}" if method else cls
                elif dom is not None:
                    scope = dom
                else:
                    raise ValueError(f"rule {rule_name!r} sits outside any class, domain or constant")
                doc, scenario = _docs(child)
                out.append(
                    Rule(
                        id=f"{scope}/{slug(rule_name)}",
                        class_name=cls,
                        method=method,
                        name=rule_name,
                        on_failure=child.get("on-failure"),
                        doc=doc,
                        scenario=scenario,
                        field=fld,
                        domain=dom,
                    )
                )

    visit(root, None, None, None, None)
    counts = Counter(r.id for r in out)
    out = [replace(r, id=f"{r.class_name}.{r.method}.{r.field}/{slug(r.name)}")
           if counts[r.id] > 1 and r.field else r for r in out]
    dupes = sorted(i for i, n in Counter(r.id for r in out).items() if n > 1)
    if dupes:
        raise ValueError(f"rule ids are not unique even with their fields: {dupes}")
    return out


@cache
def _load_default() -> tuple[Rule, ...]:
    text = resources.files(SPEC_PACKAGE).joinpath(SPEC_FILE).read_text(encoding="utf-8")
    return tuple(parse_rules(text))


def load_rules(path: Path | None = None) -> list[Rule]:
    """The rules of the shipped spec XML (or of ``path``), in document order."""
    if path is None:
        return list(_load_default())
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read spec XML {path}: {exc.strerror}") from exc
    return parse_rules(text)


def rule_ids() -> list[str]:
    """The rule ids, in document order (one per rule)."""
    return [r.id for r in load_rules()]


if __name__ == "__main__":
    for r in load_rules():
        print(f"{r.id:55} {r.level:6} {r.actor:6} {r.on_failure or '-':20} {r.doc[:90]}")
