"""The suite's order: the waiting cases spread among the computing ones (conformance/plugin/schedule.py),
and its table of measured seconds in step with the catalogue."""

from __future__ import annotations

import statistics
from types import SimpleNamespace

from conformance.plugin import schedule
from conformance.scenarios import all_cases


def test_the_table_names_only_cases_of_the_catalogue() -> None:
    ids = {c.id for c in all_cases()}
    stale = sorted(set(schedule.case_seconds()) - ids)
    assert stale == [], f"re-record {schedule.TABLE}: python -m conformance.plugin.seconds_table"


def test_the_table_covers_most_of_the_catalogue() -> None:
    ids = {c.id for c in all_cases()}
    assert len(set(schedule.case_seconds()) & ids) >= 0.8 * len(ids)


def test_waits_spread_among_the_computing_cases_unknown_as_the_median_non_cases_last() -> None:
    table = schedule.case_seconds()
    items = [None, *sorted(table), "new.case-not-measured"]
    schedule.waits_spread(items, lambda i: i)
    assert items[-1] is None and sorted(items[:-1]) == sorted([*table, "new.case-not-measured"])
    seconds = [table.get(i, statistics.median(table.values())) for i in items[:-1]]
    waiting = [n for n, s in enumerate(seconds) if s >= schedule.WAITING_SECONDS]
    computing = [s for s in seconds if s < schedule.WAITING_SECONDS]
    assert len(waiting) >= 10  # the table has waiting cases to spread
    # the longest wait first, the waits longest first among themselves, the computing ones too
    assert waiting[0] == 0 and seconds[0] == max(seconds)
    assert [seconds[n] for n in waiting] == sorted((seconds[n] for n in waiting), reverse=True)
    assert computing == sorted(computing, reverse=True)
    # spread: the i-th wait comes once the computing cases before it add up to i shares of them
    share = schedule.SPREAD * sum(computing) / len(waiting)
    for i, n in enumerate(waiting):
        before = sum(s for s in seconds[:n] if s < schedule.WAITING_SECONDS)
        assert before >= i * share - 1e-9, (i, n, before)
    assert waiting[-1] > 0.5 * len(items)  # the last waits are not all at the start


def test_one_case_a_send_for_xdist_load_only() -> None:
    load = SimpleNamespace(option=SimpleNamespace(dist="load", maxschedchunk=None))
    schedule.one_at_a_time(load)
    assert load.option.maxschedchunk == 1
    given = SimpleNamespace(option=SimpleNamespace(dist="load", maxschedchunk=5))
    schedule.one_at_a_time(given)
    assert given.option.maxschedchunk == 5
    group = SimpleNamespace(option=SimpleNamespace(dist="loadgroup", maxschedchunk=None))
    schedule.one_at_a_time(group)
    assert group.option.maxschedchunk is None


def test_table_from_records() -> None:
    t = schedule.table_from_records([{"case_id": "b", "duration_s": 1.234},
                                     {"case_id": "a", "duration_s": 0.1}])
    assert list(t["seconds"].items()) == [("a", 0.1), ("b", 1.23)]
