"""HTML building blocks of the report page: escaping, verdict chips, score bars, tables (shared by
:mod:`conformance.report.page` and :mod:`conformance.report.page_power`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from importlib import resources
from typing import Any

COLORS: dict[str, str] = {
    "PASS": "#2e7d32",
    "FAIL": "#c62828",
    "NON_STRICT": "#ef8f00",
    "UNSUPPORTED": "#90a4ae",
    "INFORMATIONAL": "#1565c0",
    "TIMEOUT": "#6a1b9a",
    "ERROR": "#4e342e",
    "NOT_RUN": "#bdbdbd",
}
SHORT: dict[str, str] = {
    "PASS": "P",
    "FAIL": "F",
    "NON_STRICT": "NS",
    "UNSUPPORTED": "U",
    "INFORMATIONAL": "I",
    "TIMEOUT": "T",
    "ERROR": "E",
    "NOT_RUN": "NR",
}


def e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def css() -> str:
    return resources.files("conformance.report").joinpath("report.css").read_text(encoding="utf-8")


def verdict_chip(v: str | None) -> str:
    if not v:
        return ""
    return f'<span class="v v-{e(v)}" title="{e(v)}">{e(v)}</span>'


def pct(score: float | None) -> str:
    return "–" if score is None else f"{score * 100:.1f}%"


def score_bar(score: float | None) -> str:
    if score is None:
        return "–"
    w = round(80 * score)
    return f'<span class="bar-bg"><span class="bar" style="width:{w}px"></span></span>{pct(score)}'


def table(headers: Sequence[str], body: Iterable[str], num: Sequence[int] = ()) -> str:
    head = "".join(f'<th{" class=num" if i in num else ""}>{h}</th>' for i, h in enumerate(headers))
    rows = "".join(body)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'


def td(value: Any, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f"<td{c}>{value}</td>"


# One bar segment: (fraction of the bar, fill colour, tooltip text, escaped by the chart).
Segment = tuple[float, str, str]


def hbar_chart(
    title: str,
    aria: str,
    rows: Sequence[tuple[str, Sequence[Segment], str]],
    *,
    label_w: int,
    bar_w: int,
    right_w: int,
    track: str | None = None,
) -> str:
    """Horizontal bars, one per row: a label, the segments left to right, a figure on the right.

    ``track`` (a colour) draws the whole bar's length behind the segments, for bars that are a
    share of a whole (mutation score); without it the bar is only its segments (verdict counts).
    """
    row_h, top = 18, 22
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + right_w}" '
        f'height="{top + row_h * len(rows) + 8}" role="img" aria-label="{e(aria)}">',
        f'<text x="4" y="15" font-size="13" font-weight="600">{e(title)}</text>',
    ]
    for i, (label, segments, right) in enumerate(rows):
        y = top + i * row_h
        parts.append(f'<text x="4" y="{y + 12}" font-size="11">{e(label)}</text>')
        if track:
            parts.append(
                f'<rect x="{label_w}" y="{y + 2}" width="{bar_w}" height="{row_h - 5}" fill="{track}"/>'
            )
        x = float(label_w)
        for fraction, color, tip in segments:
            w = bar_w * fraction
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row_h - 5}" fill="{color}">'
                f"<title>{e(tip)}</title></rect>"
            )
            x += w
        parts.append(f'<text x="{label_w + bar_w + 4}" y="{y + 12}" font-size="11">{e(right)}</text>')
    parts.append("</svg>")
    return "".join(parts)
