"""Which RabbitMQ release does a broker behave like? For a broker that reports no RabbitMQ version
(garagemq, the reference broker, LavinMQ, …), the observed values of the release-keyed cases (kept in
each record's ``extra.release_keyed`` under profile rabbitmq) judged against every verified release's
expected values (:mod:`conformance.profiles.releases`): the counts per release, and the best.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from conformance.profiles.releases import BASIS_DEFAULT, expected_on, verified_releases

#: the record ``extra`` key the plugin keeps a release-keyed case's values under
RELEASE_KEYED = "release_keyed"


@dataclass(frozen=True)
class Likeness:
    broker: str  # product@version
    counts: tuple[tuple[str, int, int], ...]  # (release, cases matching it, cases judged on it)

    @property
    def best(self) -> tuple[str, ...]:
        """The releases matched by the largest share of the cases judged on them (ties: all)."""
        def share(c: tuple[str, int, int]) -> float:
            return c[1] / c[2] if c[2] else 0.0

        top = max((share(c) for c in self.counts), default=0.0)
        return tuple(r for r, m, n in self.counts if n and share((r, m, n)) == top)

    def line(self) -> str:
        per = ", ".join(f"{r} {m}/{n}" for r, m, n in self.counts)
        judged = max((n for _r, _m, n in self.counts), default=0)
        return (f"{self.broker} behaves most like RabbitMQ {' / '.join(self.best)}: of its {judged} "
                f"release-keyed case(s), matching each release's expected values: {per}")


def agrees(observed: Any, expected: Any) -> bool:
    """Does ``observed`` meet ``expected`` as the case compares it: equal, or (an outcome in short
    form against a pattern or patterns, as check_outcome compares) matched by one of them."""
    if observed == expected:
        return True
    patterns = expected if isinstance(expected, list) else [expected]
    return isinstance(observed, str) and all(isinstance(p, str) for p in patterns) and any(
        fnmatch.fnmatchcase(observed, p) for p in patterns)


def _base_id(case_id: str) -> str:
    return case_id.split("[", 1)[0]


def likeness(records: Iterable[Mapping[str, Any]], releases: tuple[str, ...] | None = None) -> list[Likeness]:
    """One :class:`Likeness` per broker (product@version) that reports no RabbitMQ version
    (``release_basis`` default) and ran release-keyed cases under profile rabbitmq; the last record
    of a case counts (a case rerun in a folder of runs)."""
    releases = releases if releases is not None else verified_releases()
    kept: dict[str, dict[tuple[str, str | None], dict[str, Any]]] = {}
    for rec in records:
        if rec.get("release_basis") != BASIS_DEFAULT:
            continue
        extra = rec.get("extra")
        value = extra.get(RELEASE_KEYED) if isinstance(extra, dict) else None
        if not isinstance(value, dict) or "observed" not in value:
            continue
        broker = f"{rec.get('broker_product')}@{rec.get('broker_version')}"
        kept.setdefault(broker, {})[(_base_id(str(rec.get("case_id"))), rec.get("queue_type"))] = value
    out = []
    for broker, cases in sorted(kept.items()):
        counts = []
        for release in releases:
            matched = judged = 0
            for (case_id, queue_type), value in cases.items():
                runs, expected = expected_on(case_id, queue_type, release, value.get("own"))
                if not runs:
                    continue
                judged += 1
                matched += agrees(value["observed"], expected)
            counts.append((release, matched, judged))
        out.append(Likeness(broker, tuple(counts)))
    return out
