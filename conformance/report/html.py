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
