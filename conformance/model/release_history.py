"""The release history: runs of one broker product at several releases (3.8.9 → 3.10.8 → 4.0.5 →
4.3.x), every hop at once, case by case (:func:`conformance.model.upgrade.compare` per hop).

The inputs (files, folders, globs) are split into runs (one ``run_id`` each) and grouped by release
(product and version). Runs of one release measure what varies by itself: a case whose verdict or
normalised observed value differs between them (an interleaving, a timing) is not a change between
releases, and a hop changing only such an aspect is marked ``not stable``, like the committed
measurements of ``conformance/profiles/unstable.toml``. Two runs of one release show no change.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from conformance.model.results import is_mutation_record, is_workload_record, read_records
from conformance.model.upgrade import (
    Comparison,
    Row,
    Side,
    Unstable,
    by_action,
    compare,
    measured_unstable,
    observed_text,
    render,
    result_files,
    rows_as_dicts,
)
from conformance.model.verdicts import action_rank
from conformance.profiles.releases import applied_release, parse_release


@dataclass(frozen=True)
class Release:
    side: Side  # the release's runs merged (the last record of a case wins)
    runs: tuple[str, ...]  # their run ids


@dataclass(frozen=True)
class History:
    releases: tuple[Release, ...]  # oldest first
    hops: tuple[Comparison, ...]  # releases[i] -> releases[i + 1]
    # what differs between runs of one release among the inputs: (case id, aspect) -> why
    varying: Unstable
    problems: tuple[str, ...] = ()

    @property
    def rows(self) -> tuple[tuple[Comparison, Row], ...]:
        return tuple((hop, r) for hop in self.hops for r in hop.rows)

    @property
    def undocumented(self) -> int:
        return sum(len(h.undocumented) for h in self.hops)

    @property
    def not_stable(self) -> int:
        return sum(len(h.not_stable) for h in self.hops)


def _runs(specs: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """run id → case id → record, over every input (workload and mutation records left out)."""
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for spec in specs:
        for rec in read_records(result_files(spec)):
            if is_workload_record(rec) or is_mutation_record(rec) or "case_id" not in rec:
                continue
            runs.setdefault(str(rec.get("run_id", spec)), {})[rec["case_id"]] = rec
    return runs


def _release_key(product: str, version: str) -> tuple[Any, ...]:
    return (product, parse_release(version) or (), version)


def _varying(release: str, runs: list[dict[str, dict[str, Any]]], version: str) -> Unstable:
    """What differs between ``runs`` of one release, case by case (cases two or more of them ran)."""
    out: Unstable = {}
    ids = {c for run in runs for c in run}
    for case_id in sorted(ids):
        recs = [run[case_id] for run in runs if case_id in run]
        if len(recs) < 2:
            continue
        verdicts = {str(r.get("verdict")) for r in recs}
        observed = {observed_text(r, version) for r in recs}
        n = f"{len(recs)} runs of {release}"
        if len(verdicts) > 1:
            out[(case_id, "verdict")] = f"verdict {' / '.join(sorted(verdicts))} across {n}"
        if len(observed) > 1:
            out[(case_id, "observed")] = f"observed value differs across {n}"
    return out


def history(specs: Sequence[str], *, everything: bool = False) -> History:
    """The release history of the runs ``specs`` hold (ValueError, one line, when they hold none)."""
    runs = _runs(specs)
    if not runs:
        raise ValueError(f"{' '.join(specs)}: no case results")
    groups: dict[tuple[str, str], list[tuple[str, dict[str, dict[str, Any]]]]] = {}
    for run_id, recs in runs.items():
        first = next(iter(recs.values()))
        key = (str(first.get("broker_product", "?")), str(first.get("broker_version", "?")))
        groups.setdefault(key, []).append((run_id, recs))
    releases, varying = [], dict(measured_unstable())
    for (product, version), members in sorted(groups.items(), key=lambda kv: _release_key(*kv[0])):
        merged: dict[str, dict[str, Any]] = {}
        for _run_id, recs in sorted(members):
            merged.update(recs)
        release = applied_release(product, version)[0]
        side = Side(f"{product} {version}", product, version, release, merged)
        releases.append(Release(side, tuple(r for r, _ in sorted(members))))
        varying.update(_varying(side.label, [recs for _r, recs in members], version))
    products = sorted({r.side.product for r in releases})
    problems = ((f"several products: {', '.join(products)} (a release history follows one product)",)
                if len(products) > 1 else ())
    hops = tuple(compare(a.side, b.side, everything=everything, unstable=varying)
                 for a, b in itertools.pairwise(releases))
    measured = measured_unstable()
    found = {k: v for k, v in varying.items() if k not in measured}
    return History(tuple(releases), hops, found, problems)


def _cell(rel: Release, case_id: str) -> str:
    rec = rel.side.records.get(case_id)
    return f"{rel.side.version} {rec.get('verdict') if rec else '-'}"


def render_history(h: History, *, width: int = 70) -> list[str]:
    """Every hop at once: one line per case that changed on some hop (worst first: the newest
    release's verdict by ACTION_ORDER, then UNDOCUMENTED before documented; cases only not stable
    last), then each hop's rows with their evidence and sources."""
    chain = " -> ".join(f"{r.side.version}" + (f" ({len(r.runs)} runs)" if len(r.runs) > 1 else "")
                        for r in h.releases)
    product = h.releases[0].side.product
    changed = {r.case_id for _hop, r in h.rows}
    out = [f"release history {product} {chain}: {len(h.hops)} hop(s), {len(changed)} case(s) changed, "
           f"{h.undocumented} UNDOCUMENTED, {h.not_stable} not stable"]
    out += [f"warning: {p}" for p in h.problems]
    if not h.hops:
        out.append(f"one release ({h.releases[0].side.label}): no change between releases")
    status = {"UNDOCUMENTED": 0, "documented": 1, "not stable": 2}
    by_case: dict[str, dict[int, Row]] = {}
    for i, hop in enumerate(h.hops):
        for r in hop.rows:
            by_case.setdefault(r.case_id, {})[i] = r

    def rank(case_id: str) -> tuple[bool, int, int, str]:
        newest = h.releases[-1].side.records.get(case_id) or {}
        worst = min(status[r.status] for r in by_case[case_id].values())
        return (worst == status["not stable"], action_rank(str(newest.get("verdict", ""))), worst, case_id)

    for case_id in sorted(by_case, key=rank):
        parts = [_cell(h.releases[0], case_id)]
        for i, rel in enumerate(h.releases[1:]):
            row = by_case[case_id].get(i)
            mark = f" [{row.status}: {row.what}]" if row else ""
            parts.append(f"{_cell(rel, case_id)}{mark}")
        out.append(f"  {case_id}: " + " -> ".join(parts))
    for hop in h.hops:
        out.append("")
        out += render(hop, width=width)
    if h.varying:
        shown = sorted(h.varying.items())
        out.append("")
        out.append(f"varying between runs of one release here (not changes between releases): {len(shown)}")
        out += [f"  {case_id} [{aspect}]: {why}" for (case_id, aspect), why in shown[:40]]
    return out


def history_rows(h: History) -> list[dict[str, Any]]:
    """Every hop's rows as plain dicts, each naming its hop (``--json``)."""
    out = []
    for hop in h.hops:
        for d in rows_as_dicts(hop):
            out.append({"hop": f"{hop.old.label} -> {hop.new.label}", **d})
    return out


__all__ = ["History", "Release", "by_action", "history", "history_rows", "render_history"]
