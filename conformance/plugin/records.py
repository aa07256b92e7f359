"""What a run leaves behind: one JSON line per case, and the area × verdict table."""

from __future__ import annotations

import importlib.metadata
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conformance import __version__
from conformance.model.cases import Case
from conformance.model.results import ResultRecord, ResultsWriter, merge_parts, part_path, utc_now_iso
from conformance.model.verdicts import Decision, Verdict
from conformance.plugin.context import CaseContext, delete_wait
from conformance.plugin.session import SessionState
from conformance.profiles.releases import beyond_verified
from conformance.protocol.raw import redact
from conformance.targets.probe import ServerInfo
from conformance.verify.queue_types import run_case_id

# pytest's status for each verdict: (category, short letter, word)
STATUS: dict[Verdict, tuple[str, str, str]] = {
    Verdict.PASS: ("passed", ".", "PASS"),
    Verdict.FAIL: ("failed", "F", "FAIL"),
    Verdict.NON_STRICT: ("non_strict", "n", "NON_STRICT"),
    Verdict.UNSUPPORTED: ("unsupported", "u", "UNSUPPORTED"),
    Verdict.INFORMATIONAL: ("informational", "i", "INFORMATIONAL"),
    Verdict.TIMEOUT: ("timeout", "T", "TIMEOUT"),
    Verdict.ERROR: ("error", "E", "ERROR"),
    Verdict.NOT_RUN: ("not_run", "x", "NOT_RUN"),
}


def client_version(client: str) -> str:
    if client in ("pika", "aio-pika"):
        # The installed distribution's version: asking the module would import aio-pika into the
        # xdist controller, which runs no case (0.3-0.6 s).
        try:
            return importlib.metadata.version(client)
        except importlib.metadata.PackageNotFoundError:
            return "?"
    import pamqp

    return f"pamqp {pamqp.__version__} / amqp-conformance {__version__}"


def write_record(state: SessionState, c: Case, ctx: CaseContext | None, d: Decision, duration: float,
                 nodeid: str, extra: dict[str, Any] | None = None, *, queue_type: str | None = None) -> None:
    """Append the case's result to this process's part file (merged when the session ends)."""
    if state.writer is None:
        state.writer = ResultsWriter(part_path(state.results_dir, state.run_id, state.worker))
    server = state.server or ServerInfo("?", "?", "?")
    client = ctx.client if ctx else c.client
    fields = dict(ctx.extra) if ctx else {}
    fields.update(extra or {})
    fields.setdefault("url", redact(state.url))
    state.writer.write(
        ResultRecord(
            run_id=state.run_id,
            time=utc_now_iso(),
            target=state.target_name or "?",
            broker_product=server.product,
            broker_version=server.version,
            broker_platform=server.platform,
            client=client,
            client_version=client_version(client),
            case_id=run_case_id(c.id, queue_type),
            area=c.area,
            rules=list(c.rules),
            level=c.level.value,
            profile=state.profile,
            verdict=d.verdict.value,
            expected=d.expected[:2000],
            observed=d.observed[:2000],
            duration_s=round(duration, 4),
            message=d.message[:2000],
            nodeid=nodeid,
            worker=state.worker,
            extra=fields,
            queue_type=queue_type,
            release=(state.release or (None, None))[0],
            release_basis=(state.release or (None, None))[1],
            release_verified=beyond_verified((state.release or (None, None))[0]),
        )
    )


# The verdicts' colours on a terminal (rich style names); plain text elsewhere.
VERDICT_STYLE: dict[Verdict, str] = {
    Verdict.PASS: "green", Verdict.FAIL: "bold red", Verdict.TIMEOUT: "bold red",
    Verdict.ERROR: "bold magenta", Verdict.NOT_RUN: "yellow", Verdict.NON_STRICT: "yellow",
    Verdict.UNSUPPORTED: "dim", Verdict.INFORMATIONAL: "cyan",
}


