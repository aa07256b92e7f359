"""Spec-rule coverage: every rule of the spec XML against the cases that check it, or the
one-line reason it cannot be checked from a client (``profiles/uncheckable_rules.toml``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conformance.model.cases import Case
from conformance.model.spec import Rule, load_rules


@dataclass(frozen=True)
class RuleCoverage:
    rule: Rule
    cases: tuple[str, ...]
    reason: str  # why no client can check it ("" when cases check it or nobody said)

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule.id, "level": self.rule.level, "actor": self.rule.actor,
                "cases": list(self.cases), "uncheckable_reason": self.reason}


def uncheckable_reasons() -> dict[str, str]:
    from conformance.profiles import load_table

    try:
        table = load_table("uncheckable_rules")
    except FileNotFoundError:
        return {}
    return {rid: str(entry.get("reason", "")) for rid, entry in table.get("rules", {}).items()}


def unknown_rule_refs(cases: Iterable[Case]) -> dict[str, list[str]]:
    """Rule ids cited by cases that the spec XML does not have (case id → bad ids)."""
    known = {r.id for r in load_rules()}
    out: dict[str, list[str]] = {}
    for c in cases:
        bad = [r for r in c.rules if r not in known]
        if bad:
            out[c.id] = bad
    return out


def rule_coverage(cases: Iterable[Case]) -> list[RuleCoverage]:
    by_rule: dict[str, list[str]] = {}
    for c in cases:
        for rid in c.rules:
            by_rule.setdefault(rid, []).append(c.id)
    reasons = uncheckable_reasons()
    return [
        RuleCoverage(
            r, tuple(sorted(by_rule.get(r.id, ()))), "" if by_rule.get(r.id) else reasons.get(r.id, "")
        )
        for r in load_rules()
    ]
