"""The self-contained ``index.html``: inline CSS, inline SVG charts, one small inline script (the
matrix filters), nothing loaded from the network (links to public sources only).

Rendering is pure Python over the bounded view :func:`conformance.report.pipeline.collect_view`
builds, plus the suite's own catalogue (case descriptions, spec rule text, the sources registry)
for the drill-down; every value is escaped.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from conformance import sources
from conformance.report import tx_table
from conformance.report.html import COLORS, SHORT, css, e, hbar_chart, pct, score_bar, table, td, verdict_chip
from conformance.report.page_power import section_power
from conformance.report.schema import LEVELS, VERDICTS

MAX_TRACE_LINES = 200
MAX_TITLE_BROKERS = 4

# ------------------------------------------------------------------------------------ catalogue


@lru_cache(maxsize=1)
def case_catalogue() -> dict[str, dict[str, Any]]:
    """This version's cases by id (description, expectation, rules, sources) for the drill-down."""
    from conformance.cases import all_cases

    return {c.id: c.as_dict() for c in all_cases()}


@lru_cache(maxsize=1)
def spec_rules() -> dict[str, list[Any]]:
    from conformance.spec import load_rules

    out: dict[str, list[Any]] = defaultdict(list)
    for r in load_rules():
        out[r.id].append(r)
    return dict(out)


def broker_title(view: Mapping[str, Any]) -> str:
    """``RabbitMQ@3.10.8, garagemq@0.1`` (the most recent first; more than four are counted)."""
    names = [b["broker"] for b in view.get("brokers", [])]
    head = ", ".join(names[:MAX_TITLE_BROKERS])
    rest = view.get("n_brokers", len(names)) - min(len(names), MAX_TITLE_BROKERS)
    return head + (f" and {rest} more" if rest > 0 else "")


def render_trace(trace: str | None) -> str:
    """A record's ``extra.trace`` (JSON text: a list of frames, each a string or an object) as lines."""
    if not trace:
        return ""
    try:
        frames = json.loads(trace)
    except ValueError:
        frames = trace.splitlines()
    if not isinstance(frames, list):
        frames = [frames]
    lines = []
    for f in frames[-MAX_TRACE_LINES:]:
        if isinstance(f, Mapping):
            # Common keys first in a readable order, the rest as they come.
            keys = [
                k
                for k in (
                    "t",
                    "ts",
                    "time",
                    "dir",
                    "direction",
                    "channel",
                    "ch",
                    "frame",
                    "method",
                    "summary",
                )
                if k in f
            ]
            keys += [k for k in f if k not in keys]
            lines.append(
                "  ".join(
                    f"{f[k]}" if k in ("frame", "method", "summary", "dir", "direction") else f"{k}={f[k]}"
                    for k in keys
                )
            )
        else:
            lines.append(str(f))
    more = (
        f"({len(frames) - MAX_TRACE_LINES} earlier frames not shown)\n"
        if len(frames) > MAX_TRACE_LINES
        else ""
    )
    return f'<pre class="trace">{e(more + chr(10).join(lines))}</pre>'


def case_drilldown(case_id: str) -> str:
    """Description, expectation, spec rule text and sources (as links) of one case."""
    case = case_catalogue().get(case_id)
    if case is None:
        return '<div class="drill"><p class="note">Not a case of this version of the suite.</p></div>'
    parts = [f"<p>{e(case['description'])}</p>" if case.get("description") else ""]
    if case.get("expectation"):
        parts.append(f"<p><b>Expected:</b> {e(case['expectation'])}</p>")
    rules = spec_rules()
    for rid in case.get("rules", []):
        found = rules.get(rid)
        if found:
            r = found[0]
            parts.append(f'<p class="rule"><code>{e(rid)}</code> <small>{e(r.level)}</small> {e(r.doc)}'
                         + (f'<br><small>Scenario: {e(r.scenario)}</small>' if r.scenario else "") + "</p>")
        else:
            parts.append(f'<p class="rule"><code>{e(rid)}</code> <small>(not in the spec XML)</small></p>')
    cites = [sources.resolve(src).html() for src in case.get("sources", [])]
    if cites:
        parts.append("<p><b>Sources:</b> " + " · ".join(cites) + "</p>")
    return f'<div class="drill">{"".join(parts)}</div>'


