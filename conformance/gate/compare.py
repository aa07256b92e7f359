"""The release gate, in plain Python: a candidate run's verdicts against a baseline's.

``amqp-conformance gate --baseline A --candidate B`` exits 1 when the candidate

- lacks cases the baseline has (unless ``--allow-missing``): a gate that compares 26 cases with
  256 has checked 26, and must not say the other 230 are fine;
- is another broker product or was run under another profile than the baseline (unless
  ``--allow-product-change`` / ``--allow-profile-change``): verdicts of different brokers or
  profiles do not compare;
- regresses (the report's rule, :func:`transition`): PASS → FAIL/TIMEOUT/ERROR/NOT_RUN, FAIL →
  TIMEOUT (a wrong answer became no answer), anything → ERROR (the harness broke where it did
  not);
- fails a case the baseline does not have (an untriaged new failure);
- fails a known case in another form (*changed*): a triage entry pinned the case's failure
  (verdict and signature, :mod:`conformance.gate.signature`) and the candidate fails otherwise; or
  an untriaged case fails in both and the verdict or signature moved (TIMEOUT → FAIL, another reply
  code, …), or a PASS became UNSUPPORTED / INFORMATIONAL (the case stopped checking);
- with ``--strict``, is NON_STRICT where the baseline was not.

A verdict the triage file explains (:mod:`conformance.gate.triage`) in a pinned form, or for a case
the entry does not pin (*unpinned*), is a *known* failure: reported, never failing. A case that
passes where the baseline did not is *fixed* (the triage entry, if any, can go). What is left is
*unchanged* (same verdict, same form) or *new* (not in the baseline, and neither failing nor
NON_STRICT). Every case of either side falls in exactly one category (:data:`CATEGORIES`), so the
summary's numbers add up to the cases compared. Exit 0 when nothing fails, 2 on bad input (one line).

Only the standard library: no JVM, and a comparison of tens of thousands of records takes a
fraction of a second (``json.loads`` per line dominates). The command line is
:mod:`conformance.gate.cli`; this module compares and imports neither it nor the GitHub outputs.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

from conformance.gate.signature import form_matches, form_text, signature
from conformance.gate.triage import (
    EMPTY,
    InvariantFacts,
    Triage,
    TriageEntry,
)
from conformance.model.record_schema import schema_problem
from conformance.model.results import (
    MUTATE_SUMMARY_SUFFIX,
    REQUIRED_FIELDS,
    is_mutation_record,
    is_workload_record,
)
from conformance.model.verdicts import Verdict

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
DEFAULT_RESULTS = "reports/results/"
RESULT_SUFFIXES: tuple[str, ...] = (".jsonl", ".jsonl.gz", ".json")
SELECTOR_KINDS: tuple[str, ...] = ("run", "version", "broker")
VERDICTS: frozenset[str] = frozenset(v.value for v in Verdict)
BAD_AFTER_PASS: frozenset[str] = frozenset({"FAIL", "TIMEOUT", "ERROR", "NOT_RUN"})
# Kinds that fail the gate; "new-non-strict" only with --strict, "missing" unless --allow-missing.
FAILING_KINDS: tuple[str, ...] = ("regression", "changed", "new-failure", "missing", "new-non-strict")
KIND_ORDER: tuple[str, ...] = ("regression", "changed", "new-failure", "missing", "new-non-strict", "known",
                               "fixed")
# Every compared case is in exactly one category: the kinds above, and two that are only counted.
CATEGORIES: tuple[str, ...] = (*KIND_ORDER, "unchanged", "new")
TABLE_LIMIT = 40  # rows of one kind printed in the table; --json has them all


class GateInputError(ValueError):
    """Inputs the gate cannot use; the message is one line."""


# ------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Selector:
    text: str
    kind: str  # path | run | version | broker
    value: str = ""
    product: str = ""


def parse_selector(text: str) -> Selector:
    """``run:<id>``, ``version:<v>``, ``broker:<product>@<version>``, or a file/folder/glob."""
    kind, sep, value = text.partition(":")
    if sep and kind in SELECTOR_KINDS:
        if not value:
            raise GateInputError(f"selector {text!r} names no {kind}")
        if kind == "broker":
            product, at, version = value.partition("@")
            if not at or not product or not version:
                raise GateInputError(f"selector {text!r} is not broker:<product>@<version>")
            return Selector(text, kind, version, product)
        return Selector(text, kind, value)
    return Selector(text, "path", text)


def resolve_inputs(inputs: Iterable[str]) -> list[Path]:
    """Each input is a file, a folder (its results files, recursively) or a glob."""
    out: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(RESULT_SUFFIXES)
                           and not p.name.endswith((".part.jsonl", MUTATE_SUMMARY_SUFFIX)))
            if not files:
                raise GateInputError(f"no results files (*.jsonl) in folder {item}")
        elif path.is_file():
            files = [path]
        elif glob.has_magic(item):
            files = sorted(Path(p) for p in glob.glob(item, recursive=True) if Path(p).is_file())
            if not files:
                raise GateInputError(f"no results file matches {item}")
        else:
            raise GateInputError(f"no such results file or folder: {item}")
        out.extend(files)
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Row:
    """The fields of one result record the gate needs, and where it came from."""

    case_id: str
    verdict: str
    time: str
    run_id: str
    broker_product: str
    broker_version: str
    profile: str
    area: str
    level: str
    expected: str
    observed: str
    message: str
    file: str
    line: int
    facts: InvariantFacts | None = None  # wire invariants the record names (for scoped triage)

    @cached_property
    def signature(self) -> str:
        """The stable signature of what was observed (:mod:`conformance.gate.signature`); "" for PASS."""
        invariants = self.facts.invariants if self.facts else frozenset()
        return signature(self.verdict, self.observed, self.message, invariants)

    @property
    def form(self) -> str:
        return form_text(self.verdict, self.signature)


def _open(path: Path) -> TextIO:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _text(rec: dict[str, Any], key: str) -> str:
    value = rec.get(key)
    return value if isinstance(value, str) else ""


def _json_object(line: str, where: str, path: Path) -> dict[str, Any]:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise GateInputError(f"{where}: not a JSON line ({exc.msg}); is {path} a results file?") from exc
    if not isinstance(rec, dict):
        raise GateInputError(f"{where}: not a JSON object; is {path} a results file?")
    return rec


def read_rows(path: Path, mutation_records: list[int] | None = None) -> Iterator[Row]:
    """Every record of a results file; a line that is not one is bad input (a gate does not skip
    what it cannot read: the skipped line could be the regression). Records of mutation runs
    (``extra.mutant``) are another kind of run: not yielded, counted into ``mutation_records``."""
    seen = mutation = workload = 0
    try:
        with _open(path) as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{path}:{lineno}"
                rec = _json_object(line, where, path)
                if is_workload_record(rec):
                    workload += 1  # a faults run's record (report's cluster section): no case result
                    continue
                # The shipped JSON Schema first (every field's type and enum), then non-empty ids.
                problem = schema_problem(rec)
                if problem is not None:
                    raise GateInputError(f"{where}: not a result record: {problem}")
                missing = [f for f in REQUIRED_FIELDS if not isinstance(rec.get(f), str) or not rec[f]]
                if missing:
                    raise GateInputError(
                        f"{where}: not a result record: missing or mistyped {', '.join(missing)}"
                    )
                if rec["verdict"] not in VERDICTS:
                    raise GateInputError(f"{where}: unknown verdict {rec['verdict']!r}")
                if is_mutation_record(rec):
                    mutation += 1  # a run through an injected fault: not the broker's compliance
                    continue
                seen += 1
                yield Row(
                    rec["case_id"], rec["verdict"], rec["time"], rec["run_id"], rec["broker_product"],
                    rec["broker_version"], rec["profile"], rec["area"], rec["level"], _text(rec, "expected"),
                    _text(rec, "observed"), _text(rec, "message"), str(path), lineno,
                    InvariantFacts.of(rec.get("extra")),
                )
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise GateInputError(f"cannot read {path}: {exc}") from exc
    if mutation_records is not None:
        mutation_records.append(mutation)
    if seen == 0 and (mutation or workload):
        return  # a mutate session's or a faults run's file among the inputs: nothing of it is compared
    if seen == 0:
        raise GateInputError(f"{path} holds no result records")


def _selected(row: Row, sel: Selector) -> bool:
    if sel.kind == "run":
        return row.run_id == sel.value
    if sel.kind == "version":
        return row.broker_version == sel.value
    if sel.kind == "broker":
        return row.broker_product == sel.product and row.broker_version == sel.value
    return True


@dataclass(frozen=True)
class Side:
    """One side of the comparison: the latest record of each case."""

    selector: str
    files: tuple[str, ...]
    cases: dict[str, Row]
    n_records: int
    run_ids: tuple[str, ...]  # of every selected record, not only the latest per case

    def values(self, attr: str) -> list[str]:
        return sorted({getattr(r, attr) for r in self.cases.values()})

    @property
    def label(self) -> str:
        return ", ".join(sorted({f"{r.broker_product}@{r.broker_version}" for r in self.cases.values()}))


def load_side(sel: Selector, files: Sequence[Path]) -> Side:
    latest: dict[str, Row] = {}
    runs: set[str] = set()
    n = 0
    mutation: list[int] = []
    for path in files:
        for row in read_rows(path, mutation):
            if not _selected(row, sel):
                continue
            n += 1
            runs.add(row.run_id)
            prev = latest.get(row.case_id)
            # The latest execution of each case (ties: the greater run id), as the report does.
            if prev is None or (row.time, row.run_id) >= (prev.time, prev.run_id):
                latest[row.case_id] = row
    if not latest and any(mutation):
        raise GateInputError(f"selector {sel.text} matched only records of mutation runs (amqp-conformance "
                             f"mutate) in {' '.join(map(str, files))}; the gate compares runs of the suite")
    if not latest:
        raise GateInputError(f"selector {sel.text} matched no result records in {' '.join(map(str, files))}")
    return Side(sel.text, tuple(map(str, files)), latest, n, tuple(sorted(runs)))


# ---------------------------------------------------------------------------------- comparison


def transition(baseline: str | None, candidate: str) -> str | None:
    """The kind of a change of verdict, or None when the candidate is not worse.

    The same rule as the report's ``classify_transitions``: kept identical so the gate and the
    report's regression section never disagree.
    """
    if baseline is not None and (
        (baseline == "PASS" and candidate in BAD_AFTER_PASS)
        or (baseline == "FAIL" and candidate == "TIMEOUT")
        or (baseline != "ERROR" and candidate == "ERROR")
    ):
        return "regression"
    if baseline is None and candidate in BAD_AFTER_PASS:
        return "new-failure"
    if candidate == "NON_STRICT" and baseline != "NON_STRICT":
        return "new-non-strict"
    return None


@dataclass(frozen=True)
class Finding:
    kind: str  # regression | changed | new-failure | missing | new-non-strict | known | fixed
    case_id: str
    baseline_verdict: str | None
    candidate_verdict: str | None
    failing: bool
    area: str = ""
    level: str = ""
    expected: str = ""
    observed: str = ""
    message: str = ""
    triage: str = ""  # the triage entry's first line, for known and fixed
    file: str = ""  # the record the finding is about (candidate's; baseline's for missing)
    line: int = 0
    change: str = ""  # for known: the kind it would have been without triage
    form: str = ""  # the candidate's form: "VERDICT signature"
    was: str = ""  # for changed: the pinned form(s) (triaged) or the baseline's form, " or "-joined
    unpinned: bool = False  # for known: the entry does not pin this case's form


@dataclass(frozen=True)
class Options:
    allow_missing: bool = False
    allow_product_change: bool = False
    allow_profile_change: bool = False
    strict: bool = False


@dataclass(frozen=True)
class GateResult:
    baseline: Side
    candidate: Side
    findings: tuple[Finding, ...]
    refusals: tuple[str, ...]  # side-level reasons to fail (product, profile)
    notes: tuple[str, ...]  # side-level differences allowed by an option, or another broker release
    known_unchanged: int
    triage_file: str
    elapsed_s: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    categories: dict[str, str] = field(default_factory=dict)  # case id → its one category
    unpinned: int = 0  # known failures whose entry pins no form for the case

    @property
    def n_compared(self) -> int:
        return len(self.categories)

    @property
    def failed(self) -> bool:
        return bool(self.refusals) or any(f.failing for f in self.findings)


def _finding(kind: str, row: Row, baseline: str | None, failing: bool, *, triage: TriageEntry | None = None,
             change: str = "", was: str = "", unpinned: bool = False) -> Finding:
    return Finding(kind, row.case_id, baseline, row.verdict, failing, row.area, row.level, row.expected,
                   row.observed, row.message, triage.summary if triage else "", row.file, row.line, change,
                   row.form if row.verdict != "PASS" else "", was, unpinned)


def _same_form(b_row: Row, row: Row) -> bool:
    return form_matches((b_row.verdict, b_row.signature), row.verdict, row.signature)


def _classify(row: Row, b_row: Row | None, triage: Triage,
              options: Options) -> tuple[str, Finding | None, bool]:
    """One candidate case: its category, its finding (None: only counted), and whether it is a known
    failure of an entry that pins no form for it (unpinned)."""
    b_verdict = b_row.verdict if b_row else None
    kind = transition(b_verdict, row.verdict)
    entry = triage.known(row.case_id, row.verdict, row.facts) if row.verdict != "PASS" else None
    if entry is not None:
        pinned = entry.form_known(row.case_id, row.verdict, row.signature)
        if pinned is False:
            # Triaged, but not in the form the entry pinned: the broker fails another way now.
            was = " or ".join(form_text(v, s) for v, s in entry.pinned(row.case_id) or ())
            return "changed", _finding("changed", row, b_verdict, True, triage=entry, change=kind or "",
                                       was=was), False
        known = _finding("known", row, b_verdict, False, triage=entry, change=kind or "",
                         unpinned=pinned is None)
        return "known", known if kind is not None else None, pinned is None
    if kind is not None:
        return kind, _finding(kind, row, b_verdict, kind != "new-non-strict" or options.strict), False
    if b_row is None:
        return "new", None, False  # passes, or UNSUPPORTED / INFORMATIONAL: nothing to blame yet
    if row.verdict == "PASS" and b_row.verdict != "PASS":
        listed = triage.listed(row.case_id)
        return "fixed", _finding("fixed", row, b_row.verdict, False, triage=listed, was=b_row.form), False
    if b_row.verdict == row.verdict == "PASS" or _same_form(b_row, row):
        return "unchanged", None, False
    # Untriaged and not a regression, yet not what the baseline holds: another failure (TIMEOUT →
    # FAIL, another reply code), or a PASS that stopped checking (UNSUPPORTED, INFORMATIONAL).
    was = b_row.form if b_row.verdict != "PASS" else "PASS"
    return "changed", _finding("changed", row, b_row.verdict, True, was=was), False


def compare(base: Side, cand: Side, triage: Triage = EMPTY, options: Options = Options()) -> GateResult:
    started = time.perf_counter()
    refusals: list[str] = []
    notes: list[str] = []
    for attr, what, allowed, flag in (
        ("broker_product", "broker product", options.allow_product_change, "--allow-product-change"),
        ("profile", "profile", options.allow_profile_change, "--allow-profile-change"),
    ):
        b, c = base.values(attr), cand.values(attr)
        if b != c:
            text = f"{what} differs: baseline {', '.join(b)}, candidate {', '.join(c)}"
            (notes if allowed else refusals).append(text if allowed else f"{text} (state {flag} if intended)")
    b_rel, c_rel = base.values("broker_version"), cand.values("broker_version")
    if b_rel != c_rel:  # a newer Debian sid, another patch release: never a silent comparison
        notes.append(f"broker release differs: the baseline was recorded on {', '.join(b_rel) or '?'}, the "
                     f"candidate is {', '.join(c_rel) or '?'}; its verdicts are compared with another "
                     "release's (record a baseline of its own: gate --update-baseline)")
    findings: list[Finding] = []
    categories: dict[str, str] = {}
    known_unchanged = unpinned = 0
    for case_id, row in sorted(cand.cases.items()):
        category, finding, no_form = _classify(row, base.cases.get(case_id), triage, options)
        categories[case_id] = category
        unpinned += no_form
        if finding is not None:
            findings.append(finding)
        elif category == "known":
            known_unchanged += 1
    for case_id, b_row in sorted(base.cases.items()):
        if case_id not in cand.cases:
            findings.append(Finding("missing", case_id, b_row.verdict, None, not options.allow_missing,
                                    b_row.area, b_row.level, file=b_row.file, line=b_row.line))
            categories[case_id] = "missing"
    findings.sort(key=lambda f: (KIND_ORDER.index(f.kind), f.case_id))
    counts = dict.fromkeys(CATEGORIES, 0)
    for category in categories.values():
        counts[category] += 1
    return GateResult(
        base,
        cand,
        tuple(findings),
        tuple(refusals),
        tuple(notes),
        known_unchanged,
        triage.path,
        time.perf_counter() - started,
        counts,
        categories,
        unpinned,
    )


# ------------------------------------------------------------------------------------- output


def summary_line(res: GateResult, strict: bool) -> str:
    c = res.counts
    soft = c["new-non-strict"]
    missing_allowed = c["missing"] and not any(f.failing for f in res.findings if f.kind == "missing")
    parts = [
        f"{c['regression']} regression(s)",
        f"{c['changed']} changed",
        f"{c['new-failure']} untriaged new failure(s)",
        f"{soft} new NON_STRICT{' (fail with --strict)' if soft and not strict else ''}",
        f"{c['missing']} missing case(s){' (allowed)' if missing_allowed else ''}",
        f"{c['known']} known failure(s){f' ({res.unpinned} unpinned)' if res.unpinned else ''}",
        f"{c['fixed']} fixed",
        f"{c['unchanged']} unchanged",
        f"{c['new']} new",
    ]
    head = (f"gate {'FAIL' if res.failed else 'PASS'}: " + ", ".join(parts)
            + f" = {res.n_compared} compared")
    tail = (
        f"; baseline {res.baseline.selector} ({len(res.baseline.cases)} cases, {res.baseline.label}) → "
        f"candidate {res.candidate.selector} ({len(res.candidate.cases)} cases, {res.candidate.label})"
    )
    return head + tail


def format_table(findings: Sequence[Finding], out: TextIO) -> None:
    heads = ("KIND", "CASE", "BASELINE", "CANDIDATE", "NOTE")
    shown: list[Finding] = []
    hidden: dict[str, int] = {}
    for f in findings:
        if sum(s.kind == f.kind for s in shown) < TABLE_LIMIT:
            shown.append(f)
        else:
            hidden[f.kind] = hidden.get(f.kind, 0) + 1
    cells = [[f.kind, f.case_id, f.baseline_verdict or "(new)", f.candidate_verdict or "(absent)", _note(f)]
             for f in shown]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(heads[:-1])]
    print("  ".join(h.ljust(w) for h, w in zip(heads, [*widths, 0], strict=True)).rstrip(), file=out)
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, [*widths, 0], strict=True)).rstrip(), file=out)
    for kind, n in hidden.items():
        print(f"… and {n} more {kind} row(s) (all of them with --json)", file=out)


def _note(f: Finding) -> str:
    if f.kind == "changed":
        return f"was {f.was or '(no form)'} → now {f.form}"
    if f.kind == "known" or (f.kind == "fixed" and f.triage):
        return (f"triage: {f.triage}" + (" (unpinned)" if f.unpinned else "")
                + (f" (would be {f.change})" if f.change else ""))
    if f.kind == "fixed":
        return f"was {f.was} (no triage entry)"
    first = (f.message or f.observed).strip().splitlines()
    return first[0][:120] if first else ""


def to_json(res: GateResult, strict: bool) -> dict[str, Any]:
    def side(s: Side) -> dict[str, Any]:
        return {
            "selector": s.selector,
            "files": list(s.files),
            "n_records": s.n_records,
            "n_cases": len(s.cases),
            "brokers": s.label,
            "broker_products": s.values("broker_product"),
            "profiles": s.values("profile"),
            "run_ids": list(s.run_ids),
        }

    return {
        "verdict": "FAIL" if res.failed else "PASS",
        "summary": summary_line(res, strict),
        "counts": res.counts,
        "n_compared": res.n_compared,
        "unpinned": res.unpinned,
        "refusals": list(res.refusals),
        "notes": list(res.notes),
        "triage_file": res.triage_file or None,
        "baseline": side(res.baseline),
        "candidate": side(res.candidate),
        "findings": [asdict(f) for f in res.findings],
        "elapsed_s": round(res.elapsed_s, 4),
    }


# -------------------------------------------------------------------------------- update baseline


def require_one_run(cand: Side) -> None:
    runs = cand.run_ids
    if len(runs) != 1:
        raise GateInputError(
            f"a baseline is one run; the candidate holds {len(runs)} runs ({', '.join(runs[:3])} …)"
        )


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it: put it straight back
    os.umask(mask)
    return mask


def write_baseline(cand: Side, target: Path) -> int:
    """Write the candidate's records (one run, latest per case, sorted) as the new baseline.

    Frame traces are dropped: a baseline is committed, and the verdicts are what it holds.
    """
    require_one_run(cand)
    wanted = {(r.file, r.line) for r in cand.cases.values()}
    lines: list[tuple[str, str]] = []
    for path in sorted({r.file for r in cand.cases.values()}):
        with _open(Path(path)) as fh:
            for lineno, line in enumerate(fh, 1):
                if (path, lineno) in wanted:
                    rec = json.loads(line)
                    if isinstance(rec.get("extra"), dict):
                        rec["extra"].pop("trace", None)
                    lines.append((rec["case_id"], json.dumps(rec, sort_keys=True, ensure_ascii=False)))
    target.parent.mkdir(parents=True, exist_ok=True)
    # Replace atomically: an interrupted update never leaves half a baseline.
    fd, tmp = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
    # mkstemp makes the file 0600; a committed baseline gets the mode open() would give (0644 under
    # umask 022), or others in the team, and CI, cannot read it.
    os.fchmod(fd, 0o666 & ~_umask())
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.writelines(text + "\n" for _case, text in sorted(lines))
    os.replace(tmp, target)
    return len(lines)
