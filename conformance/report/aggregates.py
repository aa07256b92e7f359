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
from conformance.report.schema import RESULTS_COLUMNS

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


def partials_of(all_results: DataFrame) -> Partials:
    """The partials of a set of valid result rows (mutation runs included)."""
    normal = parsing.normal_runs(all_results)
    return Partials(
        latest=compliance.latest_partial(normal),
        history=history.history_partial(normal),
        broker_runs=compliance.broker_runs_partial(normal),
        run_scores=compliance.run_scores(normal),
        mutation_rows=power.mutation_runs(all_results).select(*RESULTS_COLUMNS),
    )


def merge(parts: list[Partials]) -> Partials:
    """One :class:`Partials` of several, each over a disjoint set of runs."""
    if len(parts) == 1:
        return parts[0]
    return Partials(**{n: MERGE[n](_union([getattr(p, n) for p in parts])) for n in NAMES})
