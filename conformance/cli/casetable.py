"""The case table: case and area counts as Markdown, for ``docs/cases.md`` and ``amqp-conformance
cases --markdown``.

It sits below both the command line and the docs pages (:mod:`conformance.cli.docpages` reads
``run``'s parser from :mod:`conformance.cli`), so neither imports the other to draw it.
"""

from __future__ import annotations

from collections.abc import Sequence

from conformance.model.cases import Case, Level
from conformance.model.coverage import rule_coverage
from conformance.model.extensions import EXTENSIONS, cited_by
from conformance.model.sources import cite

REGENERATE = "python -m conformance.cli.docpages docs"
LEVELS: tuple[Level, ...] = tuple(Level)


def md_row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _counts(cases: Sequence[Case]) -> list[int]:
    return [
        len(cases),
        *(sum(c.level is level for c in cases) for level in LEVELS),
        sum(c.client != "raw" for c in cases),
        sum(c.needs_restart for c in cases),
        sum(c.queue_types == ("classic",) for c in cases),
        sum(c.queue_types == ("quorum",) for c in cases),
    ]


def cases_markdown(cases: Sequence[Case]) -> str:
    """The page: one row per area, a total row, and the spec-rule coverage in one line."""
    areas = sorted({c.area for c in cases})
    quorum_only = sum(c.queue_types == ("quorum",) for c in cases)
    rows = list(rule_coverage(cases))
    checked = sum(1 for r in rows if r.cases)
    uncheckable = sum(1 for r in rows if not r.cases and r.reason)
    lines = [
        "# Cases",
        "",
        f"<!-- generated: {REGENERATE} -->",
        "",
        f"**{len(cases)} cases in {len(areas)} areas.** A run with the default `--queue-type classic` "
        f"selects {len(cases) - quorum_only} of them (the quorum-only cases run under "
        "`--queue-type quorum`, which also adds a `[quorum]` twin of every case that declares a queue).",
        "",
        f"Spec rules: {len(rows)} in the AMQP 0-9-1 XML; {checked} checked by cases, {uncheckable} "
        "not checkable from a client (each with its reason), "
        f"{len(rows) - checked - uncheckable} not covered.",
        "",
        "List them: `amqp-conformance cases` (`--area A`, `--json`), the rules: `amqp-conformance cases "
        "--rules`, the wire invariants checked under every case: `amqp-conformance cases --invariants`.",
        "",
        md_row(["area", "cases", *(level.value for level in LEVELS), "pika / aio-pika", "restart",
              "classic only", "quorum only"]),
        md_row(["---"] * (len(LEVELS) + 6)),
    ]
    for area in areas:
        lines.append(md_row([f"`{area}`", *_counts([c for c in cases if c.area == area])]))
    lines.append(md_row(["**total**", *(f"**{n}**" for n in _counts(cases))]))
    return "\n".join(lines) + "\n"


def extensions_markdown(cases: Sequence[Case]) -> str:
    """The extension table: each RabbitMQ extension (:data:`conformance.model.extensions.EXTENSIONS`),
    the cases citing its documents, and those sources; an extension no case cites shows "none"."""
    lines = [
        "## RabbitMQ extensions",
        "",
        "Each extension of RabbitMQ's Protocol Extensions page, and the 0-9-1 behaviours documented "
        "elsewhere, with the cases that cite its document (from the case declarations).",
        "",
        md_row(["extension", "cases", "source"]),
        md_row(["---"] * 3),
    ]
    for ext in EXTENSIONS:
        hits = [(c, cited_by(ext, c.sources)) for c in cases]
        hits = [(c, s) for c, s in hits if s]
        ids = ", ".join(f"`{c.id}`" for c, _ in hits) or "none"
        srcs = "; ".join(dict.fromkeys(cite(x) for _, s in hits for x in s)) or "none"
        lines.append(md_row([ext.name, ids, srcs]))
    return "\n".join(lines) + "\n"
