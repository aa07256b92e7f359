"""Which results files a report reads, decided and checked without Spark (no JVM, no pyspark import).

A typo, an empty file or a file that holds no result record at all fails here, at once, with one
line, before a JVM is paid for.
"""

from __future__ import annotations

import glob
import gzip
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from conformance.model.record_schema import schema_problem
from conformance.model.results import (
    MUTATE_SUMMARY_SUFFIX,
    REQUIRED_FIELDS,
    is_workload_record,
    mutate_results_of,
)
from conformance.model.verdicts import ALL_VERDICTS

MANIFEST = "store.json"  # a results store's manifest (conformance.report.store)
# Files up to this size are read through here when their first line is not a record, to tell a
# file with no record at all (refused here) from one with some malformed lines (Spark reports them).
SCAN_BYTES = 8 * 1024 * 1024
# Up to this many bytes of local JSON lines, an input is "small" (one run, a few hundred to a few
# thousand records): the JVM and the session are set up for fixed costs, not throughput.
SMALL_INPUT_BYTES = 64 * 1024 * 1024
_VERDICTS = frozenset(v.value for v in ALL_VERDICTS)


RESULT_SUFFIXES: tuple[str, ...] = (".jsonl", ".jsonl.gz", ".json")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class InputProblem(ValueError):
    """The inputs cannot be used (nothing matched, not a results file, …); one line to print."""


def resolve_inputs(inputs: Iterable[str]) -> list[str]:
    """Files to read: each input is a file, a folder (its ``*.jsonl`` files, recursively), a glob,
    or a URI Spark reads itself (``hdfs://``, ``s3a://`` … on a cluster)."""
    out: list[str] = []
    given = list(inputs)
    if not given:
        raise InputProblem("no results inputs given (pass files, folders or globs)")
    for item in given:
        if _URI.match(item) and not item.startswith("file://"):
            out.append(item)
            continue
        local = item.removeprefix("file://")
        path = Path(local)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(RESULT_SUFFIXES)
                           and not p.name.endswith(MUTATE_SUMMARY_SUFFIX))
            if not files:
                raise InputProblem(f"no results files (*.jsonl) in folder {item}")
        elif path.is_file() and path.name.endswith(MUTATE_SUMMARY_SUFFIX):
            # A mutate session's summary stands for the records of that session beside it.
            records = mutate_results_of(path)
            if not records.is_file():
                raise InputProblem(
                    f"{item} is a mutate summary, but its results file {records.name} is not beside it"
                )
            files = [records]
        elif path.is_file():
            files = [path]
        elif glob.has_magic(local):
            files = sorted(Path(p) for p in glob.glob(local, recursive=True)
                           if Path(p).is_file() and not p.endswith(MUTATE_SUMMARY_SUFFIX))
            if not files:
                raise InputProblem(f"no results file matches {item}")
        else:
            raise InputProblem(f"no such results file or folder: {item}")
        out.extend(str(p.resolve()) for p in files)
    return list(dict.fromkeys(out))



def is_store(path: str | Path) -> bool:
    return (Path(str(path).removeprefix("file://")) / MANIFEST).is_file()


def split_inputs(inputs: list[str]) -> tuple[list[str], list[Path]]:
    """(results files/folders/globs, stores) from a report's inputs."""
    stores = [Path(i.removeprefix("file://")) for i in inputs if is_store(i)]
    plain = [i for i in inputs if not is_store(i)]
    return plain, stores


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        yield from fh


def record_problem(line: str) -> str | None:
    """Why ``line`` is not a result record (a cheap check of the fields Spark requires), or None."""
    try:
        rec = json.loads(line)
    except ValueError:
        return "not a valid JSON object"
    if not isinstance(rec, dict):
        return "not a valid JSON object"
    if is_workload_record(rec):
        return None  # a faults run's record: the report's cluster section reads it
    missing = [f for f in REQUIRED_FIELDS if rec.get(f) is None]
    if len(missing) == len(REQUIRED_FIELDS):
        return "JSON without any result field"
    if missing:
        return "missing or mistyped field(s): " + ", ".join(missing)
    if rec["verdict"] not in _VERDICTS:
        return f"unknown verdict {rec['verdict']}"
    return schema_problem(rec)  # every other field's type and value, by the shipped JSON Schema


def check_contents(files: Iterable[str]) -> None:
    """Raise InputProblem for a local file that is empty or holds no result record at all.

    Reads one line of each file, or the whole file when it is small and its first record is bad;
    Spark makes the final judgement (and numbers the malformed lines) for the rest.
    """
    for name in files:
        if _URI.match(name):
            continue  # Spark reads it (hdfs://, s3a://): nothing to look at here
        path = Path(name)
        try:
            lines = _lines(path)
            first: tuple[int, str] | None = None
            n = 0
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                problem = record_problem(line)
                if problem is None:
                    break
                if first is None:
                    first = (n, problem)
                    if path.stat().st_size > SCAN_BYTES:
                        break
            else:
                if first is None:
                    raise InputProblem(f"{name} is empty: no result records")
                raise InputProblem(
                    f"{name} is not a results file: none of its {n} lines is a result record "
                    f"(line {first[0]}: {first[1]})"
                )
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputProblem(f"cannot read {name}: {exc}") from exc


def are_small(inputs: list[str]) -> bool:
    """True when ``inputs`` are at most :data:`SMALL_INPUT_BYTES` of local results files, or
    results stores of at most an eighth of that on disk (Parquet: compressed columns); a remote
    URI or an unreadable path is not small."""
    plain, stores = split_inputs(inputs)
    try:
        size = sum(Path(f).stat().st_size for f in resolve_inputs(plain)) if plain else 0
        size += 8 * sum(f.stat().st_size for s in stores for f in s.rglob("*") if f.is_file())
    except (OSError, InputProblem):
        return False
    return size <= SMALL_INPUT_BYTES
