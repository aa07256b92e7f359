"""A class-data-sharing (AppCDS) archive for the report's JVM.

Most of a one-run report is the cold JVM loading and verifying Spark's classes (Catalyst's rules,
the planner, Parquet, Arrow) the first time each is used. Java 17 can dump the classes a JVM loaded
into an archive at exit (``-XX:ArchiveClassesAtExit``) and map them at the next start
(``-XX:SharedArchiveFile``): measured on the report of one run (357 records, 2 cores), session
start plus report 0.68–0.70 of the time without it.

The first report on a machine records the archive: its JVM runs with ``ArchiveClassesAtExit``
pointing at a file of its own, and :func:`finish` (called when that report's session is stopped)
ends the JVM, waits for the dump and moves the file into place atomically — concurrent first
reports each write their own file and the last rename wins. Every later session maps it. The
archive is keyed on the Java binary and PySpark's jars (their names, sizes and times), so a new
JDK or PySpark records a new one; a stale or foreign archive is ignored by the JVM itself
(``-Xshare:auto``), never an error. ``AMQP_CONFORMANCE_SPARK_CDS=0`` turns all of it off.

Only the JVM's class loading changes: the same classes, the same plans, the same tables.
Java 17 has no ``-XX:+AutoCreateSharedArchive`` (that is JDK 19), hence this small module.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
import uuid
from pathlib import Path

ENV = "AMQP_CONFORMANCE_SPARK_CDS"
# The JVM prints a warning per class it cannot archive (hundreds: generated and signed classes) to
# stdout, which carries results: CDS logging is off, whatever happens.
QUIET = "-Xlog:cds*=off -Xlog:class+path=off"
STALE_TMP_SECONDS = 3600.0  # a recording left by a killed JVM is removed after this long
# The JVM's exit with its dump: ≈5 s on 2 cores, over 120 s at load 12–17. The wait ends when the
# JVM exits, when the dump has written nothing for DUMP_STALL seconds, or at DUMP_TIMEOUT.
DUMP_STALL = 60.0
DUMP_TIMEOUT = 900.0

_recording: Path | None = None  # the file this process's JVM dumps into at exit, if any


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "amqp-conformance"


def _key(java: str) -> str | None:
    """A digest of what the archive depends on: the JVM binary and the jars on the classpath."""
    try:
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
        h = hashlib.sha256()
        real = Path(java).resolve()
        st = real.stat()
        h.update(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{pyspark.__version__}\0".encode())
        for jar in sorted(jars.glob("*.jar")):
            js = jar.stat()
            h.update(f"{jar.name}\0{js.st_size}\0{js.st_mtime_ns}\0".encode())
    except (OSError, ImportError):
        return None
    return h.hexdigest()[:20]


def java_options(java: str | None, *, record: bool) -> str:
    """The driver JVM options for class-data sharing ("" when off or not possible).

    With an archive in place: map it. Without one and ``record``: dump one at exit (the caller
    must call :func:`finish` after stopping the session, or the dump is left as a stale file).
    """
    global _recording
    if not enabled() or java is None:
        return ""
    key = _key(java)
    if key is None:
        return ""
    archive = cache_dir() / f"spark-{key}.jsa"
    if archive.is_file():
        return f"-XX:SharedArchiveFile={archive} -Xshare:auto {QUIET}"
    if not record:
        return ""
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(archive.parent)
    except OSError:
        return ""  # no writable cache: no archive, nothing else changes
    _recording = archive.with_name(f"{archive.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    return f"-XX:ArchiveClassesAtExit={_recording} {QUIET}"


def _remove_stale(folder: Path) -> None:
    now = time.time()
    for tmp in folder.glob("spark-*.jsa.*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                tmp.unlink()
        except OSError:
            pass


def _progress(pid: int, tmp: Path) -> tuple[object, ...]:
    """What changes while the recording JVM works towards its exit: its CPU time (Linux: linking
    and copying the classes writes nothing for a while) and the archive file's size and time."""
    state: list[object] = []
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        state.append(int(fields[11]) + int(fields[12]))  # utime + stime, in clock ticks
    except (OSError, IndexError, ValueError):
        state.append(None)
    try:
        st = tmp.stat()
        state.append((st.st_size, st.st_mtime_ns))
    except OSError:
        state.append(None)  # not created yet: the JVM is still shutting Spark down
    return tuple(state)


def _wait_dump(proc: subprocess.Popen[bytes], tmp: Path, poll: float = 1.0) -> bool:
    """Wait for the recording JVM to exit while it makes progress (:func:`_progress`); False once
    it has made none for DUMP_STALL seconds, or DUMP_TIMEOUT has passed."""
    start = last_change = time.monotonic()
    seen = _progress(proc.pid, tmp)
    while True:
        try:
            proc.wait(timeout=poll)
            return True
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        state = _progress(proc.pid, tmp)
        if state != seen:
            seen, last_change = state, now
        if now - last_change > DUMP_STALL or now - start > DUMP_TIMEOUT:
            return False


def finish() -> None:
    """After the session that records an archive is stopped: end its JVM (the dump happens at the
    JVM's exit), then put the archive in place. A no-op when nothing is being recorded."""
    global _recording
    tmp, _recording = _recording, None
    if tmp is None:
        return
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        if gateway is not None:
            gateway.shutdown()
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()  # PySpark's gateway JVM exits (System.exit(0)) on EOF of its stdin
            if not _wait_dump(proc, tmp):
                proc.kill()  # a JVM that does not end is not left behind; its dump is dropped
                proc.wait(timeout=DUMP_STALL)
    except Exception:  # noqa: BLE001 - an archive is an optimisation: never fail the report for it
        tmp.unlink(missing_ok=True)
        return
    finally:
        # The next session in this process starts a new JVM.
        SparkContext._gateway = None
        SparkContext._jvm = None
    final = tmp.with_name(tmp.name.split(".jsa.", 1)[0] + ".jsa")
    try:
        if proc is not None and proc.returncode == 0 and tmp.stat().st_size > 0:
            os.replace(tmp, final)
        else:
            tmp.unlink(missing_ok=True)
    except OSError:
        tmp.unlink(missing_ok=True)
