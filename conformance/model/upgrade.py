"""The upgrade comparison: two runs of one broker product at two versions, case by case — what changed
in the verdict and in the *observed* value (normalised: no generated names, tags, ports, ids), each
change marked documented (a change of ``conformance/profiles/rabbitmq_releases.toml`` between the two
releases lists the case: its source) or UNDOCUMENTED.

Plain Python (no Spark): ``amqp-conformance diff OLD NEW`` prints it, the HTML report's "Upgrade"
section shows the same rows (:mod:`conformance.report.upgrade`).
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from conformance.model.results import is_mutation_record, is_workload_record, read_records
from conformance.model.verdicts import action_rank
from conformance.profiles import load_table
from conformance.profiles.releases import Change, applied_release, changes_between

#: what varies from run to run and says nothing of the broker, replaced before comparing
_NORMALISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    # how a broker batches confirms is timing, not behaviour (a multiple ack may cover any range)
    (re.compile(r"\d+ confirm frames \(\d+ multiple=true\)"), "<n> confirm frames"),
    (re.compile(r"basic\.(n?ack) tag=\d+ multiple=(?:True|False)"), r"basic.\1 <confirm>"),
    (re.compile(r"(basic\.n?ack <confirm>)(?:; basic\.n?ack <confirm>)+"), r"\1"),
    (re.compile(r"amq\.rabbitmq\.reply-to\.[\w+/=.-]+"), "amq.rabbitmq.reply-to.<id>"),
    # how many of a flood a queue over its limit accepted before refusing is a race, not a rule
    (re.compile(r"\d+ seqs acked, \d+ nacked"), "<n> seqs acked, <n> nacked"),
    (re.compile(r"'acked/nacked seqs': '\d+/\d+'"), "'acked/nacked seqs': '<n>/<n>'"),
    # the target's kind (how it was started, not what it does): "local:rabbitmq@trixie: one node"
    (re.compile(r"\b(?:local:[\w@/.-]+|url|reference|cluster-url|container:\S+)(?=: )"), "<target>"),
    (re.compile(r"amqpc(?:[0-9a-f]+n)?\d+@[\w.-]+"), "<node>"),
    (re.compile(r"amqpc-(?!restricted|second)[\w.-]+"), "<name>"),
    (re.compile(r"amq\.(gen|ctag)-[\w-]+"), r"amq.\1-<id>"),
    (re.compile(r"(127\.0\.0\.1|localhost|\[::1\]):\d+"), r"\1:<port>"),
    (re.compile(r"<0\.\d+\.\d+>"), "<pid>"),
    (re.compile(r"\b\d+(\.\d+)? ?(ms|s)\b"), "<time>"),
    (re.compile(r"\b[0-9a-f]{8,}\b"), "<id>"),
    (re.compile(r"(delivery[-_ ]tag[=: ]*)\d+"), r"\1<tag>"),
)


#: the same, for Java's regular expressions (the report's Spark form): $1 for \1
NORMALISE_JAVA: tuple[tuple[str, str], ...] = tuple(
    (p.pattern, r.replace("\\1", "$1")) for p, r in _NORMALISE)


def normalise(text: str) -> str:
    """``text`` without what a run generates (entity names, node names, ports, ids, tags, times)."""
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return text


@dataclass(frozen=True)
class Side:
    """One run: its records by case id (the last record of a case wins)."""

    label: str  # "RabbitMQ 3.10.8"
    product: str
    version: str
    release: str  # the RabbitMQ release its semantics are (server's version, or the default)
    records: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Row:
    case_id: str
    old_verdict: str
    new_verdict: str
    old_observed: str
    new_observed: str
    changes: tuple[Change, ...] = ()
    # The new run, judged by its own release's expectations (documented changes included), fails a
    # case the old run did not: whatever change lists the case, it does not explain that failure.
    new_failure: bool = False
    # Why what changed is not a change between releases: it varies between runs of one release
    # (measured: conformance/profiles/unstable.toml, or runs of one release among the inputs).
    unstable: str = ""

    @property
    def documented(self) -> bool:
        return bool(self.changes) and not self.new_failure

    @property
    def stable(self) -> bool:
        return not self.unstable

    @property
    def what(self) -> str:
        parts = []
        if self.old_verdict != self.new_verdict:
            parts.append("verdict")
        if self.old_observed != self.new_observed:
            parts.append("observed")
        return "+".join(parts)

    @property
    def status(self) -> str:
        if not self.stable:
            return "not stable"
        return "documented" if self.documented else "UNDOCUMENTED"

    @property
    def sources(self) -> str:
        return "; ".join(f"{c.since} {c.key}: {c.source}" for c in self.changes)


@dataclass(frozen=True)
class Comparison:
    old: Side
    new: Side
    rows: tuple[Row, ...]
    only_old: tuple[str, ...] = field(default=())
    only_new: tuple[str, ...] = field(default=())
    problems: tuple[str, ...] = field(default=())

    @property
    def undocumented(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.stable and not r.documented)

    @property
    def not_stable(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if not r.stable)


def result_files(spec: str) -> list[Path]:
    path = Path(spec)
    if path.is_dir():
        return sorted(p for p in path.glob("*.jsonl") if not p.name.endswith(".part.jsonl"))
    if glob.has_magic(spec):
        return sorted(Path(p) for p in glob.glob(spec))
    if path.is_file():
        return [path]
    raise ValueError(f"{spec}: no such results file or folder")


def load_side(spec: str) -> Side:
    """A results file, folder or glob as one side (ValueError, one line, when it holds no case)."""
    files = result_files(spec)
    records: dict[str, dict[str, Any]] = {}
    for rec in read_records(files):
        if is_workload_record(rec) or is_mutation_record(rec) or "case_id" not in rec:
            continue
        records[rec["case_id"]] = rec
    if not records:
        raise ValueError(f"{spec}: no case results")
    first = next(iter(records.values()))
    product, version = str(first.get("broker_product", "?")), str(first.get("broker_version", "?"))
    release = applied_release(product, version)[0]
    return Side(f"{product} {version}", product, version, release, records)


def observed_text(rec: dict[str, Any], version: str) -> str:
    text = " ".join(str(rec.get("observed") or "").split())
    if version and version != "?":
        text = text.replace(f"'{version}'", "'<version>'")  # the release itself changes by definition
    return normalise(text)


#: verdicts that say the broker differs from what its profile expects
FAILING = frozenset({"FAIL", "NON_STRICT", "TIMEOUT", "ERROR"})


def new_failure(old_verdict: str, new_verdict: str, new_basis: str | None) -> bool:
    """Does the new run fail a case the old one did not, judged by the new broker's own release
    (``release_basis`` server-properties, or none recorded)? Its expectations already follow every
    documented change, so such a failure is undocumented whatever change lists the case."""
    own = (new_basis or "server-properties") == "server-properties"
    return own and old_verdict not in FAILING and new_verdict in FAILING


def _base_case(case_id: str) -> tuple[str, str | None]:
    """``queue_types.x[quorum]`` → (``queue_types.x``, ``quorum``)."""
    m = re.fullmatch(r"(.*)\[(\w+)\]", case_id)
    return (m.group(1), m.group(2)) if m else (case_id, None)


#: (case id, aspect) → why it varies between runs of one release; aspect is verdict | observed
Unstable = dict[tuple[str, str], str]


@cache
def measured_unstable() -> Unstable:
    """What the committed measurements found varying between runs of one release
    (``conformance/profiles/unstable.toml``): per case id (with its [queue type]) and aspect."""
    out: Unstable = {}
    for row in load_table("unstable").get("cases", []):
        for aspect in row.get("varies", ["observed"]):
            out[(str(row["case"]), str(aspect))] = f"{row['why']} (measured: {row['measured']})"
    return out


def _unstable_reason(row: Row, unstable: Unstable) -> str:
    """Why ``row``'s change is not a change between releases: every aspect that changed varies
    between runs of one release ("" when some changed aspect is stable)."""
    whys = [unstable.get((row.case_id, aspect)) for aspect in row.what.split("+") if aspect]
    return "; ".join(w for w in whys if w) if whys and all(whys) else ""


def compare(old: Side, new: Side, *, everything: bool = False,
            unstable: Unstable | None = None) -> Comparison:
    """Case by case: the cases whose verdict or normalised observed value differs (``everything``:
    every common case). A change in an aspect that varies between runs of one release (``unstable``;
    default: the committed measurements) is marked not stable, never UNDOCUMENTED."""
    unstable = measured_unstable() if unstable is None else unstable
    problems = []
    if old.product != new.product:
        problems.append(f"two products: {old.product} and {new.product} (an upgrade compares one product)")
    rows = []
    for case_id in sorted(set(old.records) & set(new.records)):
        a, b = old.records[case_id], new.records[case_id]
        row = Row(case_id, str(a.get("verdict")), str(b.get("verdict")), observed_text(a, old.version),
                  observed_text(b, new.version))
        if not everything and not row.what:
            continue
        base, qtype = _base_case(case_id)
        qtype = qtype or b.get("queue_type") or None
        found = changes_between(base, qtype, old.release, new.release)
        rows.append(Row(row.case_id, row.old_verdict, row.new_verdict, row.old_observed, row.new_observed,
                        tuple(found), new_failure(row.old_verdict, row.new_verdict, b.get("release_basis")),
                        _unstable_reason(row, unstable)))
    return Comparison(old, new, tuple(rows), tuple(sorted(set(old.records) - set(new.records))),
                      tuple(sorted(set(new.records) - set(old.records))), tuple(problems))


def compare_paths(old: str, new: str, *, everything: bool = False) -> Comparison:
    return compare(load_side(old), load_side(new), everything=everything)


def by_action(rows: tuple[Row, ...]) -> tuple[Row, ...]:
    """Worst first: by the new verdict's place in ACTION_ORDER (FAIL, TIMEOUT, ERROR, NOT_RUN,
    NON_STRICT, then the rest), UNDOCUMENTED before documented, then by case; what is not stable (no
    change between releases) after every change."""
    status = {"UNDOCUMENTED": 0, "documented": 1, "not stable": 2}
    return tuple(sorted(rows, key=lambda r: (not r.stable, action_rank(r.new_verdict), status[r.status],
                                             r.case_id)))


def _clip(text: str, width: int, start: int = 0) -> str:
    """``width`` characters of ``text`` from ``start`` (… where cut)."""
    head = "…" if start > 0 else ""
    part = text[start:]
    return head + (part if len(part) <= width else part[: width - 1] + "…")


def _first_difference(a: str, b: str) -> int:
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return max(0, n - 15)


def render(cmp: Comparison, *, width: int = 70) -> list[str]:
    """The comparison as terminal lines."""
    unsteady = f", {len(cmp.not_stable)} not stable" if cmp.not_stable else ""
    out = [f"upgrade {cmp.old.label} -> {cmp.new.label} (RabbitMQ semantics {cmp.old.release} -> "
           f"{cmp.new.release}): {len(cmp.rows)} case(s) changed, {len(cmp.undocumented)} UNDOCUMENTED"
           f"{unsteady}"]
    out += [f"warning: {p}" for p in cmp.problems]
    for r in by_action(cmp.rows):
        verdict = r.old_verdict if r.old_verdict == r.new_verdict else f"{r.old_verdict} -> {r.new_verdict}"
        out.append(f"{r.status:12} {r.case_id}  [{r.what}] {verdict}")
        if r.old_observed != r.new_observed:
            at = _first_difference(r.old_observed, r.new_observed)
            out.append(f"    old: {_clip(r.old_observed, width, at)}")
            out.append(f"    new: {_clip(r.new_observed, width, at)}")
        if r.new_failure and r.changes:
            out.append(f"    a new {r.new_verdict} under {cmp.new.label}'s own expectations: the change(s) "
                       "below list the case but do not explain it")
        for c in r.changes:
            out.append(f"    source: RabbitMQ {c.since} {c.summary} — {c.source}")
        if r.unstable:
            out.append(f"    not a change between releases: {_clip(r.unstable, 2 * width)}")
    if cmp.only_old:
        out.append(f"only in the old run: {len(cmp.only_old)} case(s): {', '.join(cmp.only_old[:10])}")
    if cmp.only_new:
        out.append(f"only in the new run: {len(cmp.only_new)} case(s): {', '.join(cmp.only_new[:10])}")
    return out


def rows_as_dicts(cmp: Comparison) -> list[dict[str, Any]]:
    """The rows as plain dicts (the report's table)."""
    return [{"case_id": r.case_id, "status": r.status, "what": r.what, "old_verdict": r.old_verdict,
             "new_verdict": r.new_verdict, "old_observed": r.old_observed, "new_observed": r.new_observed,
             "sources": r.sources, "unstable": r.unstable} for r in by_action(cmp.rows)]

