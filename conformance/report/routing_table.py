"""The routing table per broker: which of the table's matching rules (``profiles/routing.toml``,
the ``routing.*`` cases) each broker breaks, with expected vs observed, beside the oracle cases.

No table of its own in the pipeline: the matrix table's ``routing.*`` cells of the matrix's
brokers, brought to the driver as one more frame of the page's one gather (the view's
``routing_cells``, :func:`routing_cells`: no Spark job of its own). Not the page's matrix rows:
those are bounded (``MAX_MATRIX_CASES``, non-PASS cases first), so in a run of more cases than
that the PASS routing rows were left out. A row still missing from ``routing_cells`` (its own,
far larger bound) is counted as not in the view, never as passed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from conformance.model.routing_table import describe, expectation, rows
from conformance.report.gather import Collect

PREFIX = "routing."
# routing.* cases per broker version routing_cells brings at most (the table has ~130 rows, the
# oracle 9 cases; [quorum] twins double them): far above them, a bound all the same.
MAX_ROUTING_CASES = 1_000
CELL_COLUMNS = ("case_id", "broker", "verdict", "expected", "observed", "message")


def routing_cells(matrix: DataFrame, brokers: int) -> Collect:
    """The ``routing.*`` cells of ``matrix`` (the matrix table's rows of the page's ``brokers``
    broker versions), the columns the section shows; unordered (the section sorts them)."""
    cells = matrix.where(F.col("case_id").startswith(PREFIX)).select(*CELL_COLUMNS)
    return Collect(cells, MAX_ROUTING_CASES * brokers)


def routing_context(summary: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    table = {r.case_id: r for r in rows()}
    cells: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for m in view.get("routing_cells", ()):
        if str(m["case_id"]).startswith(PREFIX):
            cells[m["broker"]][m["case_id"]] = m
    by_broker = []
    for broker in view.get("matrix_brokers", ()):
        seen = cells.get(broker, {})
        if not seen:
            continue
        broken = []
        for case_id, m in sorted(seen.items()):
            if m["verdict"] in ("PASS", "UNSUPPORTED", "INFORMATIONAL"):
                continue
            row = table.get(case_id)
            broken.append({
                "case_id": case_id, "family": row.family if row else "oracle",
                "rule": describe(row) if row else "generated bindings and messages (the routing oracle)",
                "expected": expectation(row) if row else m.get("expected"), "verdict": m["verdict"],
                "observed": m.get("observed") or m.get("message") or "",
            })
        verdicts = [m["verdict"] for m in seen.values()]
        by_broker.append({
            "broker": broker, "broken": broken,
            "passed": verdicts.count("PASS"), "unsupported": verdicts.count("UNSUPPORTED"),
            "rows_seen": sum(1 for c in seen if c in table), "rows": len(table),
            "oracle_seen": sum(1 for c in seen if c not in table),
        })
    return {"by_broker": by_broker}
