"""The results store: runs ingested once into a partitioned Parquet dataset, read by ``report``.

Every report used to re-parse every JSONL file it was given, so keeping history made each report
slower. ``amqp-conformance ingest RESULTS… --store DIR`` parses once and appends; ``report
--store DIR`` reads the columns it needs from Parquet.

Layout of DIR (a local folder, or one shared by every node of a cluster)::

    store.json                      the manifest: format, committed ingests, their runs and sources
    results/ingest=<id>/*.parquet   valid records (schema.RESULTS_COLUMNS), one partition per ingest
    malformed/ingest=<id>/*.parquet malformed lines kept aside (file, line, reason, value)
    aggregates/<name>/ingest=<id>/  the ingest's mergeable aggregates (conformance.report.aggregates),
                                    computed by Spark at ingest; the report reads these, not the rows

Commit protocol: an ingest writes its partitions (aggregates included) first and then replaces ``store.json``
atomically (write + rename). Readers take only the ingests the manifest lists, so an ingest
that died half-way is invisible, and the next ingest removes its leftovers. Idempotent by run
id: a run already in the manifest is never appended again, whichever file brings it; a source
file's malformed lines are kept once per (file, line).

Small, clean local inputs are ingested without Spark (:func:`ingest_without_spark`, pyarrow):
the same partition layout, columns, types and commit. A store written before the mutation
columns existed is still read (they are null in its older partitions) and is appended to. An
ingest without aggregates (written by :func:`ingest_without_spark`, or by a version before them:
its manifest entry has no ``aggregates``) gets them computed from its rows by each report.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from conformance.argparsing import command_parser
from conformance.report import aggregates, edges, parsing
from conformance.report.inputs import MANIFEST as MANIFEST
from conformance.report.inputs import is_store as is_store
from conformance.report.inputs import split_inputs as split_inputs
from conformance.report.schema import MALFORMED_SCHEMA, RESULTS_COLUMNS, RESULTS_COLUMNS_V1, RESULTS_STRUCT
from conformance.report.session import spark_session

FORMAT = 1
PARTITION = "ingest"
AGGREGATES = "aggregates"
AGGREGATE_FILES = 2
# In an ingest's result files, a column null for every record: where the ingest's one pass kept
# a malformed line's text and position (those lines go to malformed/). Readers read the
# results with the explicit schema, which does not name it.
ASIDE = "malformed_line"
PARSING = ".parsing-"  # DIR/.parsing-<id>/: an ingest's one pass, before it is sorted into the store
# The aggregates read an ingest's rows back in tasks of about this many rows. Its Parquet holds a
# few bytes a row (dictionary-encoded), so Spark's default split (128 MB) made tasks of ~20M rows,
# and the history partial's sort of those ran a 1 GB executor out of heap (100M rows on a
# standalone worker: the task failed 4 times). A split is no smaller than a Parquet row group: the
# results files are written with row groups of ROW_GROUP_BYTES.
ROWS_PER_TASK = 2_000_000
ROW_GROUP_BYTES = 8 << 20
_SPLIT_BYTES = (1 << 20, 128 << 20)


class StoreProblem(edges.InputProblem):
    """The store cannot be used (not a store, another format, …); one line to print."""


@dataclass(frozen=True)
class IngestSummary:
    ingest_id: str | None  # None: nothing new, nothing written
    files: int
    rows_added: int
    runs_added: tuple[str, ...]
    runs_skipped: tuple[str, ...]  # already in the store
    malformed_added: int
    seconds: float


def read_manifest(store: Path) -> dict[str, Any]:
    path = store / MANIFEST
    if not path.exists():
        return {"format": FORMAT, "columns": list(RESULTS_COLUMNS), "ingests": []}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreProblem(f"{path} is not a readable store manifest: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise StoreProblem(
            f"{path}: store format {manifest.get('format') if isinstance(manifest, dict) else '?'}"
            f" is not {FORMAT}; ingest into a new --store folder"
        )
    if list(manifest.get("columns", [])) not in (list(RESULTS_COLUMNS), list(RESULTS_COLUMNS_V1)):
        raise StoreProblem(
            f"{path}: the store's columns differ from this version's; ingest into a new --store folder"
        )
    # A store from before the mutation columns: its partitions read them as null (read_results).
    manifest["columns"] = list(RESULTS_COLUMNS)
    return manifest


def _commit(store: Path, manifest: dict[str, Any], ingest_id: str, files: Sequence[str],
            new_runs: dict[str, int], malformed: int, *, with_aggregates: bool = False) -> None:
    """Record the ingest in the manifest and write it: the commit point of both ingest paths."""
    entry: dict[str, Any] = {
        "id": ingest_id,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sources": [_display(f) for f in files],
        "runs": new_runs,
        "rows": sum(new_runs.values()),
        "malformed": malformed,
    }
    if with_aggregates:
        entry["aggregates"] = aggregates.VERSION
    manifest["ingests"].append(entry)
    _write_manifest(store, manifest)


def _write_manifest(store: Path, manifest: dict[str, Any]) -> None:
    tmp = store / f".{MANIFEST}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(store / MANIFEST)


def _uri(path: Path) -> str:
    return path.resolve().as_uri()


def _folder(path: Path) -> str:
    """A partition folder (``ingest=<id>``) for Spark: a plain absolute path, as a URI would
    escape its ``=`` and Hadoop would take the escape as part of the name."""
    return str(path.resolve())


def _remove_uncommitted(store: Path, committed: set[str]) -> None:
    """Partitions of ingests that never reached the manifest (a crash between write and commit)."""
    for parse in store.glob(f"{PARSING}*"):
        shutil.rmtree(parse, ignore_errors=True)
    tables = [store / "results", store / "malformed", *[_aggregate_dir(store, n) for n in aggregates.NAMES]]
    for folder in tables:
        if not folder.is_dir():
            continue
        for part in folder.glob(f"{PARTITION}=*"):
            if part.name.split("=", 1)[1] not in committed:
                shutil.rmtree(part, ignore_errors=True)


def ingest(spark: SparkSession, inputs: list[str], store: Path,
           progress: Callable[[str], None] | None = None) -> IngestSummary:
    """Append the runs of ``inputs`` (results files, folders, globs) that ``store`` lacks."""
    say = progress or (lambda _m: None)
    t0 = time.perf_counter()
    files = edges.resolve_inputs(inputs)
    manifest, known_runs = _open(store)

    lines = edges.read_lines(spark, files)
    parsed = parsing.parse_lines(lines)
    ingest_id = _new_ingest_id()
    part = store / "results" / f"{PARTITION}={ingest_id}"
    # ONE pass over the text: each line parsed once (the explicit schema, never inferred) and
    # written at once, split by whether it is a record: the records become the ingest's partition
    # (invisible until the commit), the malformed lines (rare; their text and position kept in
    # one column, null for a record) are numbered and kept aside from the few rows written. The
    # runs it brought are read back from the Parquet (one column); runs the store already has
    # are dropped from it then (a file ingested twice). A faults record is neither: ``ok`` null,
    # a folder of its own, removed with the rest of the pass.
    parse = store / f"{PARSING}{ingest_id}"  # removed by the next ingest if this one dies
    bad = F.col("reason").isNotNull()
    aside = F.when(bad, F.struct("file", "block_start", "row_id", "reason", "value")).alias(ASIDE)
    ok = F.when(~F.col("workload"), ~bad).alias("ok")
    say(f"ingest: parsing and writing the records of {len(files)} file(s)")
    (parsed.select(*RESULTS_COLUMNS, aside, ok).write
     .option("parquet.block.size", ROW_GROUP_BYTES).partitionBy("ok").parquet(_folder(parse)))
    part.parent.mkdir(parents=True, exist_ok=True)
    if (parse / "ok=true").is_dir():
        os.replace(parse / "ok=true", part)
    else:
        part.mkdir(parents=True)
    part, new_runs, skipped = _keep_new_runs(spark, store, part, known_runs, ingest_id)
    n_malformed, malformed = 0, None
    try:
        if (parse / "ok=false").is_dir():
            found = spark.read.parquet(_folder(parse / "ok=false")).select(f"{ASIDE}.*")
            malformed = parsing.with_line_numbers(found, parsing.split_stats(lines))
            committed = [ing["id"] for ing in manifest["ingests"] if ing["malformed"]]
            if committed:
                # A file ingested again (or grown) keeps each malformed line once.
                kept = (spark.read.parquet(_uri(store / "malformed"))
                        .where(F.col(PARTITION).isin(committed)).select("file", "line"))
                malformed = malformed.join(kept, ["file", "line"], "left_anti")
            malformed = malformed.select("file", "line", "reason", "value").cache()
            n_malformed = malformed.count()
        if not new_runs and not n_malformed:
            shutil.rmtree(part, ignore_errors=True)
            say(f"ingest: nothing new ({len(skipped)} run(s) already in the store)")
            return IngestSummary(None, len(files), 0, (), tuple(skipped), 0, time.perf_counter() - t0)
        if new_runs:
            say(f"ingest: wrote {sum(new_runs.values()):,} rows of {len(new_runs)} new run(s)")
            write_aggregates(spark, store, ingest_id, say, rows=sum(new_runs.values()))
        else:
            shutil.rmtree(part, ignore_errors=True)
        if malformed is not None and n_malformed:
            malformed.withColumn(PARTITION, F.lit(ingest_id)).coalesce(1).write.mode("append") \
                .partitionBy(PARTITION).parquet(_uri(store / "malformed"))
    finally:
        if malformed is not None:
            malformed.unpersist()
        shutil.rmtree(parse, ignore_errors=True)
    _commit(store, manifest, ingest_id, files, new_runs, n_malformed, with_aggregates=True)
    secs = time.perf_counter() - t0
    say(f"ingest: committed {ingest_id} in {secs:.1f}s")
    return IngestSummary(ingest_id, len(files), sum(new_runs.values()), tuple(sorted(new_runs)),
                         tuple(skipped), n_malformed, secs)


def ingest_rows(spark: SparkSession, rows: DataFrame, store: Path, source: str,
                progress: Callable[[str], None] | None = None) -> IngestSummary:
    """Append result rows made elsewhere (:data:`~conformance.report.schema.RESULTS_COLUMNS`,
    typed as the parse types them) as one ingest, with the same layout, aggregates, idempotence
    by run id and commit as :func:`ingest`; ``source`` names them in the manifest. The benchmark
    makes a 100M-row store this way, from generated rows instead of 60 GB of JSONL."""
    say = progress or (lambda _m: None)
    t0 = time.perf_counter()
    manifest, known_runs = _open(store)
    ingest_id = _new_ingest_id()
    part = store / "results" / f"{PARTITION}={ingest_id}"
    say(f"ingest: writing the rows of {source}")
    typed = [F.col(f.name).cast(f.dataType).alias(f.name) for f in RESULTS_STRUCT.fields]
    rows.select(*typed).write.option("parquet.block.size", ROW_GROUP_BYTES).parquet(_folder(part))
    _unmark(part)
    part, new_runs, skipped = _keep_new_runs(spark, store, part, known_runs, ingest_id)
    if not new_runs:
        shutil.rmtree(part, ignore_errors=True)
        say(f"ingest: nothing new ({len(skipped)} run(s) already in the store)")
        return IngestSummary(None, 1, 0, (), tuple(skipped), 0, time.perf_counter() - t0)
    say(f"ingest: wrote {sum(new_runs.values()):,} rows of {len(new_runs)} new run(s)")
    write_aggregates(spark, store, ingest_id, say, rows=sum(new_runs.values()))
    _commit(store, manifest, ingest_id, [source], new_runs, 0, with_aggregates=True)
    secs = time.perf_counter() - t0
    say(f"ingest: committed {ingest_id} in {secs:.1f}s")
    return IngestSummary(ingest_id, 1, sum(new_runs.values()), tuple(sorted(new_runs)), tuple(skipped), 0,
                         secs)


def _open(store: Path) -> tuple[dict[str, Any], set[str]]:
    """The store made ready for an ingest: its manifest, the runs it holds, and the leftovers of
    ingests that died before their commit removed."""
    store.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(store)
    _remove_uncommitted(store, {ing["id"] for ing in manifest["ingests"]})
    return manifest, {run for ing in manifest["ingests"] for run in ing["runs"]}


def _new_ingest_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


def _keep_new_runs(spark: SparkSession, store: Path, part: Path, known_runs: set[str], ingest_id: str
                   ) -> tuple[Path, dict[str, int], list[str]]:
    """The rows per run of the partition ``part`` just written (read back from the Parquet, one
    column), those of runs the store already has removed from it: (part, new runs, skipped)."""
    per_run = ({r["run_id"]: int(r["n"]) for r in spark.read.parquet(_folder(part)).groupBy("run_id")
                .agg(F.count(F.lit(1)).alias("n")).collect()} if any(part.glob("*.parquet")) else {})
    new_runs = {run: n for run, n in per_run.items() if run not in known_runs}
    skipped = sorted(run for run in per_run if run in known_runs)
    if skipped:
        part = _without_runs(spark, store, part, skipped, ingest_id)
    return part, new_runs, skipped


def _unmark(folder: Path) -> None:
    """Spark's ``_SUCCESS`` marker out of a partition folder (a dataset keeps it at its root)."""
    for marker in ("_SUCCESS", "._SUCCESS.crc"):
        (folder / marker).unlink(missing_ok=True)


