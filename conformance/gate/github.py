"""The gate's outputs for GitHub Actions: workflow-command annotations and the job summary.

Only what fails the gate is annotated (one ``::error`` per refusal and failing finding, pointing
at its record); what the gate let through is counted in one ``::notice`` line, so a run with
hundreds of known failures or allowed missing cases does not bury the one regression.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from conformance.gate.compare import KIND_ORDER, TABLE_LIMIT, GateResult, _note, summary_line


def _escape_data(text: str) -> str:
    # GitHub workflow commands: the message is data (%, CR, LF escaped); properties also escape : and ,.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(res: GateResult) -> list[str]:
    """``::error`` workflow commands for what fails the gate, one ``::notice`` line for the rest.

    A reviewer reads annotations one by one: only refusals and failing findings (regressions,
    untriaged new failures, missing cases not allowed, NON_STRICT under ``--strict``) point at a
    record; what the gate let through (known, fixed, allowed missing, NON_STRICT without
    ``--strict``) is counted in one line, and listed in the step summary and ``--json``.
    """
    out = [f"::error title={_escape_property('gate: ' + r)}::{_escape_data(r)}" for r in res.refusals]
    for f in res.findings:
        if not f.failing:
            continue
        title = f"{f.kind} {f.case_id}"
        change = f"{f.baseline_verdict or '(new)'} → {f.candidate_verdict or '(absent)'}"
        body = f"{f.case_id}: {change}" + (f" ({f.level})" if f.level else "")
        pinned = (("form was", f.was), ("form now", f.form)) if f.kind == "changed" else ()
        rows = (*pinned, ("expected", f.expected), ("observed", f.observed), ("message", f.message))
        for label, value in rows:
            if value:
                body += f"\n{label}: {value}"
        loc = (
            f"file={_escape_property(_relative(f.file))}" + (f",line={f.line}" if f.line else "")
            if f.file
            else ""
        )
        props = ",".join(p for p in (loc, f"title={_escape_property(title)}") if p)
        out.append(f"::error {props}::{_escape_data(body)}")
    # From the counts, not the findings: known failures unchanged since the baseline are only counted.
    allowed = dict(res.counts)
    for f in res.findings:
        if f.failing:
            allowed[f.kind] -= 1
    parts = ", ".join(f"{n} {kind}" for kind in KIND_ORDER if (n := allowed.get(kind)))
    if parts:
        title = _escape_property("gate: allowed gaps")
        out.append(f"::notice title={title}::{_escape_data('not failing the gate: ' + parts)}")
    return out


def step_summary(res: GateResult, strict: bool) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY``: the verdict line and the findings that matter."""
    lines = [
        f"### AMQP conformance gate: {'FAIL' if res.failed else 'PASS'}",
        "",
        summary_line(res, strict),
        "",
    ]
    lines += [f"- {r}" for r in res.refusals]
    shown = [f for f in res.findings if f.kind != "known" or f.change][:TABLE_LIMIT]
    if shown:
        lines += ["", "| kind | case | baseline | candidate | note |", "|---|---|---|---|---|"]
        for f in shown:
            note = _note(f).replace("|", "\\|")
            lines.append(f"| {f.kind} | `{f.case_id}` | {f.baseline_verdict or '(new)'} | "
                         f"{f.candidate_verdict or '(absent)'} | {note} |")
        hidden = sum(1 for f in res.findings if f.kind != "known" or f.change) - len(shown)
        if hidden > 0:
            lines.append(f"\n… and {hidden} more (all of them in the gate's --json)")
    return "\n".join(lines) + "\n"


def _relative(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path


def github_outputs(json_dest: str | None, strict: bool, res: GateResult, out: TextIO) -> None:
    """Under GitHub Actions: annotations for the findings and the job's step summary."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    # Workflow commands are read from stdout; with --json on stdout they go to stderr to keep it JSON.
    dest = sys.stderr if json_dest == "-" else out
    for line in github_annotations(res):
        print(line, file=dest)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        try:
            with open(summary_file, "a", encoding="utf-8") as fh:
                fh.write(step_summary(res, strict))
        except OSError as exc:  # the job summary is a courtesy: the verdict stands without it
            print(
                f"gate: cannot write GITHUB_STEP_SUMMARY {summary_file}: {exc.strerror or exc}",
                file=sys.stderr,
            )
