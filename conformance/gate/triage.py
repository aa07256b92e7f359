"""Expected failures (triage): which non-PASS verdicts of a broker are known, and why.

The file is TOML, one ``[[triage]]`` table per finding::

    [[triage]]
    cases = ["tx.*", "confirms.select-on-tx-channel-406"]   # globs over case ids
    reason = "garagemq has no tx class: …"                   # why the verdict is the broker's
    verdicts = ["TIMEOUT", "FAIL"]                          # optional: which verdicts are known

Without ``verdicts`` an entry covers every verdict a broker can be blamed for (FAIL, NON_STRICT,
TIMEOUT, UNSUPPORTED, INFORMATIONAL). ERROR (a harness fault) and NOT_RUN (the case never ran)
are never the broker's known behaviour, so an entry covers them only when it lists them: a broad
glob such as ``tx.*`` must not hide a harness crash or a broker that stopped answering.

An entry may pin the *form* of each failure it explains (:mod:`conformance.gate.signature`): the
verdict and a stable signature of what was observed, one key per case id::

    [triage.forms]
    "access.unknown-user-closes-403" = "FAIL value 530 | connection.close reply-code"
    "connection.close-stability" = ["FAIL invariant …", "TIMEOUT *"]   # several forms; * = any signature

A case the entry pins is *known* only in one of its pinned forms; in another it is *changed* (the
gate fails). A case the entry matches but does not pin (an entry written before forms, or a case
that passed when the forms were written) is known in any form of the entry's verdicts: the gate
says *unpinned*. ``amqp-conformance gate … --update-triage`` writes the forms from a reviewed run.
Entries scoped to wire invariants pin no forms: the invariants are their form.

The gate reads this file (``gate --triage``, by default ``<baseline>.triage.toml``) and so can
``run --expected-failures``; :func:`load_triage` is the one parser.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from conformance.gate.signature import form_matches, parse_form
from conformance.model.verdicts import Verdict

DEFAULT_KNOWN: frozenset[str] = frozenset(
    v.value for v in Verdict if v not in (Verdict.PASS, Verdict.ERROR, Verdict.NOT_RUN))
TRIAGE_SUFFIX = ".triage.toml"


class TriageProblem(ValueError):
    """The triage file cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class InvariantFacts:
    """What a record says about wire invariants: the ones broken, and the case's own verdict."""

    invariants: frozenset[str]
    case_verdict: str

    @classmethod
    def of(cls, extra: object) -> InvariantFacts | None:
        if not isinstance(extra, dict) or not extra.get("invariants"):
            return None
        return cls(frozenset(str(i) for i in extra["invariants"]), str(extra.get("case_verdict", "")))


@dataclass(frozen=True)
class TriageEntry:
    cases: tuple[str, ...]
    reason: str
    verdicts: frozenset[str]
    index: int  # 1-based position in the file, to cite it
    # Only for a FAIL that these wire invariants alone caused (the case's own checks passed).
    invariants: frozenset[str] = frozenset()
    # case id → the pinned forms (verdict, signature) of its failure; absent: unpinned.
    forms: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=lambda: MappingProxyType({}))

    def pinned(self, case_id: str) -> tuple[tuple[str, str], ...] | None:
        return self.forms.get(case_id)

    def form_known(self, case_id: str, verdict: str, sig: str) -> bool | None:
        """True: a pinned form; False: pinned, in other forms only; None: the case is not pinned."""
        pinned = self.forms.get(case_id)
        if pinned is None:
            return None
        return any(form_matches(p, verdict, sig) for p in pinned)

    def matches(self, case_id: str) -> bool:
        return any(fnmatch.fnmatchcase(case_id, glob) for glob in self.cases)

    def covers(self, case_id: str, verdict: str, facts: InvariantFacts | None = None) -> bool:
        if not (verdict in self.verdicts and self.matches(case_id)):
            return False
        if not self.invariants:
            return True
        # An invariant-scoped entry excuses the invariant, never a failure of the case's own checks.
        return (facts is not None and bool(facts.invariants) and facts.invariants <= self.invariants
                and facts.case_verdict in ("PASS", "INFORMATIONAL"))

    @property
    def summary(self) -> str:
        """The reason's first line, for tables and annotations."""
        return self.reason.strip().splitlines()[0] if self.reason.strip() else ""


