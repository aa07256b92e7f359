"""The report's "Cluster" section: the ``faults`` counts per broker × queue type × nemesis, a
throughput timeline per run with its faults shaded (inline SVG), and the ``cluster`` area's verdicts
(the tables come from :mod:`conformance.report.cluster`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from conformance.report.html import e

#: fault action -> the action that ends it
RECOVERY = {"kill": "start", "pause": "resume", "partition": "heal"}
FAULT_COLORS = {"kill": "#c62828", "pause": "#ef8f00", "partition": "#6a1b9a"}
PUBLISHED, CONSUMED, LOST = "#1d5fa8", "#2e7d32", "#c62828"


def fault_intervals(events: Sequence[Mapping[str, Any]], end: float) -> list[tuple[str, str, float, float]]:
    """(kind, node, start, stop) of each fault the nemesis carried out; one never ended runs to ``end``."""
    open_: dict[tuple[str, str], float] = {}
    out: list[tuple[str, str, float, float]] = []
    for ev in sorted(events, key=lambda x: float(x["t"])):
        if not ev.get("ok"):
            continue
        action, node, t = ev["action"], f"n{ev['node']}" if ev.get("node") is not None else "", float(ev["t"])
        if action in RECOVERY:
            open_[(action, node)] = t
            continue
        for key in list(open_):
            kind, n = key
            if RECOVERY[kind] == action and (action == "heal" or n == node):
                out.append((kind, n, open_.pop(key), t))
    out.extend((k, n, t, end) for (k, n), t in open_.items())
    return sorted(out, key=lambda x: x[2])


def svg_timeline(
    title: str, buckets: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]
) -> str:
    """Published and consumed messages/s per bucket (lines), lost ones (red bars), faults shaded."""
    w, h, left, top, bottom, right = 640, 170, 44, 22, 26, 10
    rows = sorted(buckets, key=lambda b: float(b["t"]))
    end = max([float(b["t"]) + float(b["width_s"] or 1) for b in rows]
              + [float(ev["t"]) for ev in events] + [1.0])

    def rate(b: Mapping[str, Any], key: str) -> float:
        return float(b.get(key) or 0) / max(1e-9, float(b["width_s"] or 1))

    peak = max([rate(b, k) for b in rows for k in ("published", "consumed")] + [1.0])

    def x(t: float) -> float:
        return left + t / end * (w - left - right)

    def y(v: float) -> float:
        return top + (1 - v / peak) * (h - top - bottom)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
        f'aria-label="throughput and faults of {e(title)}"><text x="4" y="14" font-size="13" '
        f'font-weight="600">{e(title)}</text>'
    ]
    for kind, node, start, stop in fault_intervals(events, end):
        parts.append(
            f'<rect x="{x(start):.1f}" y="{top}" width="{max(1.0, x(stop) - x(start)):.1f}" '
            f'height="{h - top - bottom}" fill="{FAULT_COLORS[kind]}" opacity="0.15"><title>{e(kind)} '
            f"{e(node)} {start:.0f}–{stop:.0f} s</title></rect>"
        )
    for frac in (0.0, 0.5, 1.0):
        parts.append(
            f'<line x1="{left}" x2="{w - right}" y1="{y(frac * peak):.1f}" y2="{y(frac * peak):.1f}" '
            f'stroke="#e3e6ea"/><text x="2" y="{y(frac * peak) + 4:.1f}" font-size="10">'
            f"{frac * peak:.0f}/s</text>"
        )
    for key, color in (("published", PUBLISHED), ("consumed", CONSUMED)):
        pts = " ".join(
            f"{x(float(b['t']) + float(b['width_s'] or 1) / 2):.1f},{y(rate(b, key)):.1f}" for b in rows
        )
        if pts:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{pts}"/>')
    for b in rows:
        if int(b.get("lost") or 0):
            bx = x(float(b["t"]))
            bw = max(2.0, x(float(b["t"]) + float(b["width_s"] or 1)) - bx - 1)
            bh = max(2.0, (h - top - bottom) * rate(b, "lost") / peak)
            parts.append(
                f'<rect x="{bx:.1f}" y="{h - bottom - bh:.1f}" width="{bw:.1f}" height="{bh:.1f}" '
                f'fill="{LOST}"><title>{int(b["lost"])} lost (sent {float(b["t"]):.0f}–'
                f"{float(b['t']) + float(b['width_s'] or 1):.0f} s)</title></rect>"
            )
    for t in range(0, int(end) + 1, max(10, int(end / 6 / 10 + 1) * 10)):
        parts.append(f'<text x="{x(t):.1f}" y="{h - 8}" font-size="10" text-anchor="middle">{t}s</text>')
    parts.append("</svg>")
    return "".join(parts)


def cluster_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    buckets: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    events: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for b in view.get("cluster_timeline", []):
        buckets[(b["run_id"], b["queue_type"])].append(b)
    for ev in view.get("cluster_events", []):
        events[(ev["run_id"], ev["queue_type"])].append(ev)
    charts = []
    for r in view.get("cluster_runs", []):
        key = (r["run_id"], r["queue_type"])
        title = (f"{r['broker']} · {r['queue_type']} · {r['nemesis']} · run {r['run_id']}: "
                 f"{r['lost']} lost, {r['events']} nemesis events")
        charts.append(Markup(svg_timeline(title, buckets.get(key, []), events.get(key, []))))
    rows = []
    for s in view.get("cluster_faults", []):
        published = int(s["published"] or 0)
        frac = {k: (int(s[k] or 0) / published if published else None)
                for k in ("ok", "lost", "duplicated", "recovered", "unexpected")}
        rows.append({**s, "frac": frac})
    return {"fault_rows": rows, "charts": charts, "cases": view.get("cluster_cases", []),
            "legend": Markup(_legend())}


def _legend() -> str:
    items = [("published/s", PUBLISHED, "line"), ("consumed/s", CONSUMED, "line"), ("lost", LOST, "box")]
    items += [(k, c, "shade") for k, c in FAULT_COLORS.items()]
    out = []
    for label, color, shape in items:
        style = f"background:{color};" + ("height:3px;" if shape == "line" else "")
        style += "opacity:0.3;" if shape == "shade" else ""
        out.append(f'<span class="legend-item"><span style="display:inline-block;width:14px;height:10px;'
                   f'{style}"></span> {e(label)}</span>')
    return " ".join(out)
