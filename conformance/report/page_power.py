"""The report's "Suite power" section: per mutant killed / survived / equivalent with the killing
cases, the score per area and its chart (the tables come from :mod:`conformance.report.power`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from markupsafe import Markup

from conformance.model import sources
from conformance.report.html import COLORS, hbar_chart, pct

OUTCOME_CLASS: dict[str, str] = {
    "KILLED": "PASS", "SURVIVED": "FAIL", "NO-RESULT": "NOT_RUN", "EQUIVALENT": "INFORMATIONAL",
    "EQUIVALENT-KILLED": "NON_STRICT",
}


def svg_power_chart(broker: str, scores: Sequence[Mapping[str, Any]]) -> str:
    """Horizontal bars: one per area, length = mutation score, label killed / (mutants - equivalent)."""
    rows = []
    for s in scores:
        counted = int(s["n_mutants"]) - int(s["n_equivalent"])
        killed, score = int(s["n_killed"]), s["score"]
        segments = []
        if score is not None:
            tip = f"{s['category']}: {killed} of {counted} killed ({pct(score)})"
            segments.append((float(score), COLORS["PASS"], tip))
            if killed < counted:
                tip = f"{s['category']}: {counted - killed} not killed"
                segments.append((1 - float(score), COLORS["FAIL"], tip))
        label = f"{pct(score)} ({killed}/{counted})" if score is not None else "equivalent only"
        if int(s["n_equivalent"]):
            label += f" +{s['n_equivalent']} eq."
        rows.append((s["category"], segments, label))
    return hbar_chart(
        broker, f"mutation score per area for {broker}", rows, label_w=110, bar_w=240, right_w=120,
        track="#eceff1",
    )


def power_context(view: Mapping[str, Any]) -> dict[str, Any]:
    """What sections/power.html.j2 shows: per target broker its mutants (latest session) with the
    catalogue's description, and the score chart per area."""
    brokers = view.get("mutation_brokers", [])
    catalogue = _mutant_catalogue()
    scores: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for sc in view.get("mutation_scores", []):
        scores[sc["broker"]].append(sc)
    by_broker: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for m in view.get("mutants", []):
        by_broker[m["broker"]].append(m)
    groups = []
    for b in brokers:
        ms = by_broker.get(b, [])
        counts: dict[str, int] = defaultdict(int)
        for m in ms:
            counts[m["outcome"]] += 1
        tally = ", ".join(f"{n} {o.lower()}" for o, n in sorted(counts.items()))
        session = max((str(m["mutate_session"]) for m in ms), default="")
        groups.append((b, [(m, catalogue.get(m["mutant"], {})) for m in ms], tally, session))
    return {
        "brokers": brokers,
        # The chart is built (and its text escaped) by hbar_chart: safe as it is.
        "charts": [Markup(svg_power_chart(b, scores[b])) for b in brokers if b in scores],
        "groups": groups,
        "outcome_class": OUTCOME_CLASS,
    }


@lru_cache(maxsize=1)
def _mutant_catalogue() -> dict[str, dict[str, Any]]:
    from conformance.mutate.catalogue import CATALOGUE

    return {
        m.id: {
            "description": sources.cite_text(m.description),
            "rule": m.rule,
            "rule_text": sources.cite_text(m.rule) if m.rule else "",
            "equivalent": m.equivalent,
            "equivalent_text": sources.cite_text(m.equivalent) if m.equivalent else "",
        }
        for m in CATALOGUE
    }
