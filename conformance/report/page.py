"""The self-contained ``index.html``: inline CSS, inline SVG charts, one small inline script (the
matrix filters), nothing loaded from the network (links to public sources only).

Rendered with Jinja2 (``report/templates``, autoescaped) over the bounded view the pipeline
collects, plus the suite's own catalogue (case descriptions, spec rule text, the sources registry)
for the drill-down. One template per section, ``sections/<id>.html.j2``, in the order of
:data:`conformance.report.tables.TABLES`; each section is declared once in :data:`SECTIONS` (its
title, the context function that shapes its data where the template needs more than the view,
whether it needs several runs, whether the nav links it).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from conformance.model import sources
from conformance.report import page_cluster, page_power, routing_table, tables, tx_table
from conformance.report.html import COLORS, SHORT, css, e, hbar_chart, pct, score_bar
from conformance.report.schema import LEVELS, VERDICTS

MAX_TRACE_LINES = 200
MAX_TITLE_BROKERS = 4

# ------------------------------------------------------------------------------------ catalogue


@lru_cache(maxsize=1)
def case_catalogue() -> dict[str, dict[str, Any]]:
    """This version's cases by id (description, expectation, rules, sources) for the drill-down."""
    from conformance.scenarios import all_cases

    return {c.id: c.as_dict() for c in all_cases()}


@lru_cache(maxsize=1)
def spec_rules() -> dict[str, list[Any]]:
    from conformance.model.spec import load_rules

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
    """The case's own expectation first, its description, spec rule text and sources (as links)."""
    case = case_catalogue().get(case_id)
    rules = spec_rules()
    return render("drilldown.html.j2", case=case,
                  rules=[(rid, (rules.get(rid) or [None])[0]) for rid in (case or {}).get("rules", [])],
                  cites=[Markup(sources.resolve(src).html()) for src in (case or {}).get("sources", [])])


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


# ------------------------------------------------------------------------------------ sections


def svg_area_chart(broker: str, scores: Sequence[Mapping[str, Any]]) -> str:
    """Horizontal stacked bars: one per area, segments = latest verdict counts."""
    rows = []
    for s in scores:
        total = max(1, int(s["n_cases"]))
        counts = [(v, int(s[f"n_{v.lower()}"])) for v in VERDICTS]
        segments = [(n / total, COLORS[v], f"{s['area']}: {n} {v}") for v, n in counts if n]
        rows.append((s["area"], segments, str(int(s["n_cases"]))))
    return hbar_chart(broker, f"verdicts per area for {broker}", rows, label_w=96, bar_w=260, right_w=50)


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


# ------------------------------------------------------------------------------------ sections

Context = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Section:
    """A section of the page, declared once (:data:`SECTIONS`). Which sections exist and their order
    come from the tables that name them (:func:`conformance.report.tables.sections`)."""

    key: str  # its id on the page (the nav's anchor) and its template, sections/<key>.html.j2
    title: str  # its name in the nav
    context: Context | None = None  # adds what the template needs beyond the view (summary, view)
    needs_runs: bool = False  # compares runs: a report of one run leaves it out
    in_nav: bool = True  # the nav links it (when it renders anything)


def summary_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    return {"best": {p["broker"]: p for p in view["profile"] if p["best"]},
            "release_notes": release_notes(summary, view)}


#: the most input rows the summary reads again in Python for the likeness lines (a run's report
#: holds hundreds; the scale benchmark's million synthetic rows hold no release-keyed value)
LIKENESS_MAX_ROWS = 200_000


