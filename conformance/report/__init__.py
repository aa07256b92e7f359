"""The compliance report pipeline (PySpark): results JSONL → Parquet tables, summary.json, index.html.

``build_report`` is the entry point for ``amqp-conformance run``; the ``report``, ``gate`` and
``bench`` commands live in :mod:`conformance.report.cli`. PySpark is imported lazily so that
importing this package costs nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conformance.report.session import EarlySession

__all__ = ["build_report", "check_inputs", "start_session_early"]


def start_session_early(master: str | None = None) -> EarlySession:
    """Start the report's SparkSession in a background thread (JVM start-up overlapping the suite).

    ``run`` calls this when the report will be built (never under ``--no-report``) and hands the
    handle to :func:`build_report`; the caller stops it with ``.stop()`` if no report follows.
    """
    from conformance.report.session import EarlySession

    return EarlySession(master)


def check_inputs(inputs: list[str]) -> None:
    """Raise InputProblem for inputs no report can use (missing, empty, no record at all, not a
    store): plain Python, no pyspark import, no JVM."""
    from conformance.report.inputs import check_contents, resolve_inputs, split_inputs

    plain, stores = split_inputs(inputs)
    if plain or not stores:
        check_contents(resolve_inputs(plain))
    if stores:
        from conformance.report.store import read_manifest

        for s in stores:
            read_manifest(s)


def _active_session() -> bool:
    """A SparkSession is already running in this process (a caller's, kept running)."""
    sql = sys.modules.get("pyspark.sql")  # not imported: no session can be running
    return sql is not None and sql.SparkSession.getActiveSession() is not None


LAUNCH_WAIT = 60.0  # seconds; a bound only: the launch follows a few imports and a cached Java check


def build_report(
    inputs: list[str],
    out_dir: Path,
    *,
    master: str | None = None,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    session: EarlySession | None = None,
) -> dict[str, Any]:
    """Build the report for ``inputs`` (files, folders, globs) into ``out_dir``; return the summary.

    ``session``: a session started early (:func:`start_session_early`); it is used and stopped.

    Raises :class:`conformance.report.edges.InputProblem` for unusable inputs and
    :class:`conformance.report.session.EnvironmentProblem` when Java 17+ is missing.
    """
    from conformance.extras import missing_extra
    from conformance.report.session import EnvironmentProblem

    problem = missing_extra("report", "the compliance report")
    if problem is not None:
        # `run` prints this line and keeps the results; `run --no-report` needs no extra.
        raise EnvironmentProblem(problem)
    try:
        check_inputs(inputs)  # fail on bad inputs before paying for a JVM
        from conformance.report.inputs import are_small
        from conformance.report.session import EarlySession, spark_session

        if session is None and not _active_session():
            if progress is not None:
                progress("report: starting Spark")
            # The JVM starts in the background while the pipeline's modules are imported and a
            # small input's records are parsed.
            session = EarlySession(master, small_input=are_small(inputs))
            # The pipeline's imports (pyarrow, jinja2, …) and the parsing wait for the JVM's
            # launch: before it, they would only slow down the Python work that leads to it.
            session.launching.wait(LAUNCH_WAIT)
        from conformance.report.pipeline import run_report

        if session is not None:
            # Spark stops while the page is rendered (build_report waits for it below).
            return run_report(session, inputs, Path(out_dir), name=name, progress=progress,
                              release=lambda: session.stop(wait=False))
        with spark_session(master) as spark:  # the active one: kept running afterwards
            return run_report(spark, inputs, Path(out_dir), name=name, progress=progress)
    finally:
        if session is not None:
            session.stop()