@dataclass(frozen=True)
class Triage:
    path: str
    entries: tuple[TriageEntry, ...]

    def known(self, case_id: str, verdict: str, facts: InvariantFacts | None = None) -> TriageEntry | None:
        """The first entry that explains ``verdict`` for ``case_id`` (given the record's invariant
        facts, for entries scoped to invariants), if any."""
        return next((e for e in self.entries if e.covers(case_id, verdict, facts)), None)

    def listed(self, case_id: str) -> TriageEntry | None:
        """The first entry naming ``case_id`` whatever the verdict (to report a fix). Entries scoped
        to wire invariants excuse a symptom of any case, they do not name cases: not counted here."""
        return next((e for e in self.entries if not e.invariants and e.matches(case_id)), None)


EMPTY = Triage("", ())


def _strings(value: object, what: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(x, str) and x.strip() for x in value):
        raise TriageProblem(f"{where}: {what} must be a non-empty list of strings")
    return tuple(x.strip() for x in value)


def _forms(raw: object, where: str, globs: tuple[str, ...], verdicts: frozenset[str],
           scoped: bool) -> dict[str, tuple[tuple[str, str], ...]]:
    if scoped:
        raise TriageProblem(f"{where}: an entry scoped to invariants pins no forms "
                            "(the invariants are its form)")
    if not isinstance(raw, dict):
        raise TriageProblem(f"{where}: forms must be a table of case id = \"VERDICT signature\"")
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for case_id, value in raw.items():
        texts = [value] if isinstance(value, str) else value
        if (not isinstance(texts, list) or not texts
                or not all(isinstance(t, str) and t.strip() for t in texts)):
            raise TriageProblem(f"{where}: forms.{case_id} must be \"VERDICT signature\" or a list of them")
        if not any(fnmatch.fnmatchcase(case_id, g) for g in globs):
            raise TriageProblem(f"{where}: forms.{case_id}: the case is not among the entry's cases")
        parsed = tuple(parse_form(t) for t in texts)
        bad = sorted({v for v, _ in parsed} - verdicts)
        if bad:
            raise TriageProblem(f"{where}: forms.{case_id} pins {', '.join(bad)}, a verdict the entry does "
                                f"not cover ({', '.join(sorted(verdicts))})")
        out[case_id] = parsed
    return out


def parse_triage(text: str, path: str) -> Triage:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TriageProblem(f"{path}: not valid TOML ({exc})") from exc
    raw = doc.get("triage", [])
    if not isinstance(raw, list):
        raise TriageProblem(f"{path}: 'triage' must be an array of tables ([[triage]])")
    known = {v.value for v in Verdict}
    entries: list[TriageEntry] = []
    for i, item in enumerate(raw, 1):
        where = f"{path}: [[triage]] #{i}"
        if not isinstance(item, dict):
            raise TriageProblem(f"{where}: not a table")
        unknown_keys = sorted(set(item) - {"cases", "reason", "verdicts", "invariants", "forms"})
        if unknown_keys:
            raise TriageProblem(f"{where}: unknown key(s) {', '.join(unknown_keys)} "
                                "(known: cases, reason, verdicts, invariants, forms)")
        cases = _strings(item.get("cases"), "cases", where)
        reason = item.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise TriageProblem(f"{where}: reason must say why the verdict is the broker's")
        verdicts = DEFAULT_KNOWN
        if "verdicts" in item:
            given = {v.upper() for v in _strings(item["verdicts"], "verdicts", where)}
            bad = sorted(given - known)
            if bad or "PASS" in given:
                raise TriageProblem(
                    f"{where}: verdicts {', '.join(bad or ['PASS'])} cannot be expected failures"
                )
            verdicts = frozenset(given)
        invariants = frozenset(_strings(item["invariants"], "invariants", where)) if "invariants" in item \
            else frozenset()
        if invariants and "verdicts" not in item:
            verdicts = frozenset({"FAIL"})  # an invariant violation is always a FAIL
        forms = _forms(item.get("forms"), where, cases, verdicts, bool(invariants)) if "forms" in item else {}
        entries.append(TriageEntry(cases, reason, verdicts, i, invariants, MappingProxyType(forms)))
    return Triage(path, tuple(entries))


def load_triage(path: Path) -> Triage:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TriageProblem(f"no such triage file: {path}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise TriageProblem(f"cannot read triage file {path}: {exc}") from exc
    return parse_triage(text, str(path))


def triage_beside(results_file: Path) -> Path | None:
    """``fixtures/baselines/x.jsonl`` → ``fixtures/baselines/x.triage.toml`` when that exists."""
    name = results_file.name
    for suffix in (".jsonl.gz", ".jsonl", ".json"):
        if name.endswith(suffix):
            candidate = results_file.with_name(name[: -len(suffix)] + TRIAGE_SUFFIX)
            return candidate if candidate.is_file() else None
    return None