FILTER_SCRIPT = """
(function () {
  var bar = document.getElementById('filters'); if (!bar) return;
  var rows = Array.prototype.slice.call(document.querySelectorAll('#matrix tbody tr'));
  var heads = Array.prototype.slice.call(document.querySelectorAll('#matrix thead th[data-b]'));
  function val(name) { return bar.querySelector('[name=' + name + ']').value; }
  function apply() {
    var v = val('verdict'), a = val('area'), l = val('level'), b = val('broker');
    var q = val('q').trim().toLowerCase(), shown = 0;
    heads.forEach(function (th) { th.hidden = b !== '' && th.getAttribute('data-b') !== b; });
    rows.forEach(function (tr) {
      var cells = Array.prototype.slice.call(tr.querySelectorAll('td[data-b]'));
      cells.forEach(function (td) { td.hidden = b !== '' && td.getAttribute('data-b') !== b; });
      var vis = cells.filter(function (td) { return !td.hidden; });
      var ok = (a === '' || tr.getAttribute('data-area') === a)
        && (l === '' || tr.getAttribute('data-level') === l)
        && (q === '' || tr.getAttribute('data-text').indexOf(q) >= 0)
        && (v === '' || vis.some(function (td) { return td.getAttribute('data-v') === v; }));
      tr.hidden = !ok; if (ok) shown++;
    });
    document.getElementById('shown').textContent = shown + ' of ' + rows.length + ' cases shown';
  }
  bar.addEventListener('input', apply); bar.addEventListener('change', apply); apply();
})();
"""


def filter_bar(areas: Sequence[str], levels: Sequence[str], brokers: Sequence[str]) -> str:
    def select(name: str, label: str, options: Sequence[tuple[str, str]]) -> str:
        opts = "".join(f'<option value="{e(v)}">{e(t)}</option>' for v, t in options)
        return f'<label>{label} <select name="{name}"><option value="">all</option>{opts}</select></label>'

    return (
        '<div id="filters">'
        + select("verdict", "Verdict", [(v, v) for v in VERDICTS])
        + select("area", "Area", [(a, a) for a in areas])
        + select("level", "Level", [(lv, lv) for lv in levels])
        + select("broker", "Broker", [(str(i), b) for i, b in enumerate(brokers)])
        + '<label>Search <input name="q" type="search" placeholder="case id or words"></label>'
        + '<span id="shown"></span></div>'
    )


# ------------------------------------------------------------------------------------ sections


def section_summary(summary: Mapping[str, Any], view: Mapping[str, Any]) -> str:
    brokers = view["brokers"]
    best = {p["broker"]: p for p in view["profile"] if p["best"]}
    body = []
    for b in brokers:
        p = best.get(b["broker"])
        prof = "–" if p is None else f'{e(tx_table.COLUMN_LABELS.get(p["column"], p["column"]))}' + (
            f' <small>(profile {e(p["profile"])})</small>' if p["profile"] else ""
        ) + f" {pct(p['score'])}"
        counts = " ".join(
            f'<span class="v v-{v}" title="{v}">{SHORT[v]} {b[f"n_{v.lower()}"]}</span>'
            for v in VERDICTS
            if b[f"n_{v.lower()}"]
        )
        body.append(
            "<tr>"
            + td(f"<b>{e(b['broker'])}</b>")
            + td(b["n_runs"], "num")
            + td(f"{b['n_executions']:,}", "num")
            + td(b["n_cases"], "num")
            + td(counts)
            + td(score_bar(b["score"]))
            + td(b["n_must_failures"], "num")
            + td(prof)
            + td(e(b["clients"]))
            + td(e(str(b["last_ts"])[:19]))
            + "</tr>"
        )
    more = ""
    if view["n_brokers"] > len(brokers):
        more = (
            f'<p class="note">Showing the {len(brokers)} most recent of {view["n_brokers"]} broker '
            "versions; all are in tables/brokers.</p>"
        )
    legend = " ".join(f'<span class="v v-{v}">{SHORT[v]}</span> {v}' for v in VERDICTS)
    return (
        '<section id="summary"><h2>Summary per broker</h2>'
        '<p class="note">Latest verdict per case. Score = PASS / (PASS + FAIL + NON_STRICT + '
        f"TIMEOUT). {legend}</p>"
        + more
        + table(
            [
                "Broker",
                "Runs",
                "Executions",
                "Cases",
                "Latest verdicts",
                "Score",
                "MUST failures",
                "tx profile (best column)",
                "Clients",
                "Last run (UTC)",
            ],
            body,
            num=(1, 2, 3, 6),
        )
        + "</section>"
    )