def release_notes(summary: Mapping[str, Any], view: Mapping[str, Any]) -> list[str]:
    """Said once each: a RabbitMQ broker newer than every release the expectations were checked on,
    and, for a broker reporting no RabbitMQ version, which release it behaves like
    (:mod:`conformance.model.likeness`, from the input files' release-keyed values)."""
    from pathlib import Path

    from conformance.model.likeness import RELEASE_KEYED, likeness
    from conformance.profiles.releases import RABBITMQ_PRODUCT, beyond_verified, beyond_verified_note

    notes = []
    for b in view["brokers"]:
        product, _, version = str(b["broker"]).rpartition("@")
        if product == RABBITMQ_PRODUCT and beyond_verified(version):
            notes.append(beyond_verified_note(version))
    inputs = summary.get("inputs") or {}
    if (inputs.get("n_rows") or 0) > LIKENESS_MAX_ROWS:
        return notes
    records = []
    for f in inputs.get("files") or []:
        path = Path(str(f["file"]).removeprefix("file://").removeprefix("file:"))
        if not path.is_file():
            continue
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if RELEASE_KEYED in line:
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        continue  # a malformed line: the report's malformed section names it
    shown = {str(b["broker"]) for b in view["brokers"]}
    return notes + [found.line() for found in likeness(records) if found.broker in shown]


def plot_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    by_broker: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for s in view["scores_area"]:
        by_broker[s["broker"]].append(s)
    cells = {(s["broker"], s["level"]): s for s in view["scores_level"]}
    return {
        "charts": [Markup(svg_area_chart(b, by_broker[b])) for b in view["chart_brokers"] if b in by_broker],
        "level_cells": cells,
        "levels": [lv for lv in LEVELS if any(k[1] == lv for k in cells)],
    }


def trend_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    by_product: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in view.get("scores_run", []):
        if r["score"] is not None:
            by_product[r["broker_product"]].append(r)
    return {"charts": [Markup(svg_trend(p, sorted(rs, key=lambda r: (str(r["ts"]), r["run_id"]))))
                       for p, rs in sorted(by_product.items())]}


def matrix_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    """Rows in the view's order (worst first, as the caption says: ACTION_ORDER)."""
    brokers: list[str] = list(view["matrix_brokers"])
    cells: dict[tuple[str, str], Mapping[str, Any]] = {}
    meta: dict[str, tuple[str, str]] = {}
    for m in view["matrix"]:
        cells[(m["case_id"], m["broker"])] = {**m, "trace_html": Markup(render_trace(m.get("trace")))}
        meta.setdefault(m["case_id"], (m["area"], m["level"]))
    catalogue = case_catalogue()
    rows = []
    for c, (area, level) in meta.items():
        info = catalogue.get(c, {})
        rows.append({
            "case_id": c, "area": area, "level": level, "expectation": info.get("expectation", ""),
            "text": " ".join([c, info.get("description", ""), info.get("expectation", "")]).lower(),
            "drill": Markup(case_drilldown(c)),
            "cells": [cells.get((c, b)) for b in brokers],
        })
    areas = sorted({a for a, _ in meta.values()})
    levels = [lv for lv in LEVELS if any(lv == x for _, x in meta.values())]
    filters = [
        ("verdict", "Verdict", [(v, v) for v in VERDICTS]),
        ("area", "Area", [(a, a) for a in areas]),
        ("level", "Level", [(lv, lv) for lv in levels]),
        ("broker", "Broker", [(str(i), b) for i, b in enumerate(brokers)]),
    ]
    return {"brokers": brokers, "rows": rows, "filters": filters}


def tx_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    by_broker: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in view["tx"]:
        cells = []
        for c in tx_table.COLUMNS:
            f = tx_table.COLUMN_FIELD[c]
            ok = r[f"{f}_match"]
            cells.append((r[f], "unknown" if ok is None else ("match" if ok else "mismatch")))
        by_broker[r["broker"]].append({
            "row_order": r["row_order"], "label": tx_table.ROW_LABELS.get(r["tx_row"], r["tx_row"]),
            "observed": r["observed"] if r["observed"] is not None else "not observed",
            "n_cases": r["n_cases"], "cells": cells,
        })
    return {
        "by_broker": [(b, sorted(rows, key=lambda r: r["row_order"])) for b, rows in by_broker.items()],
        "column_heads": [tx_table.COLUMN_LABELS[c] for c in tx_table.COLUMNS],
    }


def profile_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    by_broker: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for p in view["profile"]:
        by_broker[p["broker"]].append(p)
    rows = []
    for b, ps in by_broker.items():
        best = sorted(ps, key=lambda p: p["rank"])[0]
        rows.append((b, best, sorted(ps, key=lambda p: p["column_order"])))
    return {"rows": rows}


