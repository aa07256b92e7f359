"""The report's "Suite power" section: per mutant killed / survived / equivalent with the killing
cases, the score per area and its chart (the tables come from :mod:`conformance.report.power`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from conformance import sources
from conformance.report.html import COLORS, e, hbar_chart, pct, table, td, verdict_chip

OUTCOME_CLASS: dict[str, str] = {
    "KILLED": "PASS", "SURVIVED": "FAIL", "NO-RESULT": "NOT_RUN", "EQUIVALENT": "INFORMATIONAL",
    "EQUIVALENT-KILLED": "NON_STRICT",
}


def outcome_chip(outcome: str) -> str:
    return (
        f'<span class="v v-{OUTCOME_CLASS.get(outcome, "NOT_RUN")}" title="{e(outcome)}">{e(outcome)}</span>'
    )


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


def _kills(m: Mapping[str, Any]) -> str:
    shown = "<br>".join(
        f'<code>{e(k["case_id"])}</code> {verdict_chip(k["verdict"])}'
        + (f' <small>(was {e(k["baseline"])})</small>' if k["baseline"] not in ("PASS",) else "")
        for k in m["kills"])
    more = int(m["n_kills"]) - len(m["kills"])
    return shown + (f"<br><small>+{more} more (tables/mutants)</small>" if more > 0 else "")


def section_power(view: Mapping[str, Any]) -> str:
    brokers = view.get("mutation_brokers", [])
    if not brokers:
        return (
            '<section id="power"><h2>Suite power</h2><p class="note">No mutation runs in the inputs: '
            "<code>amqp-conformance mutate</code> runs the suite through injected broker faults; give its "
            "results (<code>reports/mutate/</code> or a <code>&lt;session&gt;.summary.json</code>) "
            "to the report.</p></section>"
        )
    catalogue = _mutant_catalogue()
    scores: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for sc in view["mutation_scores"]:
        scores[sc["broker"]].append(sc)
    charts = "".join(
        f'<div class="chart">{svg_power_chart(b, scores[b])}</div>' for b in brokers if b in scores
    )
    out = [
        '<section id="power"><h2>Suite power (mutation runs)</h2><p class="note">Each mutant is '
        "a fault-injecting "
        "proxy in front of a good broker that breaks one promise; the cases that can observe it "
        "run through it "
        "(<code>amqp-conformance mutate</code>). Killed: a case ended FAIL or TIMEOUT "
        "(NON_STRICT for a SHOULD/MAY "
        "promise) where the same session's fault-free run did not; ERROR never kills. Equivalent mutants are "
        "documented as unobservable by any client. Mutation score per area = killed / (mutants − "
        "equivalent), "
        "over each mutant's latest session per target broker. Mutation runs are not counted in "
        "the compliance "
        "figures above.</p>",
        f'<div class="charts">{charts}</div>',
    ]
    by_broker: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for m in view["mutants"]:
        by_broker[m["broker"]].append(m)
    for b in brokers:
        ms = by_broker.get(b, [])
        counts: dict[str, int] = defaultdict(int)
        for m in ms:
            counts[m["outcome"]] += 1
        tally = ", ".join(f"{n} {o.lower()}" for o, n in sorted(counts.items()))
        body = []
        for m in ms:
            cat = catalogue.get(m["mutant"], {})
            desc = e(cat.get("description", "not in this version's catalogue"))
            if cat.get("equivalent"):
                desc += f'<br><small>equivalent: {e(sources.cite_text(cat["equivalent"]))}</small>'
            extra = ""
            if m["errors"]:
                extra += f'<br><small>ERROR (not a kill): {e(", ".join(m["errors"][:5]))}</small>'
            if m["problem"]:
                extra += f'<br><small>{e(m["problem"])}</small>'
            body.append(
                "<tr>"
                + td(f"<code>{e(m['mutant'])}</code>")
                + td(e(m["category"]))
                + td(outcome_chip(m["outcome"]))
                + td(_kills(m) + extra)
                + td(m["n_cases"], "num")
                + td(
                    desc
                    + (
                        f"<br><small>rule: {e(sources.cite_text(cat['rule']))}</small>"
                        if cat.get("rule")
                        else ""
                    )
                )
                + "</tr>"
            )
        session = max((str(m["mutate_session"]) for m in ms), default="")
        out.append(
            f'<h3>{e(b)}</h3><p class="note">{len(ms)} mutants: {e(tally)}; latest session {e(session)}.</p>'
            + table(
                [
                    "Mutant",
                    "Area",
                    "Outcome",
                    "Killed by (verdict; baseline if not PASS)",
                    "Cases",
                    "What it breaks",
                ],
                body,
                num=(4,),
            )
        )
    out.append("</section>")
    return "".join(out)


@lru_cache(maxsize=1)
def _mutant_catalogue() -> dict[str, dict[str, Any]]:
    from conformance.mutate.catalogue import CATALOGUE

    return {
        m.id: {"description": sources.cite_text(m.description), "rule": m.rule, "equivalent": m.equivalent}
        for m in CATALOGUE
    }
