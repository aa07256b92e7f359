"""The report JVM's class-data-sharing archive: recorded once, mapped after, never in the way."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.report import cds
from conformance.report.session import java_binary


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    monkeypatch.setattr(cds, "_recording", None)
    return tmp_path / "amqp-conformance"


def java() -> str:
    found = java_binary()
    if found is None:
        pytest.skip("no java")
    return found


def test_no_archive_records_one_only_when_asked(cache: Path) -> None:
    assert cds.java_options(java(), record=False) == ""
    opts = cds.java_options(java(), record=True)
    assert opts.startswith(f"-XX:ArchiveClassesAtExit={cache}/spark-")
    assert opts.endswith(cds.QUIET)  # the JVM's CDS warnings would land on stdout
    recording = cds._recording
    assert recording is not None and recording.name.endswith(".tmp") and recording.parent == cache


def test_an_archive_in_place_is_mapped(cache: Path) -> None:
    cds.java_options(java(), record=True)
    recording = cds._recording
    assert recording is not None
    final = recording.with_name(recording.name.split(".jsa.", 1)[0] + ".jsa")
    final.write_bytes(b"x")
    cds._recording = None
    mapped = f"-XX:SharedArchiveFile={final} -Xshare:auto {cds.QUIET}"
    for record in (False, True):
        assert cds.java_options(java(), record=record) == mapped
        assert cds._recording is None


@pytest.mark.parametrize("value", ["0", "off", "false"])
def test_switched_off(cache: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(cds.ENV, value)
    assert cds.java_options(java(), record=True) == ""
    assert not cache.exists()


def test_an_unwritable_cache_means_no_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where a folder must go
    monkeypatch.setattr(cds, "_recording", None)
    assert cds.java_options(java(), record=True) == ""
    assert cds._recording is None


def test_a_stale_recording_is_removed_a_fresh_one_kept(cache: Path) -> None:
    cache.mkdir(parents=True)
    stale = cache / "spark-abc.jsa.1.deadbeef.tmp"
    fresh = cache / "spark-abc.jsa.2.cafef00d.tmp"
    for f in (stale, fresh):
        f.write_bytes(b"x")
    old = time.time() - cds.STALE_TMP_SECONDS - 60
    os.utime(stale, (old, old))
    cds.java_options(java(), record=True)
    assert not stale.exists() and fresh.exists()


def test_finish_without_recording_does_nothing(cache: Path) -> None:
    cds.finish()  # no JVM touched, nothing written
    assert not cache.exists()


def test_a_recording_session_leaves_an_archive_the_next_session_maps(tmp_path: Path) -> None:
    """A real JVM with an empty cache, as the first `report` or `run` starts it (a session that
    records, stopped by stop_session): the archive is in place, no recording is left, and stdout
    carries only what the program printed (no JVM warning about the classes it could not
    archive). Then the next session of the same process maps it: Spark's classes come from it.

    Neither session runs a query: its classes would make the archive larger and the dump (most of
    this test) longer, and prove nothing more (what a session loads is the JVM's to record; the
    session start loads Spark's core classes). The second session's JVM logs where each class
    came from (JDK_JAVA_OPTIONS, read by the java launcher: the session's own options are left
    as the product sets them)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop(cds.ENV, None)
    env.pop("JDK_JAVA_OPTIONS", None)
    loaded = tmp_path / "class-load.log"
    code = (
        "import os\n"
        "from conformance.report.session import build_session, stop_session\n"
        "s = build_session('local[1]', record_cds=True, small_input=True)\n"
        "stop_session(s)\n"
        "print('recorded')\n"
        f"os.environ['JDK_JAVA_OPTIONS'] = '-Xlog:class+load=info:file={loaded}'\n"
        "stop_session(build_session('local[1]', record_cds=True, small_input=True))\n"
        "print('done')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "recorded\ndone\n"
    # The archive, and no recording left (the cache also remembers the passed Java check).
    made = [p for p in (tmp_path / "cache" / "amqp-conformance").iterdir() if p.name.startswith("spark-")]
    assert [p.suffix for p in made] == [".jsa"], made
    assert made[0].stat().st_size > 10_000_000  # Spark's classes, not an empty file
    # Mapped: the JVM's class-loading log (the launcher's own JVM may rotate a first one aside)
    # names the archive's top layer as the source of Spark's classes.
    log = "".join(p.read_text(errors="replace") for p in tmp_path.glob("class-load.log*"))
    assert "org.apache.spark.SparkContext source: shared objects file (top)" in log, log[-2000:]


def test_the_dump_wait_lasts_while_the_jvm_works_and_ends_when_it_stalls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cds, "DUMP_STALL", 3.0)
    archive = tmp_path / "a.jsa.tmp"
    # Works for longer than DUMP_STALL (burns CPU, then writes the file a bit at a time), then exits.
    worker = subprocess.Popen([sys.executable, "-c",
                               "import sys, time\n"
                               "end = time.monotonic() + 4\n"
                               "while time.monotonic() < end: pass\n"
                               "with open(sys.argv[1], 'wb') as f:\n"
                               "    for _ in range(15):\n"
                               "        f.write(b'x' * 1000); f.flush(); time.sleep(0.1)\n", str(archive)])
    try:
        assert cds._wait_dump(worker, archive, poll=0.1) is True
        assert worker.returncode == 0 and archive.stat().st_size == 15_000
    finally:
        worker.kill()
        worker.wait()
    # Neither CPU nor the file moves: given up after DUMP_STALL, the process still running.
    stalled = subprocess.Popen(["sleep", "60"])
    try:
        assert cds._wait_dump(stalled, tmp_path / "never.jsa.tmp", poll=0.1) is False
        assert stalled.poll() is None
    finally:
        stalled.kill()
        stalled.wait()


@pytest.mark.parametrize("master", ["local[2]", "spark://127.0.0.1:7077"])
def test_the_driver_gets_the_archive_and_small_flags_whatever_the_master(cache: Path, master: str) -> None:
    from conformance.report.session import SMALL_INPUT_JVM, _jvm_options

    driver, executor = _jvm_options(java(), master, submitted=False, small_input=True, record_cds=True)
    assert SMALL_INPUT_JVM in driver and "-XX:ArchiveClassesAtExit=" in driver
    # a cluster's executors are JVMs of their own, started for this small input; local mode has none
    assert (SMALL_INPUT_JVM in executor) is (not master.startswith("local"))
    assert "ArchiveClasses" not in executor  # the archive is the driver's classpath, not a worker's


def test_a_large_input_or_spark_submit_keeps_the_jvm_defaults(cache: Path) -> None:
    from conformance.report.session import SMALL_INPUT_JVM, _jvm_options

    cluster = "spark://h:7077"
    driver, executor = _jvm_options(java(), cluster, submitted=False, small_input=False, record_cds=False)
    assert SMALL_INPUT_JVM not in driver and SMALL_INPUT_JVM not in executor
    driver, executor = _jvm_options(java(), cluster, submitted=True, small_input=True, record_cds=True)
    assert driver == executor and driver.startswith("-Dlog4j2.configurationFile=") and " " not in driver


def test_a_cluster_report_shuffles_into_twice_the_cores_unless_configured() -> None:
    from conformance.report.session import cluster_shuffle_partitions

    assert cluster_shuffle_partitions(False, 2) == "4"  # a 2-core worker: as local[2]
    assert cluster_shuffle_partitions(False, 64) == "128"
    assert cluster_shuffle_partitions(False, 0) == "2"
    assert cluster_shuffle_partitions(True, 64) is None  # the cluster's configuration wins