def rules_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    # Rules some case of the suite cites but no case in these inputs ran: a subset run, not a gap.
    cited_by_suite = {rid for c in case_catalogue().values() for rid in c.get("rules", [])}
    rows = []
    for r in view["rules"]:
        status = "run" if r["n_brokers"] else ("not-run" if r["rule_id"] in cited_by_suite else "uncovered")
        rows.append((r, status))
    n_not_run = sum(1 for _, s in rows if s == "not-run")
    return {"cov": summary["rule_coverage"], "rows": rows, "n_not_run": n_not_run}


def power_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    return page_power.power_context(view)


SECTIONS: tuple[Section, ...] = (
    Section("summary", "Summary", summary_context),
    Section("plot", "Plot", plot_context),
    Section("trend", "Trend", trend_context, needs_runs=True),
    Section("matrix", "Matrix", matrix_context),
    Section("queue-types", "Queue types"),
    Section("cluster", "Cluster", page_cluster.cluster_context),
    Section("tx", "tx table", tx_context),
    Section("routing", "Routing table", routing_table.routing_context),
    Section("profile", "Profiles", profile_context),
    Section("rules", "Rule coverage", rules_context),
    Section("flaky", "Flaky", needs_runs=True),
    Section("regressions", "Regressions", needs_runs=True),
    Section("upgrade", "Upgrade", needs_runs=True),
    Section("power", "Suite power", power_context),
    Section("malformed", "Malformed lines", in_nav=False),
)
BY_KEY: dict[str, Section] = {s.key: s for s in SECTIONS}


def render_section(key: str, summary: Mapping[str, Any], view: Mapping[str, Any]) -> str:
    """``sections/<key>.html.j2`` over the view (and what its context function adds)."""
    context = BY_KEY[key].context
    extra = context(summary, view) if context is not None else {}
    return render(f"sections/{key}.html.j2", summary=summary, view=view, **extra)


def section_rules(summary: Mapping[str, Any], view: Mapping[str, Any]) -> str:
    return render_section("rules", summary, view)


def section_power(view: Mapping[str, Any]) -> str:
    return render_section("power", {}, view)


def single_run(view: Mapping[str, Any]) -> bool:
    return sum(int(b.get("n_runs") or 0) for b in view.get("brokers", [])) <= 1


def prepare() -> None:
    """Load what every page needs (the case catalogue, the spec's rules, the compiled templates),
    e.g. while the report's JVM is still starting; render_report then only renders."""
    case_catalogue()
    spec_rules()
    env = environment()
    for name in env.list_templates(filter_func=lambda n: n.endswith(".j2")):
        env.get_template(name)


def render_report(summary: Mapping[str, Any], view: Mapping[str, Any]) -> str:
    one = single_run(view)
    keys = tables.sections()
    if "routing" not in keys:  # read from the matrix: no table of its own, placed after the tx table
        keys.insert(keys.index("tx") + 1 if "tx" in keys else len(keys), "routing")
    shown = [s for s in map(BY_KEY.__getitem__, keys) if not (one and s.needs_runs)]
    bodies = [Markup(render_section(s.key, summary, view)) for s in shown]
    nav = [(s.key, s.title) for s, body in zip(shown, bodies, strict=True) if body.strip() and s.in_nav]
    return render("report.html.j2", summary=summary, brokers=broker_title(view) or "no broker", nav=nav,
                  sections=bodies, single_run=one, css=Markup(css()), script=Markup(FILTER_SCRIPT)) + "\n"


# --------------------------------------------------------------------------------------- jinja2


@lru_cache(maxsize=1)
def environment() -> Environment:
    """Templates shipped in the package (``report/templates``); every value escaped unless the
    Python side marked it safe (the SVG charts, the drill-down, source links)."""
    env = Environment(
        loader=PackageLoader("conformance.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["pct"] = pct
    env.filters["score_bar"] = lambda score: Markup(score_bar(score))
    env.globals.update(VERDICTS=VERDICTS, SHORT=SHORT, COLORS=COLORS, LEVELS=LEVELS,
                       column_labels=tx_table.COLUMN_LABELS)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