def _without_runs(spark: SparkSession, store: Path, part: Path, runs: list[str], ingest_id: str) -> Path:
    """The partition ``part`` written again without ``runs`` (already in the store): rare, a file
    ingested twice. The same ingest id; the old folder removed."""
    staged = part.with_name(f"{part.name}.staged")
    os.replace(part, staged)
    run_ids = T.StructType([T.StructField("run_id", T.StringType())])
    known = edges.local_frame(spark, [(r,) for r in runs], run_ids)
    (spark.read.parquet(_folder(staged)).join(F.broadcast(known), "run_id", "left_anti")
     .select(*RESULTS_COLUMNS).write.option("parquet.block.size", ROW_GROUP_BYTES).mode("overwrite")
     .parquet(_folder(part)))
    _unmark(part)
    shutil.rmtree(staged, ignore_errors=True)
    return part


def write_aggregates(spark: SparkSession, store: Path, ingest_id: str,
                     say: Callable[[str], None] = lambda _m: None, *, rows: int) -> None:
    """The ingest's aggregates (:class:`~conformance.report.aggregates.Partials`), from the
    ``rows`` rows it just wrote (Parquet: only the columns they need are read back, in tasks of
    about :data:`ROWS_PER_TASK` rows), each under ``aggregates/<name>/ingest=<id>``. Before the
    commit: an ingest that dies here stays invisible."""
    t0 = time.perf_counter()
    key = "spark.sql.files.maxPartitionBytes"
    before = str(spark.conf.get(key))
    spark.conf.set(key, str(split_bytes(store / "results" / f"{PARTITION}={ingest_id}", rows)))
    groups = None
    try:
        results = read_results(spark, store).where(F.col(PARTITION) == ingest_id).select(*RESULTS_COLUMNS)
        # The latest and the history partials from one shuffle of the rows (kept, small, while
        # both are written).
        groups = aggregates.shared_groups(results).persist(StorageLevel.MEMORY_AND_DISK)
        for name, df in aggregates.partials_of_shared(results, groups).items():
            # Bounded (broker versions × cases, case × build, runs): a few files, not one per task.
            df.coalesce(AGGREGATE_FILES).withColumn(PARTITION, F.lit(ingest_id)).write.mode("append") \
                .partitionBy(PARTITION).parquet(_uri(_aggregate_dir(store, name)))
    finally:
        if groups is not None:
            groups.unpersist()
        spark.conf.set(key, before)
    say(f"ingest: aggregates written in {time.perf_counter() - t0:.1f}s")


