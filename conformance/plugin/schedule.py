"""The order the suite's cases run in, and how xdist hands them to the workers: the waiting cases
spread over the run, the longest first among them, one case at a time.

A run's time goes into two kinds of case. A few wait (a silence window no event can end, a TTL,
a broker restart: docs/waits.md) and use no CPU meanwhile; the many others compute (the client's
and the broker's work for a handful of round trips) and on 2 cores compete for them. Run longest
first (the order before), every worker sat in a wait at once at the start — the CPU idle for
seconds, measured (2026-12-02, 4 workers on 2 cores: 3.5 s of an 11.4 s span under 20 % busy) —
and then every worker computed at once at the end, each at half speed. So the waiting cases
(``WAITING_SECONDS`` or more in ``conformance/data/case_seconds.json``, one figure a case from a
run's records) are spread among the others: the longest waits first, each placed after an equal
share of the computing cases' measured seconds (``SPREAD`` of them in all), so a wait overlaps
other workers' computing and the shortest waits come last. xdist sends
one case at a time (``maxschedchunk`` 1): a worker that is done takes the next case instead of
waiting with a chunk queued behind a slow one.

A case the table does not know (added since it was recorded, another queue type's run) counts as
the table's median. The order is a pure function of the collection and the table, so every xdist
worker computes the same one. Re-record the table from a run against the reference broker::

    python -m conformance.plugin.seconds_table reports/results/<run>.jsonl

``tests/unit/test_schedule.py`` keeps it in step with the catalogue (no id that is not a case).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from typing import Any

TABLE = "case_seconds.json"


@cache
def case_seconds() -> dict[str, float]:
    """The measured seconds of each case (setup + call + teardown), by run id."""
    text = resources.files("conformance.data").joinpath(TABLE).read_text(encoding="utf-8")
    data = json.loads(text)
    return {str(k): float(v) for k, v in data["seconds"].items()}


#: a case measured at this many seconds or more is a waiting one (the longest computing cases
#: take ~0.4 s: hundreds of round trips; the windows are 0.5 s and 1 s)
WAITING_SECONDS = 0.45
#: the waiting cases are placed within this share of the computing cases' seconds: all of them
#: (the i-th of n after i/n of them), the shortest waits last. Measured (2026-12-02, 540 cases,
#: -n 6, 2 cores, suite seconds, two runs each): 1.0 → 11.8 / 12.2, 0.85 → 12.6 / 12.6
SPREAD = 1.0


def waits_spread(items: list[Any], run_id: Callable[[Any], str | None]) -> None:
    """Reorder ``items`` in place: the computing cases longest first, the waiting ones (longest
    first) spread evenly among them — the i-th placed once the computing cases before it add up
    to i equal shares of :data:`SPREAD` of their measured seconds, so the waits overlap the
    computing all through the run —, then what is not a case.
    ``run_id`` gives an item's case id in this run's results (None: not a case)."""
    table = case_seconds()
    default = statistics.median(table.values()) if table else 0.0
    cases: list[tuple[float, int, Any]] = []
    others = []
    for index, item in enumerate(items):
        rid = run_id(item)
        if rid is None:
            others.append(item)
        else:
            cases.append((table.get(rid, default), index, item))
    cases.sort(key=lambda c: (-c[0], c[1]))  # longest first; equal figures keep their order
    waiting = [c for c in cases if c[0] >= WAITING_SECONDS]
    computing = [c for c in cases if c[0] < WAITING_SECONDS]
    step = SPREAD * sum(c[0] for c in computing) / len(waiting) if waiting else 0.0
    order: list[Any] = []
    computed = 0.0  # the measured seconds of the computing cases placed so far
    placed = 0  # waiting cases placed so far
    for c in computing:
        while placed < len(waiting) and computed >= placed * step:
            order.append(waiting[placed][2])
            placed += 1
        order.append(c[2])
        computed += c[0]
    order += [c[2] for c in waiting[placed:]]
    items[:] = order + others


def one_at_a_time(config: Any) -> None:
    """xdist's ``load`` scheduler, one case a send (unless ``--maxschedchunk`` was given)."""
    option = config.option
    if getattr(option, "dist", None) == "load" and getattr(option, "maxschedchunk", 0) is None:
        option.maxschedchunk = 1


def table_from_records(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    seconds = {r["case_id"]: round(float(r.get("duration_s") or 0.0), 2) for r in records}
    return {
        "about": "seconds per case (setup + call + teardown) from one run's records; the suite spreads "
                 "the waiting cases among the computing ones (conformance/plugin/schedule.py). "
                 "Re-record: python -m conformance.plugin.seconds_table reports/results/<run>.jsonl",
        "seconds": dict(sorted(seconds.items())),
    }