def svg_area_chart(broker: str, scores: Sequence[Mapping[str, Any]]) -> str:
    """Horizontal stacked bars: one per area, segments = latest verdict counts."""
    rows = []
    for s in scores:
        total = max(1, int(s["n_cases"]))
        counts = [(v, int(s[f"n_{v.lower()}"])) for v in VERDICTS]
        segments = [(n / total, COLORS[v], f"{s['area']}: {n} {v}") for v, n in counts if n]
        rows.append((s["area"], segments, str(int(s["n_cases"]))))
    return hbar_chart(broker, f"verdicts per area for {broker}", rows, label_w=96, bar_w=260, right_w=50)


def section_chart(view: Mapping[str, Any]) -> str:
    by_broker: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for s in view["scores_area"]:
        by_broker[s["broker"]].append(s)
    charts = "".join(
        f'<div class="chart">{svg_area_chart(b, by_broker[b])}</div>'
        for b in view["chart_brokers"]
        if b in by_broker
    )
    legend = "".join(
        (
            '<span><svg width="10" height="10"><rect width="10" height="10" '
            f'fill="{COLORS[v]}"/></svg> {v}</span>'
        )
        for v in VERDICTS
    )
    levels = _level_table(view)
    return (
        '<section id="plot"><h2>Verdicts per area per broker</h2>'
        f'<p class="legend">{legend}</p><div class="charts">{charts}</div>'
        f"<h3>Score per level</h3>{levels}</section>"
    )


def _level_table(view: Mapping[str, Any]) -> str:
    cell: dict[tuple[str, str], Mapping[str, Any]] = {
        (s["broker"], s["level"]): s for s in view["scores_level"]
    }
    levels = [lv for lv in LEVELS if any(k[1] == lv for k in cell)]
    body = []
    for b in view["chart_brokers"]:
        tds = []
        for lv in levels:
            s = cell.get((b, lv))
            tds.append(
                td(
                    "" if s is None else f"{pct(s['score'])} <small>({s['n_pass']}/{s['n_scored']})</small>",
                    "num",
                )
            )
        body.append(f"<tr>{td(e(b))}{''.join(tds)}</tr>")
    return table(["Broker", *levels], body)


def _cell(m: Mapping[str, Any], broker: str, index: int) -> str:
    v = m["verdict"]
    duration = m.get("duration_s")
    lines = [
        f"<b>{e(v)}</b> on {e(broker)}"
        + (f" · {duration:.3f} s" if isinstance(duration, (int, float)) else "")
        + (f" · run {e(m['run_id'])}" if m.get("run_id") else ""),
        f"expected: {e(m['expected'])}",
        f"observed: {e(m['observed'])}",
    ]
    if m["message"]:
        lines.append(e(m["message"]))
    trace = render_trace(m.get("trace"))
    return (
        f'<td class="cell c-{e(v)}" data-b="{index}" data-v="{e(v)}"><details><summary '
        f'title="{e(v)}">{SHORT.get(v, e(v))}'
        f'</summary><div class="detail">{chr(10).join(lines)}{trace}</div></details></td>'
    )