def area_table(rows: list[tuple[str, str, Verdict]], *, color: bool = False) -> list[str]:
    """The area × verdict counts, as lines of a rich table (ANSI colours when ``color``): only
    the verdicts that occur, a total per area and per verdict."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    counts: Counter[tuple[str, Verdict]] = Counter((area, v) for _case, area, v in rows)
    areas = sorted({area for _c, area, _v in rows})
    shown = [v for v in Verdict if any(counts[(a, v)] for a in areas)]
    def cell(n: int, v: Verdict) -> Text:
        return Text(str(n), style=VERDICT_STYLE[v] if n else "")

    table = Table(box=box.SIMPLE, show_footer=True, pad_edge=False, header_style="bold",
                  footer_style="bold")
    table.add_column("area", footer="total")
    for v in shown:
        table.add_column(v.value, justify="right", footer=cell(sum(counts[(a, v)] for a in areas), v))
    table.add_column("total", justify="right", footer=str(len(rows)))
    for a in areas:
        table.add_row(a, *(cell(counts[(a, v)], v) for v in shown), str(sum(counts[(a, v)] for v in Verdict)))
    out = io.StringIO()
    Console(file=out, width=250, force_terminal=color, color_system="standard" if color else None,
            highlight=False).print(table)
    return [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]


SLOWEST = 10
SHOWN_IDS = 4


def unsupported_groups(reasons: dict[str, list[str]]) -> list[str]:
    """UNSUPPORTED cases grouped by their reason, which names what would let them run (an option,
    a target kind, a capability the broker lacks): the largest group first, a few ids each."""
    if not reasons:
        return []
    total = sum(map(len, reasons.values()))
    lines = [f"{total} UNSUPPORTED, by what they need:"]
    for reason, ids in sorted(reasons.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        more = len(ids) - SHOWN_IDS
        shown = ", ".join(sorted(ids)[:SHOWN_IDS]) + (f" (+{more} more)" if more > 0 else "")
        lines.append(f"  {len(ids):4d}  {reason}")
        lines.append(f"        {shown}")
    return lines


def slowest_cases(node_case: dict[str, tuple[str, Verdict]], node_seconds: dict[str, float],
                  n: int = SLOWEST) -> list[str]:
    """The ``n`` slowest cases (setup + call + teardown of their test), slowest first, as text
    lines: seconds, verdict, case id. Ties go by case id, so the list is stable."""
    timed = sorted(
        ((node_seconds.get(node, 0.0), case_id, verdict) for node, (case_id, verdict) in node_case.items()),
        key=lambda t: (-t[0], t[1]),
    )[:n]
    if not timed:
        return []
    width = max(len(v.value) for _s, _c, v in timed)
    return [f"slowest {len(timed)} case(s) (setup + call + teardown):"] + [
        f"  {secs:7.2f}s  {verdict.value:<{width}}  {case_id}" for secs, case_id, verdict in timed]


def name_junit_suite(config: pytest.Config, state: SessionState) -> None:
    """JUnit's testsuite is named after the broker (product, version, profile) and carries the
    broker's properties, so files of several brokers merged in one dashboard stay apart."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None or state.server is None:
        return
    xml.suite_name = f"{state.server.product} {state.server.version} ({state.profile})"
    for key, value in allure_environment(state).items():
        xml.add_global_property(key, value)


def allure_environment(state: SessionState) -> dict[str, str]:
    """What allure's Environment panel shows for a run: the broker, the profile, the clients."""
    server = state.server or ServerInfo("?", "?", "?")
    return {
        "broker.product": server.product,
        "broker.version": server.version,
        "broker.platform": server.platform,
        "target": state.target_name or "?",
        "url": redact(state.url),
        "profile": state.profile,
        "run_id": state.run_id,
        "client.raw": client_version("raw"),
        "client.pika": client_version("pika"),
        "client.aio-pika": client_version("aio-pika"),
    } | cleanup_environment(state)


def cleanup_environment(state: SessionState) -> dict[str, str]:
    """The clean-up notes of the run (what the broker left unanswered), when there are any."""
    lines = state.cleanup_notes.lines(delete_wait(state.case_timeout))
    return {f"cleanup.{i + 1}": line for i, line in enumerate(lines)}


def write_allure_environment(alluredir: Path, state: SessionState) -> None:
    """``environment.properties`` in the allure results folder (``key=value`` lines)."""
    alluredir.mkdir(parents=True, exist_ok=True)
    lines = [f"{k}={v.replace(chr(10), ' ')}" for k, v in allure_environment(state).items()]
    (alluredir / "environment.properties").write_text("\n".join(lines) + "\n", encoding="utf-8")


def close_results(state: SessionState) -> None:
    """The session's results are final: the writer closed, the workers' part files merged."""
    if state.writer is not None:
        state.writer.close()
        state.writer = None
    if state.results_dir.exists() and any(state.results_dir.glob(f"{state.run_id}.*.part.jsonl")):
        merge_parts(state.results_dir, state.run_id)
