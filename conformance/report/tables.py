"""The report's tables, declared once: a new table is one build function and one row of :data:`TABLES`.

A :class:`Table` row names the Parquet table (``tables/<name>``), the function that builds it from
the cached inputs (:class:`Frames`, a ``DataFrame -> DataFrame`` plan, no action), what the page
collects of it (``view``: bounded frames, gathered by the pipeline in one collect) and the page
section that shows it. The page's sections come in the order of the first table naming them.

Builds reach other tables through ``frames[name]`` (memoised and cached, so a table several
others derive from is planned and computed once).
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from conformance.model.spec import Rule, load_rules
from conformance.model.verdicts import ACTION_ORDER
from conformance.report import (
    aggregates,
    cluster,
    compliance,
    edges,
    history,
    power,
    routing_table,
    rule_coverage,
    tx_inference,
    tx_table,
    upgrade,
)
from conformance.report.gather import Collect as Collect

_T = TypeVar("_T")

# Bounds on what the page and the summary show (the Parquet tables hold everything).
MAX_BROKERS = 200  # broker versions in the summary table / summary.json
MAX_MATRIX_BROKERS = 30  # most recent broker versions shown as matrix columns
MAX_MATRIX_CASES = 400
MAX_CHART_BROKERS = 24
MAX_TX_BROKERS = 24
MAX_ROWS = 200  # flaky cases, regressions, malformed lines
MAX_TREND_RUNS = 300  # runs on the score trend
MAX_MUTATION_BROKERS = 6  # most recent targets of mutation runs on the suite-power section
MAX_MUTANTS = 500  # per target
MAX_KILLS_SHOWN = 12  # killing cases listed per mutant (the table holds all)
MAX_TRACE_CHARS = 20_000  # of one cell's frame trace on the page (the table keeps it whole)
MAX_TIMELINE_RUNS = 6  # most recent faults runs plotted on the cluster section
MAX_TIMELINE_ROWS = 2_000  # buckets / events per plotted run
MAX_PER_RUN = MAX_TIMELINE_RUNS * MAX_TIMELINE_ROWS
PER_RUN = ("run_id", "queue_type", "t")


def count_of(df: DataFrame) -> Collect:
    return Collect(df.agg(F.count(F.lit(1)).alias("n")), 1, lambda rs: int(rs[0]["n"]))


def column_of(df: DataFrame, column: str, limit: int) -> Collect:
    return Collect(df.select(column), limit, lambda rs: [r[column] for r in rs])


class Frames:
    """The inputs every table is built from, and the tables built so far (by name).

    Safe to use from several threads (the small-input report builds its tables in lanes): each
    table and derived input is built once, by the first thread asking for it; another thread
    asking meanwhile waits for it.
    """

    def __init__(self, spark: SparkSession, loaded: edges.Loaded, *, small: bool = False) -> None:
        self.spark = spark
        self.loaded = loaded
        # A small input (one run) is computed in one action over one plan: nothing is read twice
        # across actions, so nothing is cached. Every input frame is then one partition: one
        # partition satisfies every distribution an aggregate, window or join asks for, so the
        # plan needs no shuffle at all where it would otherwise need dozens (each a stage).
        self.small = small
        self.persist = not small
        self._built: dict[str, DataFrame] = {}
        self._memo: dict[str, object] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self.all_results = self.local(loaded.results)
        # What the tables read of the rows: the input's aggregates (a store keeps them), else
        # those of the rows (aggregates.Partials: the same stages either way). Mutation runs are
        # another kind of run: the partials of compliance, flaky cases and regressions leave them
        # out; only the suite-power tables read them.
        self.partials: aggregates.Partials | aggregates.LazyPartials = (
            loaded.partials or aggregates.LazyPartials(self.all_results, self._once))

    def _once(self, key: str, make: Callable[[], _T]) -> _T:
        """``make()``, called once for ``key`` whatever the threads (no cycle between keys)."""
        with self._locks_lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                self._memo[key] = make()
            return self._memo[key]  # type: ignore[return-value]

    def local(self, df: DataFrame) -> DataFrame:
        """``df`` as one lazily checkpointed partition for a small input (see ``small``); as it
        is otherwise.

        The action that first reads a checkpoint stores its one block; every plan that reads
        ``df`` starts from that block. So a table's derivation is planned once, not once per
        place it appears in the one action's plan (``latest``: about thirty), and rows held in
        a plan (the input, made from the driver's rows) are neither hashed at every comparison
        of plans nor serialised into every task that reads them.
        """
        return df.coalesce(1).localCheckpoint(eager=False) if self.small else df

    def __getitem__(self, name: str) -> DataFrame:
        def build() -> DataFrame:
            table = BY_NAME[name]
            if self.known_empty(name):
                # Empty whatever else the input holds: planning its derivation (and its view's)
                # would be JVM time for nothing (all of them: ~40 % of a one-run report's rule runs).
                empty = edges.local_frame(self.spark, [], recorded_schema(name))
                self._built[name] = empty
                return empty
            # Computed once either way: cached when persisting (its write computes it, the
            # tables derived from it and the page's views read it from memory); for a small
            # input checkpointed, so the plans of the tables and views derived from it start
            # from its block instead of repeating (and re-planning) its whole derivation.
            df = table.build(self)
            built = df.persist(StorageLevel.MEMORY_AND_DISK) if self.persist else self.local(df)
            self._built[name] = built
            return built

        return self._once(f"table:{name}", build)

    def known_empty(self, name: str) -> bool:
        """Table ``name`` is empty, known from the input (its source holds nothing)."""
        return BY_NAME[name].source in self.loaded.known_empty

    def unpersist(self) -> None:
        if self.persist:
            for df in self._built.values():
                df.unpersist()

    @property
    def rules(self) -> list[Rule]:
        return self._once("rules", load_rules)

    @property
    def workload(self) -> DataFrame:
        """The ``faults`` records' lines (``value``); empty when no input had any."""
        lines = self.loaded.workload
        return self._once("workload", lambda: self.local(
            lines if lines is not None else cluster.empty_lines(self.spark)))

    @property
    def tx_seed(self) -> DataFrame:
        return self._once("tx_seed", lambda: self.local(edges.tx_seed_frame(self.spark)))

    @property
    def rules_frame(self) -> DataFrame:
        return self._once("rules_frame", lambda: self.local(edges.rules_frame(self.spark, self.rules)))

    @property
    def mutants(self) -> DataFrame:
        """This version's mutant catalogue."""
        return self._once("mutants", lambda: self.local(edges.mutants_frame(self.spark)))

    @property
    def tx_obs(self) -> DataFrame:
        return self._once("tx_obs", lambda: tx_inference.tx_observations(self["latest"]))

    def recent_brokers(self, n: int) -> DataFrame:
        """The ``n`` broker versions that ran last (one column, ``broker``)."""
        return self["brokers"].orderBy(F.col("last_ts").desc(), "broker").limit(n).select("broker")

    def among_recent(self, df: DataFrame, n: int) -> DataFrame:
        """Rows of ``df`` (of the normal runs' broker versions) whose broker is one of the ``n``
        most recent: all of them when there are no more than ``n`` (known from the driver's parse)."""
        if self.loaded.n_brokers is not None and self.loaded.n_brokers <= n:
            return df
        return df.join(F.broadcast(self.recent_brokers(n)), "broker", "left_semi")


View = Callable[[DataFrame, Frames], Mapping[str, Collect]]


@dataclass(frozen=True)
class Table:
    name: str  # tables/<name> (Parquet) and the key of its row count in summary.json
    label: str  # what progress lines call it
    build: Callable[[Frames], DataFrame]
    view: View | None = None  # what the page shows of it; None: the table only
    section: str | None = None  # the page section (and template) that shows it
    # The input that feeds it (edges.Loaded.known_empty): when that is known empty, so is the
    # table, whatever else the input holds (tests/unit/report/test_known_empty.py proves it for
    # each such table with its real derivation), and it is given its recorded schema instead.
    source: str | None = None


# ------------------------------------------------------------------------------------------ views


def brokers_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    ordered = df.orderBy(F.col("last_ts").desc(), "broker")
    return {
        "brokers": Collect(ordered, MAX_BROKERS),
        "n_brokers": count_of(df),
        "chart_brokers": column_of(ordered, "broker", MAX_CHART_BROKERS),
        "matrix_brokers": column_of(ordered, "broker", MAX_MATRIX_BROKERS),
    }


def scores_view(key: str, by: str) -> View:
    def view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
        return {key: Collect(f.among_recent(df, MAX_CHART_BROKERS).orderBy("broker", by), 10_000)}

    return view


def trend_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    # The trend: the most recent runs of every broker version, oldest first on the page.
    return {"scores_run": Collect(df.orderBy(F.col("ts").desc()), MAX_TREND_RUNS)}


def _action(verdict: Column) -> Column:
    """A verdict's place in ACTION_ORDER (0: act first), unknown ones last."""
    rank = F.create_map(*[F.lit(x) for i, v in enumerate(ACTION_ORDER) for x in (v.value, i)])
    return F.coalesce(rank[verdict], F.lit(len(ACTION_ORDER)))


def _status_rank() -> Column:
    return (F.when(F.col("status") == "UNDOCUMENTED", 0).when(F.col("status") == "documented", 1)
            .otherwise(2))


def matrix_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    matrix = f.among_recent(df, MAX_MATRIX_BROKERS)
    # Worst first: a case ranks by the verdict of its cells a reader must act on most (FAIL,
    # TIMEOUT, ERROR, NOT_RUN, then NON_STRICT, then the rest: ACTION_ORDER), then by how many cells
    # are not PASS, so a bounded matrix shows what needs acting on before what needs nothing.
    case_rank = (
        matrix.groupBy("case_id")
        .agg(F.min(_action(F.col("verdict"))).alias("worst"),
             F.count(F.when(F.col("verdict") != "PASS", 1)).alias("bad"))
        .orderBy("worst", F.col("bad").desc(), "case_id")
        .limit(MAX_MATRIX_CASES)
    )
    order = ("worst", F.col("bad").desc(), "case_id", "broker")
    shown = matrix.join(case_rank, "case_id").orderBy(*order).select(
        "case_id", "area", "level", "broker", "verdict", "expected", "observed", "message", "rules",
        "duration_s", "run_id",
        # Traces of non-PASS cells only, cut: the page stays small enough to open.
        F.when(F.col("verdict") != "PASS", F.substring("trace", 1, MAX_TRACE_CHARS)).alias("trace"),
    )
    return {
        "matrix": Collect(shown, MAX_MATRIX_CASES * MAX_MATRIX_BROKERS),
        "n_matrix_cases": count_of(df.select("case_id").distinct()),
        "routing_cells": routing_table.routing_cells(matrix, MAX_MATRIX_BROKERS),  # the routing section's
    }


def queue_types_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    # classic vs quorum side by side: differences first
    mine = f.among_recent(df, MAX_MATRIX_BROKERS)
    return {"queue_types": Collect(mine.orderBy(F.col("differs").desc(), "base_id", "broker"), MAX_ROWS)}


def _timeline_runs(f: Frames) -> DataFrame:
    return f["cluster_runs"].orderBy(F.col("ts").desc(), "run_id").limit(MAX_TIMELINE_RUNS)


def cluster_runs_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    return {"cluster_runs": Collect(_timeline_runs(f), MAX_TIMELINE_RUNS)}


def cluster_view(key: str, order: tuple[str, ...], limit: int) -> View:
    def view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
        if "run_id" in order:  # per-run rows: of the plotted runs only
            df = df.join(F.broadcast(_timeline_runs(f).select("run_id", "queue_type")),
                         ["run_id", "queue_type"], "left_semi")
        return {key: Collect(df.orderBy(*order), limit)}

    return view


def tx_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    return {"tx": Collect(f.among_recent(df, MAX_TX_BROKERS).orderBy("broker", "row_order"), 10_000)}


def profile_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    mine = f.among_recent(df, MAX_BROKERS).orderBy("broker", "rank")
    return {"profile": Collect(mine, MAX_BROKERS * len(tx_table.COLUMNS))}


def rules_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    return {"rules": Collect(rule_coverage.rules_summary(df).orderBy("rule_id"), 1_000)}


def flaky_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    return {
        "flaky": Collect(df.orderBy(F.col("n_runs").desc(), "broker", "case_id"), MAX_ROWS),
        "n_flaky": count_of(df),
    }


def upgrade_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    return {
        # worst first: by the new verdict (ACTION_ORDER), UNDOCUMENTED before documented; not stable
        # (no change between releases) after every change
        "upgrade": Collect(df.orderBy("candidate", F.col("status") == "not stable",
                                      _action(F.col("new_verdict")), _status_rank(), "case_id"), MAX_ROWS),
        "upgrade_status": Collect(
            df.groupBy("status").count(), 10, lambda rs: {r["status"]: r["count"] for r in rs}
        ),
    }


def regressions_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    return {
        "regressions": Collect(df.orderBy("kind", "candidate", "case_id"), MAX_ROWS),
        "regression_kinds": Collect(
            df.groupBy("kind").count(), 1_000, lambda rs: {r["kind"]: r["count"] for r in rs}
        ),
    }


def malformed_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    return {"malformed": Collect(df.orderBy("file", "line"), MAX_ROWS), "n_malformed": count_of(df)}


def _mutation_brokers(f: Frames) -> DataFrame:
    mutants = f["mutants"].where(F.col("latest"))
    return (
        mutants.groupBy("broker").agg(F.max("ts").alias("ts"))
        .orderBy(F.col("ts").desc(), "broker").limit(MAX_MUTATION_BROKERS)
    )


def mutants_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    """The suite-power section's data: each broker's latest outcome per mutant."""
    brokers = _mutation_brokers(f)
    mine = df.where(F.col("latest")).join(F.broadcast(brokers.select("broker")), "broker", "left_semi")
    shown = mine.select(
        "broker", "mutate_session", "mutant", "category", "should", "equivalent", "outcome", "n_cases",
        "n_kills", F.slice("kills", 1, MAX_KILLS_SHOWN).alias("kills"), "errors", "problem", "ts",
    ).orderBy("broker", "category", "mutant")
    return {
        "mutation_brokers": column_of(brokers, "broker", MAX_MUTATION_BROKERS),
        "mutants": Collect(shown, MAX_MUTANTS * MAX_MUTATION_BROKERS),
    }


def mutation_scores_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    brokers = _mutation_brokers(f).select("broker")
    mine = df.join(F.broadcast(brokers), "broker", "left_semi").orderBy("broker", "category")
    return {"mutation_scores": Collect(mine, 10_000)}


def mutation_cases_view(df: DataFrame, f: Frames) -> Mapping[str, Collect]:
    return {"n_mutation_cases": count_of(df)}


# --------------------------------------------------------------------------------------- registry

TABLES: tuple[Table, ...] = (
    Table("latest", "latest verdicts", lambda f: compliance.latest_final(f.partials.latest)),
    Table("history", "case history", lambda f: history.history_final(f.partials.history)),
    Table("brokers", "broker summary",
          lambda f: compliance.broker_summary_of(f.partials.broker_runs, f["latest"]),
          brokers_view, "summary"),
    Table("scores_area", "scores per area", lambda f: compliance.scores(f["latest"], "area"),
          scores_view("scores_area", "area"), "plot"),
    Table("scores_level", "scores per level", lambda f: compliance.scores(f["latest"], "level"),
          scores_view("scores_level", "level"), "plot"),
    Table("scores_run", "scores per run", lambda f: f.partials.run_scores, trend_view, "trend"),
    Table("matrix", "compliance matrix", lambda f: compliance.compliance_matrix(f["latest"]),
          matrix_view, "matrix"),
    Table("queue_types", "queue types", lambda f: compliance.queue_type_matrix(f["latest"]),
          queue_types_view, "queue-types"),
    Table("cluster_runs", "faults runs", lambda f: cluster.fault_runs(f.workload), cluster_runs_view,
          "cluster", source="workload"),
    Table("cluster_faults", "faults per queue type and nemesis",
          lambda f: cluster.fault_summary(f["cluster_runs"]),
          cluster_view("cluster_faults", ("broker", "queue_type", "nemesis"), MAX_ROWS), "cluster",
          source="workload"),
    Table("cluster_timeline", "faults timeline", lambda f: cluster.fault_timeline(f.workload),
          cluster_view("cluster_timeline", PER_RUN, MAX_PER_RUN), "cluster", source="workload"),
    Table("cluster_events", "faults nemesis events", lambda f: cluster.fault_events(f.workload),
          cluster_view("cluster_events", PER_RUN, MAX_PER_RUN), "cluster", source="workload"),
    Table("cluster_cases", "cluster area verdicts", lambda f: cluster.cluster_cases(f["latest"]),
          cluster_view("cluster_cases", ("case_id", "broker"), MAX_MATRIX_CASES), "cluster"),
    Table("tx_table", "tx table", lambda f: tx_inference.tx_comparison(f.tx_obs, f.tx_seed), tx_view, "tx"),
    Table("profile_inference", "profile inference",
          lambda f: tx_inference.profile_inference(f.tx_obs, f.tx_seed), profile_view, "profile"),
    Table("rule_coverage", "rule coverage",
          lambda f: rule_coverage.rule_coverage(f.rules_frame, f["latest"]),
          rules_view, "rules"),
    Table("flaky", "flaky cases", lambda f: history.flaky_cases(f["history"]), flaky_view, "flaky",
          source="second_run"),
    Table("regressions", "regressions", lambda f: history.release_regressions(f["latest"]),
          regressions_view, "regressions", source="second_version"),
    Table("upgrade", "upgrade changes", lambda f: upgrade.upgrade_changes(f["latest"]), upgrade_view,
          "upgrade", source="second_version"),
    Table("mutation_cases", "mutation cases",
          lambda f: power.mutation_cases(f.partials.mutation_rows, f.mutants),
          mutation_cases_view, "power", source="mutation"),
    Table("mutants", "mutants", lambda f: power.mutant_outcomes(f["mutation_cases"]), mutants_view, "power",
          source="mutation"),
    Table("mutation_scores", "mutation scores", lambda f: power.mutation_scores(f["mutants"]),
          mutation_scores_view, "power", source="mutation"),
    Table("malformed", "malformed lines", lambda f: f.loaded.malformed, malformed_view, "malformed"),
)

BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}

# Every table's Spark schema as its derivation gives it, and the page's view of each table that can
# be known empty (Table.source) when it is (tests/unit/report/test_known_empty.py checks both against
# the derivations; ``UPDATE_TABLE_SCHEMAS=1`` there rewrites the file).
SCHEMAS_FILE = Path(__file__).with_name("table_schemas.json")


@cache
def _recorded() -> dict[str, Any]:
    return dict(json.loads(SCHEMAS_FILE.read_text(encoding="utf-8")))


def recorded_schema(name: str) -> T.StructType:
    return T.StructType.fromJson(_recorded()["schemas"][name])


def empty_view(name: str) -> dict[str, Any]:
    """What the page shows of table ``name`` when it is known empty (its view's value then): a
    copy, the recorded values are shared by every report of the process."""
    return copy.deepcopy(_recorded()["empty_views"][name])


def sections() -> list[str]:
    """The page's sections in order: the first table naming each section places it."""
    return list(dict.fromkeys(t.section for t in TABLES if t.section is not None))