def section_matrix(view: Mapping[str, Any]) -> str:
    brokers: list[str] = [b for b in view["matrix_brokers"]]
    cells: dict[tuple[str, str], Mapping[str, Any]] = {}
    meta: dict[str, tuple[str, str]] = {}
    for m in view["matrix"]:
        cells[(m["case_id"], m["broker"])] = m
        meta[m["case_id"]] = (m["area"], m["level"])
    cases = sorted(meta, key=lambda c: (meta[c][0], c))
    catalogue = case_catalogue()
    body = []
    for c in cases:
        tds = []
        for i, b in enumerate(brokers):
            m = cells.get((c, b))
            tds.append(
                f'<td class="cell c-none" data-b="{i}" data-v=""></td>' if m is None else _cell(m, b, i)
            )
        area, level = meta[c]
        info = catalogue.get(c, {})
        text = " ".join([c, info.get("description", ""), info.get("expectation", "")]).lower()
        case_cell = (
            f'<details class="case"><summary><code>{e(c)}</code></summary>{case_drilldown(c)}</details>'
        )
        body.append(f'<tr data-area="{e(area)}" data-level="{e(level)}" data-text="{e(text)}">'
                    f"{td(case_cell)}{td(e(area))}{td(e(level))}{''.join(tds)}</tr>")
    shown = len(cases)
    note = (
        f"{shown} of {view['n_matrix_cases']} cases (cases with any non-PASS verdict first) × the "
        f"{len(brokers)} most recent broker versions; "
        "click a case for its description, expectation, spec rule and sources, a cell for "
        "expected vs observed, "
        "duration and frame trace. The full matrix is tables/matrix."
    )
    heads = ["Case", "Area", "Level", *[f'<small>{e(b)}</small>' for b in brokers]]
    head_html = "".join(
        f"<th>{h}</th>" if i < 3 else f'<th data-b="{i - 3}">{h}</th>' for i, h in enumerate(heads))
    areas = sorted({a for a, _ in meta.values()})
    levels = [lv for lv in LEVELS if any(lv == x for _, x in meta.values())]
    return (
        '<section id="matrix"><h2>Compliance matrix</h2><p '
        f'class="note">{note}</p>{filter_bar(areas, levels, brokers)}'
        "<div "
        f'class="scroll"><table><thead><tr>{head_html}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'
        "</section>"
    )


def section_tx(view: Mapping[str, Any]) -> str:
    by_broker: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in view["tx"]:
        by_broker[r["broker"]].append(r)
    if not by_broker:
        return (
            '<section id="tx"><h2>tx table</h2><p class="note">No tx case observations (extra.tx_row '
            "/ extra.tx_observed) in the inputs.</p></section>"
        )
    out = [
        '<section id="tx"><h2>tx table per broker</h2><p class="note">Observed values from the '
        "tx cases beside the "
        "seed's columns (RabbitMQ “Broker Semantics”, Semantics of tx). Green: the column agrees "
        "(its “undefined” agrees with anything); red: it does not.</p>"
    ]
    heads = ["Feature", "Observed", "Cases", *[e(tx_table.COLUMN_LABELS[c]) for c in tx_table.COLUMNS]]
    for b, rows in by_broker.items():
        body = []
        for r in sorted(rows, key=lambda r: r["row_order"]):
            tds = []
            for c in tx_table.COLUMNS:
                f = tx_table.COLUMN_FIELD[c]
                ok = r[f"{f}_match"]
                cls = "unknown" if ok is None else ("match" if ok else "mismatch")
                tds.append(td(e(r[f]), cls))
            observed = r["observed"] if r["observed"] is not None else "not observed"
            body.append(
                f"<tr>{td(e(tx_table.ROW_LABELS.get(r['tx_row'], r['tx_row'])))}{td(f'<b>{e(observed)}</b>')}"
                f"{td(r['n_cases'], 'num')}{''.join(tds)}</tr>"
            )
        out.append(f"<h3>{e(b)}</h3>{table(heads, body)}")
    out.append("</section>")
    return "".join(out)