def split_bytes(part: Path, rows: int) -> int:
    """Spark's split size (``spark.sql.files.maxPartitionBytes``) that gives a task of the
    partition ``part`` (``rows`` rows) about :data:`ROWS_PER_TASK` rows, within 1 to 128 MB."""
    size = sum(f.stat().st_size for f in part.glob("*.parquet"))
    low, high = _SPLIT_BYTES
    return max(low, min(high, size * ROWS_PER_TASK // max(rows, 1)))


def _aggregate_dir(store: Path, name: str) -> Path:
    return store / AGGREGATES / name


def ingest_without_spark(inputs: list[str], store: Path,
                         progress: Callable[[str], None] | None = None) -> IngestSummary | None:
    """The same ingest as :func:`ingest`, without a JVM, when the inputs are small and every line
    is a clean record (:mod:`conformance.report.arrow_ingest`); None: use :func:`ingest`."""
    from conformance.report import arrow_ingest

    say = progress or (lambda _m: None)
    t0 = time.perf_counter()
    files = edges.resolve_inputs(inputs)
    rows = arrow_ingest.plan(files, say)
    if rows is None:
        return None
    store.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(store)
    known_runs = {run for ing in manifest["ingests"] for run in ing["runs"]}
    _remove_uncommitted(store, {ing["id"] for ing in manifest["ingests"]})
    per_run: dict[str, int] = {}
    for r in rows:
        per_run[r["run_id"]] = per_run.get(r["run_id"], 0) + 1
    new_runs = {run: n for run, n in per_run.items() if run not in known_runs}
    skipped = sorted(run for run in per_run if run in known_runs)
    if not new_runs:
        say(f"ingest: nothing new ({len(skipped)} run(s) already in the store)")
        return IngestSummary(None, len(files), 0, (), tuple(skipped), 0, time.perf_counter() - t0)
    ingest_id = arrow_ingest.new_ingest_id()
    say(f"ingest: writing {sum(new_runs.values()):,} rows of {len(new_runs)} new run(s) (pyarrow, no JVM)")
    arrow_ingest.write_partition([r for r in rows if r["run_id"] in new_runs],
                                 store / "results" / f"{PARTITION}={ingest_id}")
    _commit(store, manifest, ingest_id, files, new_runs, 0)
    secs = time.perf_counter() - t0
    say(f"ingest: committed {ingest_id} in {secs:.2f}s")
    return IngestSummary(
        ingest_id, len(files), sum(new_runs.values()), tuple(sorted(new_runs)), tuple(skipped), 0, secs
    )


def _display(path: str) -> str:
    return path.removeprefix("file://").removeprefix("file:")


def load_store(spark: SparkSession, store: Path) -> edges.Loaded:
    """The store's committed rows as the pipeline's :class:`~conformance.report.edges.Loaded`."""
    manifest = read_manifest(store)
    committed = [ing["id"] for ing in manifest["ingests"]]
    n_valid = sum(int(ing["rows"]) for ing in manifest["ingests"])
    n_malformed = sum(int(ing["malformed"]) for ing in manifest["ingests"])
    if n_valid == 0:
        raise StoreProblem(f"the store {store} holds no result records (ingest results into it first)")
    results = read_results(spark, store).where(F.col(PARTITION).isin(committed)).select(*RESULTS_COLUMNS)
    if n_malformed:
        malformed = (spark.read.parquet(_uri(store / "malformed"))
                     .where(F.col(PARTITION).isin(committed)).select("file", "line", "reason", "value"))
    else:
        malformed = edges.local_frame(spark, [], MALFORMED_SCHEMA)
    examples = (
        [r.asDict() for r in malformed.orderBy("file", "line").limit(edges.MALFORMED_EXAMPLES).collect()]
        if n_malformed
        else []
    )
    files = [
        {
            "file": (
                f"{store} (store: {len(committed)} ingest(s), "
                f"{sum(len(i['runs']) for i in manifest['ingests'])} runs)"
            ),
            "n_valid": n_valid,
            "n_malformed": n_malformed,
        }
    ]
    return edges.Loaded(parsed=results, results=results, files=files, n_valid=n_valid,
                        n_malformed=n_malformed, malformed=malformed, examples=examples,
                        partials=load_partials(spark, store, manifest))


def load_partials(spark: SparkSession, store: Path, manifest: dict[str, Any]) -> aggregates.Partials:
    """The committed ingests' aggregates, merged: those the store keeps, and those computed from
    the rows of the ingests that have none (or of another version)."""
    with_rows = [ing for ing in manifest["ingests"] if int(ing["rows"])]
    kept = [ing["id"] for ing in with_rows if ing.get("aggregates") == aggregates.VERSION]
    lacking = [ing["id"] for ing in with_rows if ing.get("aggregates") != aggregates.VERSION]
    parts = []
    if kept:
        # Read with the schemas the stages give (an empty aggregate leaves no file to infer one from).
        empty = aggregates.partials_of(_empty(spark, RESULTS_STRUCT))
        parts.append(aggregates.Partials(**{
            name: _read_aggregate(spark, _aggregate_dir(store, name), df.schema, kept)
            for name, df in empty.items()}))
    if lacking:
        rows = read_results(spark, store).where(F.col(PARTITION).isin(lacking)).select(*RESULTS_COLUMNS)
        parts.append(aggregates.partials_of(rows))
    return aggregates.merge(parts)


def _empty(spark: SparkSession, schema: T.StructType) -> DataFrame:
    return edges.local_frame(spark, [], schema)  # not an empty Python RDD: executors run no Python


def _read_aggregate(spark: SparkSession, folder: Path, schema: T.StructType, ingests: list[str]) -> DataFrame:
    if not folder.is_dir():  # every ingest's was empty
        return _empty(spark, schema)
    full = T.StructType([*schema.fields, T.StructField(PARTITION, T.StringType())])
    return spark.read.schema(full).parquet(_uri(folder)).where(F.col(PARTITION).isin(ingests)).drop(PARTITION)


def read_results(spark: SparkSession, store: Path) -> DataFrame:
    """The store's ``results`` dataset with this version's columns: read with the explicit
    schema, so partitions written before a column existed give null there (not an error)."""
    schema = T.StructType([*RESULTS_STRUCT.fields, T.StructField(PARTITION, T.StringType())])
    return spark.read.schema(schema).parquet(_uri(store / "results"))


def union_loaded(parts: list[edges.Loaded]) -> edges.Loaded:
    """Several inputs (stores and/or parsed JSONL files) as one.

    Only a JSONL part holds a persisted frame (``parsed``); a store's frames are plain Parquet
    reads, so closing the union releases what there is to release.
    """
    if len(parts) == 1:
        return parts[0]
    results, malformed = parts[0].results, parts[0].malformed
    for p in parts[1:]:
        results = results.unionByName(p.results)
        malformed = malformed.unionByName(p.malformed)
    workloads = [p.workload for p in parts if p.workload is not None]
    workload = workloads[0] if workloads else None
    for w in workloads[1:]:
        workload = w if workload is None else workload.unionByName(w)
    persisted = next((p.parsed for p in parts if p.parsed is not p.results), parts[0].parsed)
    # Aggregates of every part (those of a store, computed for the files), merged.
    partials = None
    if any(p.partials is not None for p in parts):
        partials = aggregates.merge([p.partials or aggregates.partials_of(p.results) for p in parts])
    return edges.Loaded(
        parsed=persisted,
        results=results,
        files=[f for p in parts for f in p.files],
        n_valid=sum(p.n_valid for p in parts),
        n_malformed=sum(p.n_malformed for p in parts),
        malformed=malformed,
        examples=[e for p in parts for e in p.examples][: edges.MALFORMED_EXAMPLES],
        workload=workload,
        partials=partials,
    )


def load_inputs(spark: SparkSession, files: list[str], stores: list[Path], *,
                in_driver: bool = False) -> edges.Loaded:
    parts = [load_store(spark, s) for s in stores]
    if files:
        parts.append(edges.load_results(spark, files, in_driver=in_driver))
    if not parts:
        raise edges.InputProblem("no results inputs given (pass files, folders, globs or --store DIR)")
    return union_loaded(parts)


# -- the ``ingest`` command -------------------------------------------------------------------


def ingest_main(argv: list[str]) -> int:
    """``amqp-conformance ingest RESULTS… --store DIR [--master URL]``: 0 done, 2 bad input."""
    import sys

    from conformance.report.session import EnvironmentProblem

    p = command_parser("ingest", "Append results runs to a Parquet results store, once per run id.")
    p.add_argument("results", nargs="+", metavar="RESULTS", help="results JSONL files, folders or globs")
    p.add_argument("--store", required=True, type=Path, help="the store folder (created if missing)")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument(
        "--spark",
        action="store_true",
        help="always ingest with Spark (default: small, clean local inputs are written with pyarrow, "
        "without starting a JVM)",
    )
    args = p.parse_args(argv)

    def err(message: str) -> int:
        print(f"amqp-conformance ingest: {message}", file=sys.stderr, flush=True)
        return 2

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    if args.store.exists() and not args.store.is_dir():
        return err(f"--store {args.store} is not a folder")
    if args.store.is_dir() and any(args.store.iterdir()) and not is_store(args.store):
        return err(f"--store {args.store} is a folder with other content, not a results store")
    try:
        edges.resolve_inputs(args.results)  # a typo fails before a JVM starts
        read_manifest(args.store)
        done = None
        if not args.spark and args.master is None:
            done = ingest_without_spark(args.results, args.store, progress=say)
        if done is None:
            say("ingest: starting Spark")
            with spark_session(args.master) as spark:
                done = ingest(spark, args.results, args.store, progress=say)
    except (edges.InputProblem, EnvironmentProblem) as exc:
        return err(str(exc))
    print(
        f"ingest {done.ingest_id or '(nothing new)'}: {done.rows_added:,} rows from "
        f"{len(done.runs_added)} new run(s), "
        f"{len(done.runs_skipped)} run(s) already stored, {done.malformed_added} malformed "
        "line(s) kept aside, "
        f"{done.files} file(s) in {done.seconds:.2f}s → {args.store}"
    )
    return 0
