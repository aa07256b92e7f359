"""The mergeable aggregates every table that reads result rows derives from.

The tables need the raw rows only through a few bounded aggregates (:class:`Partials`): the
latest execution per broker version × case, the history per case × broker build, the runs per
broker version, the score per run, and the mutation runs' rows (few). Each is a ``*_partial``
stage (:mod:`conformance.report.compliance`, :mod:`conformance.report.history`) over a set of rows,
``*_merge`` folds partials of disjoint sets of runs into one, ``*_final`` gives the table
(:mod:`conformance.report.tables`).

So the report from files is ``final(partial(rows))`` and the report from a results store is
``final(merge(stored partials ∪ partials of the ingests that lack them))`` — the same functions.
The store keeps each ingest's partials beside its rows (:mod:`conformance.report.store`), computed
at ingest; a store's ingests hold disjoint runs (it is idempotent by run id), so counts of runs add.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from pyspark.sql import DataFrame

from conformance.report import compliance, history, parsing, power
from conformance.report.schema import BROKER_KEYS, RESULTS_COLUMNS

# The version of the partials' definitions a store's ingest records: an ingest whose partials
# are of another version (or that has none) gets them computed from its rows at report time.
VERSION = 1


@dataclass(frozen=True)
class Partials:
    latest: DataFrame  # compliance.latest_partial
    history: DataFrame  # history.history_partial
    broker_runs: DataFrame  # compliance.broker_runs_partial
    run_scores: DataFrame  # compliance.run_scores: a run lives in one set of rows, final already
    mutation_rows: DataFrame  # the mutation runs' rows (RESULTS_COLUMNS), for the suite-power tables

    def items(self) -> list[tuple[str, DataFrame]]:
        return [(f.name, getattr(self, f.name)) for f in fields(self)]


NAMES: tuple[str, ...] = tuple(f.name for f in fields(Partials))


def _union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def _identity(df: DataFrame) -> DataFrame:
    return df


MERGE: dict[str, Callable[[DataFrame], DataFrame]] = {
    "latest": compliance.latest_merge,
    "history": history.history_merge,
    "broker_runs": compliance.broker_runs_merge,
    "run_scores": _identity,  # runs are disjoint across the parts: their rows are final
    "mutation_rows": _identity,  # raw rows: the union is the merge
}


#: how each partial derives from the valid rows: ``(all rows, the normal runs' rows) -> partial``
PARTIAL_OF: dict[str, Callable[[DataFrame, DataFrame], DataFrame]] = {
    "latest": lambda _rows, normal: compliance.latest_partial(normal),
    "history": lambda _rows, normal: history.history_partial(normal),
    "broker_runs": lambda _rows, normal: compliance.broker_runs_partial(normal),
    "run_scores": lambda _rows, normal: compliance.run_scores(normal),
    "mutation_rows": lambda rows, _normal: power.mutation_runs(rows).select(*RESULTS_COLUMNS),
}


def partials_of(all_results: DataFrame) -> Partials:
    """The partials of a set of valid result rows (mutation runs included)."""
    normal = parsing.normal_runs(all_results)
    return Partials(**{n: PARTIAL_OF[n](all_results, normal) for n in NAMES})


def shared_groups(all_results: DataFrame) -> DataFrame:
    """The history partial (case × broker build) of the normal runs' rows of ``all_results``,
    with each group's latest execution (``last``):
    one shuffle of the rows for both. Its groups are finer than the latest's (broker version ×
    case), so the latest partial is the merge of these (:func:`partials_of_shared`). Bounded
    (the lists of executions are gone): persist it when both are read."""
    groups = history.history_groups(parsing.normal_runs(all_results), compliance.latest_last())
    return history.history_of_groups(groups, "last")


def partials_of_shared(all_results: DataFrame, groups: DataFrame) -> Partials:
    """:func:`partials_of`, the latest and the history partials derived from ``groups``
    (:func:`shared_groups` of ``all_results``)."""
    normal = parsing.normal_runs(all_results)
    made = {n: PARTIAL_OF[n](all_results, normal) for n in NAMES if n not in ("latest", "history")}
    # A history group's executions are its latest's: n_executions is the same count.
    latest = compliance.latest_merge(groups.select(*BROKER_KEYS, "case_id", "last", "n_executions"))
    return Partials(latest=latest, history=groups.drop("last"), **made)


class LazyPartials:
    """The partials of a set of rows, each planned when first read and then kept (``once(key,
    make)`` makes it once, whatever the threads): a one-run report plans its tables in lanes, and
    each partial is planned by the first lane that needs it, beside the others' work (planning
    all five before the lanes started was ~0.6 s of one core, the other idle)."""

    def __init__(self, all_results: DataFrame,
                 once: Callable[[str, Callable[[], DataFrame]], DataFrame]) -> None:
        self._rows = all_results
        self._once = once

    def _normal(self) -> DataFrame:
        return self._once("partials:normal", lambda: parsing.normal_runs(self._rows))

    def __getattr__(self, name: str) -> DataFrame:
        if name not in PARTIAL_OF:
            raise AttributeError(name)
        return self._once(f"partials:{name}", lambda: PARTIAL_OF[name](self._rows, self._normal()))


def merge(parts: list[Partials]) -> Partials:
    """One :class:`Partials` of several, each over a disjoint set of runs."""
    if len(parts) == 1:
        return parts[0]
    return Partials(**{n: MERGE[n](_union([getattr(p, n) for p in parts])) for n in NAMES})