def section_profile(view: Mapping[str, Any]) -> str:
    by_broker: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for p in view["profile"]:
        by_broker[p["broker"]].append(p)
    body = []
    for b, ps in by_broker.items():
        ps = sorted(ps, key=lambda p: p["rank"])
        best = ps[0]
        scores = " · ".join(
            (
                f'<span class="{"best" if p["best"] else ""}">{e(tx_table.COLUMN_LABELS[p["column"]])} '
                f"{p['n_match']}/{p['n_compared']}</span>"
            )
            for p in sorted(ps, key=lambda p: p["column_order"])
        )
        dis = "<br>".join(e(d) for d in best["disagreements"]) or "none"
        body.append(
            "<tr>"
            + td(f"<b>{e(b)}</b>")
            + td(f'<span class="best">{e(tx_table.COLUMN_LABELS[best["column"]])}</span>')
            + td(e(best["profile"] or "—"))
            + td(pct(best["score"]), "num")
            + td(scores)
            + td(dis)
            + "</tr>"
        )
    note = (
        "Which column of the tx table each broker behaves like, from its tx cases' observations. "
        "A column's “undefined” matches anything; unobservable rows are not compared; ties go to "
        "more exact matches."
    )
    return (
        f'<section id="profile"><h2>Profile inference</h2><p class="note">{note}</p>'
        + table(
            [
                "Broker",
                "Best column",
                "Profile",
                "Match",
                "All columns (matched/compared)",
                "Rows that disagree with the best column",
            ],
            body,
        )
        + "</section>"
    )


def section_rules(summary: Mapping[str, Any], view: Mapping[str, Any]) -> str:
    cov = summary["rule_coverage"]
    # Rules some case of the suite cites but no case in these inputs ran: a subset run, not a gap.
    cited_by_suite = {rid for c in case_catalogue().values() for rid in c.get("rules", [])}
    body = []
    n_not_run = 0
    for r in view["rules"]:
        if r["n_brokers"]:
            status = verdict_chip(r["worst_verdict"])
        elif r["rule_id"] in cited_by_suite:
            n_not_run += 1
            status = '<span class="v v-NOT_RUN">not run here</span>'
        else:
            status = '<span class="v v-UNSUPPORTED">not covered</span>'
        rid = f"<code>{e(r['rule_id'])}</code>" + (
            "" if r["in_spec"] else " <small>(not in the spec XML)</small>"
        )
        body.append(
            "<tr>"
            + td(rid)
            + td(e(r["rule_level"] or ""))
            + td(r["n_elements"], "num")
            + td(r["n_brokers"], "num")
            + td(status)
            + td(f'{r["n_pass"]} / {r["n_pass"] + r["n_other"]}', "num")
            + td(f"<small>{e(r['cases'])}</small>")
            + "</tr>"
        )
    note = (
        f"{cov['covered']} of {cov['rule_ids']} rule ids ({cov['rule_elements']} &lt;rule&gt; "
        "elements) are cited by at least one case; "
        "status is the worst latest verdict over all brokers."
        + (
            (
                f" {n_not_run} rule id(s) are checked by cases of the suite that these inputs did not run "
                "(“not run here”)."
            )
            if n_not_run
            else ""
        )
    )
    return (
        f'<section id="rules"><h2>Spec-rule coverage</h2><p class="note">{note}</p>'
        + table(
            ["Rule", "Level", "Elements", "Brokers", "Worst verdict", "PASS / executions", "Cases"],
            body,
            num=(2, 3, 5),
        )
        + "</section>"
    )


