"""``gate --update-triage``: pin the form of every failure a triage entry explains, from a reviewed run.

The triage file is rewritten as text, not re-serialised: each entry's cases, reason (the notes and
evidence), verdicts, comments and layout stay as they are; only its ``[triage.forms]`` table is
replaced. For each case the candidate fails (in any of its runs: a folder of repeated runs pins
every form seen), the entry that explains the verdict gets the case's forms; a case the candidate
passes or lacks keeps the forms it had (an intermittent failure stays pinned). A failure no entry
explains is not pinned: it needs an entry with its reason first. Entries scoped to wire invariants
pin nothing (the invariants are their form). The result is parsed again before it replaces the file.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from conformance.gate.signature import ANY, form_text, parse_form
from conformance.gate.triage import InvariantFacts, Triage, TriageProblem, parse_triage

_HEADER = re.compile(r"^\s*\[\[\s*triage\s*\]\]\s*(#.*)?$")
_FORMS = re.compile(r"^\s*\[\s*triage\s*\.\s*forms\s*\]\s*(#.*)?$")


class FormRow(Protocol):
    """What pinning reads of a record (:class:`conformance.gate.compare.Row` has it)."""

    @property
    def case_id(self) -> str: ...
    @property
    def verdict(self) -> str: ...
    @property
    def signature(self) -> str: ...
    @property
    def facts(self) -> InvariantFacts | None: ...


@dataclass
class PinResult:
    text: str
    pinned: int = 0  # cases whose forms were written from the candidate
    entries: int = 0  # entries that pin at least one case afterwards
    kept: int = 0  # cases whose earlier forms were kept (the candidate passes or lacks them)
    untriaged: list[str] = field(default_factory=list)  # failures no entry explains


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string


def _forms_block(forms: dict[str, tuple[str, ...]]) -> list[str]:
    lines = ["[triage.forms]"]
    for case_id in sorted(forms):
        values = forms[case_id]
        if len(values) == 1:
            lines.append(f"{_toml_string(case_id)} = {_toml_string(values[0])}")
        else:
            lines.append(f"{_toml_string(case_id)} = [")
            lines += [f"  {_toml_string(v)}," for v in values]
            lines.append("]")
    return lines


def _seen_forms(triage: Triage, rows: Iterable[FormRow]) -> tuple[dict[int, dict[str, list[str]]], list[str]]:
    """Entry index → case id → the forms the candidate shows; and the failures no entry explains."""
    seen: dict[int, dict[str, list[str]]] = {}
    untriaged: list[str] = []
    for row in rows:
        if row.verdict == "PASS":
            continue
        entry = triage.known(row.case_id, row.verdict, row.facts)
        if entry is None:
            if row.case_id not in untriaged:
                untriaged.append(row.case_id)
        elif not entry.invariants:
            forms = seen.setdefault(entry.index, {}).setdefault(row.case_id, [])
            form = form_text(row.verdict, row.signature)
            if form not in forms:
                forms.append(form)
    return seen, untriaged


def _split_chunk(chunk: list[str]) -> tuple[list[str], list[str]]:
    """An entry's lines without its forms table, and the blank lines and comments after it (they
    introduce the next entry)."""
    tail = len(chunk)
    while tail > 1 and (not chunk[tail - 1].strip() or chunk[tail - 1].lstrip().startswith("#")):
        tail -= 1
    body, trailing = chunk[:tail], chunk[tail:]
    at = next((i for i, line in enumerate(body) if _FORMS.match(line)), None)
    if at is not None:
        body = body[:at]
        while body and not body[-1].strip():
            body.pop()
    return body, trailing


def pin_forms(text: str, triage: Triage, rows: Iterable[FormRow]) -> PinResult:
    """The triage file's text with the forms of ``rows`` (the candidate's records) pinned. Raises
    :class:`TriageProblem` when the file's layout cannot be rewritten safely."""
    seen, untriaged = _seen_forms(triage, rows)
    lines = text.splitlines()
    headers = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    if len(headers) != len(triage.entries):
        raise TriageProblem(f"{triage.path}: {len(headers)} [[triage]] header lines for "
                            f"{len(triage.entries)} entries; write each entry's [[triage]] on a line of its "
                            "own to update it")
    out: list[str] = lines[: headers[0]] if headers else lines[:]
    res = PinResult("", untriaged=untriaged)
    for n, entry in enumerate(triage.entries):
        end = headers[n + 1] if n + 1 < len(headers) else len(lines)
        body, trailing = _split_chunk(lines[headers[n]:end])
        forms = {c: tuple(form_text(v, s) for v, s in f) for c, f in entry.forms.items()}
        fresh = seen.get(entry.index, {})
        res.kept += sum(1 for c in forms if c not in fresh)
        res.pinned += len(fresh)
        for c, shown in fresh.items():
            # A verdict pinned by hand to any signature ("FAIL *": a broker whose failure varies from
            # run to run) stays so: the candidate's forms of that verdict are not pinned over it.
            wild = sorted({v for v, s in entry.forms.get(c, ()) if s == ANY})
            forms[c] = (*(form_text(v, ANY) for v in wild),
                        *(f for f in shown if parse_form(f)[0] not in wild))
        if forms:
            res.entries += 1
            body = [*body, *_forms_block(forms)]
        out += body + trailing
    res.text = "\n".join(out) + "\n"
    check = parse_triage(res.text, triage.path)  # what is written must load, with the same entries
    for old, new in zip(triage.entries, check.entries, strict=True):
        if (old.cases, old.reason, old.verdicts, old.invariants) != (new.cases, new.reason, new.verdicts,
                                                                     new.invariants):
            raise TriageProblem(f"{triage.path}: [[triage]] #{old.index} would change beyond its forms; "
                                "not written")
    return res


def write_text_atomically(target: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
    mask = os.umask(0o022)
    os.umask(mask)
    os.fchmod(fd, 0o666 & ~mask)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, target)