def svg_trend(product: str, points: Sequence[Mapping[str, Any]]) -> str:
    """Score per run, oldest first: one point per run, labelled with the broker version."""
    w, h, left, top, bottom = 520, 150, 36, 20, 28
    n = len(points)
    step = (w - left - 12) / max(1, n - 1)

    def y(score: float) -> float:
        return top + (1 - score) * (h - top - bottom)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
        f'aria-label="score per run for {e(product)}"><text x="4" y="14" font-size="13" '
        f'font-weight="600">{e(product)}</text>'
    ]
    for frac in (0.0, 0.5, 1.0):
        parts.append(
            f'<line x1="{left}" x2="{w - 8}" y1="{y(frac):.1f}" y2="{y(frac):.1f}" stroke="#e3e6ea"/>'
            f'<text x="2" y="{y(frac) + 4:.1f}" font-size="10">{int(frac * 100)}%</text>'
        )
    coords = [(left + i * step, y(float(p["score"]))) for i, p in enumerate(points)]
    if len(coords) > 1:
        parts.append('<polyline fill="none" stroke="#1d5fa8" stroke-width="2" points="'
                     + " ".join(f"{x:.1f},{yy:.1f}" for x, yy in coords) + '"/>')
    last_version = None
    for (x, yy), p in zip(coords, points, strict=True):
        parts.append(
            f'<circle cx="{x:.1f}" cy="{yy:.1f}" r="3.5" fill="#1d5fa8"><title>{e(p["broker"])} run '
            f"{e(p['run_id'])}: "
            f"{pct(p['score'])} ({p['n_pass']}/{p['n_scored']})</title></circle>"
        )
        if p["broker_version"] != last_version:  # label each release where it starts
            parts.append(
                f'<text x="{x:.1f}" y="{h - 8}" font-size="10" '
                f'text-anchor="middle">{e(p["broker_version"])}</text>'
            )
            last_version = p["broker_version"]
    parts.append("</svg>")
    return "".join(parts)


def section_trend(view: Mapping[str, Any]) -> str:
    by_product: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in view.get("scores_run", []):
        if r["score"] is not None:
            by_product[r["broker_product"]].append(r)
    if not by_product:
        return '<section id="trend"><h2>Score trend</h2><p class="note">No scored runs.</p></section>'
    charts = "".join(
        f'<div class="chart">{svg_trend(p, sorted(rs, key=lambda r: (str(r["ts"]), r["run_id"])))}</div>'
        for p, rs in sorted(by_product.items())
    )
    note = (
        "Score of each run (PASS / (PASS + FAIL + NON_STRICT + TIMEOUT) over the cases it ran), "
        "oldest first, "
        "per broker product; labels mark where a release starts. A run of a subset of the cases "
        "scores that subset."
    )
    return (
        '<section id="trend"><h2>Score trend over runs and releases</h2><p '
        f'class="note">{note}</p><div class="charts">{charts}</div></section>'
    )


def section_queue_types(view: Mapping[str, Any]) -> str:
    """Classic vs quorum: one row per case and broker version that ran on more than one queue type."""
    found = view.get("queue_types") or []  # absent in a view made before queue types
    if not found:
        return ""

    def cell(r: Mapping[str, Any], qt: str) -> str:
        v = r.get(f"verdict_{qt}")
        if v is None:
            return td("—")
        return f'<td title="{e(r.get(f"observed_{qt}") or "")}">{verdict_chip(v)}</td>'

    body = [
        "<tr>" + td(f"<code>{e(r['base_id'])}</code>") + td(e(r["area"])) + td(e(r["broker"]))
        + cell(r, "classic") + cell(r, "quorum") + td("differs" if r["differs"] else "") + "</tr>"
        for r in found
    ]
    n_diff = sum(1 for r in found if r["differs"])
    note = (
        f"{len(found)} case × broker row(s) run on more than one queue type ({n_diff} with different "
        "verdicts, first); hover a verdict for what was observed. Ids: classic plain, others suffixed [type]."
    )
    return (f'<section id="queue-types"><h2>Queue types: classic vs quorum</h2><p class="note">{note}</p>'
            + table(["Case", "Area", "Broker", "classic", "quorum", ""], body) + "</section>")


def section_flaky(view: Mapping[str, Any]) -> str:
    body = [
        "<tr>"
        + td(e(f["broker"]))
        + td(e(f["broker_platform"]))
        + td(f"<code>{e(f['case_id'])}</code>")
        + td(f["n_runs"], "num")
        + td(
            " ".join(f"{verdict_chip(v)}&nbsp;{f[f'n_{v.lower()}']}" for v in VERDICTS if f[f"n_{v.lower()}"])
        )
        + "</tr>"
        for f in view["flaky"]
    ]
    note = f"{view['n_flaky']} case × broker build pair(s) with different verdicts across runs" + (
        f"; the first {len(body)} shown." if view["n_flaky"] > len(body) else "."
    )
    return f'<section id="flaky"><h2>Flaky cases</h2><p class="note">{note}</p>' + (
        table(["Broker", "Platform", "Case", "Runs", "Verdicts"], body) if body else ""
    ) + "</section>"


def section_regressions(view: Mapping[str, Any]) -> str:
    body = [
        "<tr>"
        + td(e(r["baseline"]))
        + td(e(r["candidate"]))
        + td(f"<code>{e(r['case_id'])}</code>")
        + td(e(r["kind"]))
        + td(verdict_chip(r["baseline_verdict"]) or "new case")
        + td(verdict_chip(r["candidate_verdict"]))
        + td(f"<small>expected: {e(r['expected'])}<br>observed: {e(r['observed'])}</small>")
        + "</tr>"
        for r in view["regressions"]
    ]
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(view["regression_kinds"].items())) or "none"
    note = (
        "Between consecutive versions of each product: PASS → FAIL/TIMEOUT/ERROR, and new "
        f"NON_STRICT. {kinds}."
    )
    return (
        f'<section id="regressions"><h2>Regressions</h2><p class="note">{note}</p>'
        + (
            table(["Baseline", "Candidate", "Case", "Kind", "Was", "Now", "Expected vs observed"], body)
            if body
            else ""
        )
        + "</section>"
    )


def section_malformed(view: Mapping[str, Any]) -> str:
    if not view["n_malformed"]:
        return ""
    body = [
        f"<tr>{td(e(m['file']))}{td(m['line'], 'num')}{td(e(m['reason']))}"
        f"{td('<code>' + e(m['value']) + '</code>')}</tr>"
        for m in view["malformed"]
    ]
    return (
        (
            '<section id="malformed"><h2>Malformed input lines</h2><p '
            f'class="note">{view["n_malformed"]} line(s) skipped.</p>'
        )
        + table(["File", "Line", "Problem", "Text (first 200 chars)"], body, num=(1,))
        + "</section>"
    )


def render_report(summary: Mapping[str, Any], view: Mapping[str, Any]) -> str:
    inputs = summary["inputs"]
    brokers = broker_title(view) or "no broker"
    sub = (
        f"{inputs['n_rows']:,} case executions from {inputs['n_files']} file(s) · "
        f"{summary['n_brokers']} broker versions · "
        f"{summary['n_cases']} cases · {inputs['n_malformed']} malformed line(s) · generated "
        f"{e(summary['generated_at'])}"
    )
    nav = "".join(
        f'<a href="#{i}">{t}</a>'
        for i, t in (
            ("summary", "Summary"),
            ("plot", "Plot"),
            ("trend", "Trend"),
            ("matrix", "Matrix"),
            ("queue-types", "Queue types"),
            ("tx", "tx table"),
            ("profile", "Profiles"),
            ("rules", "Rule coverage"),
            ("flaky", "Flaky"),
            ("regressions", "Regressions"),
            ("power", "Suite power"),
        )
    )
    body = "".join(
        [
            section_summary(summary, view),
            section_chart(view),
            section_trend(view),
            section_matrix(view),
            section_queue_types(view),
            section_tx(view),
            section_profile(view),
            section_rules(summary, view),
            section_flaky(view),
            section_regressions(view),
            section_power(view),
            section_malformed(view),
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>AMQP 0-9-1 conformance — {e(brokers)} — "
        f"{e(summary['name'])}</title><style>{css()}</style></head>"
        f"<body><header><h1>AMQP 0-9-1 conformance — {e(brokers)}</h1><p>report "
        f"{e(summary['name'])} · {sub}</p></header>"
        f"<nav>{nav}</nav><main>{body}</main><script>{FILTER_SCRIPT}</script></body></html>\n"
    )
