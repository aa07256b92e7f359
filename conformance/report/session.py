"""The Spark session: Java check first, then a quiet session (local[*] unless told otherwise)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17
DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "4g"  # a quarter of the 24 GiB these machines have; override: SPARK_DRIVER_MEMORY
INSTALL_HINT = (
    "install a Java 17+ runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or "
    "set JAVA_HOME to one"
)

_VERSION_RE = re.compile(r'version "(\d+)(?:\.(\d+))?[^"]*"')

# Errors only, to stderr: progress lines are ours, stdout carries only results.
_LOG4J2 = """\
status = error
# PySpark counts as a REPL: Spark prints "Setting default log level" at startup unless the REPL
# logger (under org.apache.spark) has its own level equal to the root's.
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.sparkproject.name = org.sparkproject
logger.sparkproject.level = error
"""


class EnvironmentProblem(RuntimeError):
    """Something outside the inputs prevents the pipeline from running (e.g. no usable Java)."""


def java_binary() -> str | None:
    """The ``java`` Spark will use: ``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else PATH's."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return str(candidate) if candidate.exists() else None
    return shutil.which("java")


def parse_java_major(version_output: str) -> int | None:
    """The major version from ``java -version`` output (``1.8.0_x`` → 8, ``17.0.15`` → 17)."""
    m = _VERSION_RE.search(version_output)
    if m is None:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2) is not None:
        return int(m.group(2))
    return major


def _checked_mark(java: str) -> Path | None:
    """Where a passed check of this very ``java`` binary is remembered (its path, size, time and
    bytes: a new JDK is a new binary), or None when it cannot be read."""
    from conformance.report import cds

    try:
        real = Path(java).resolve()
        st = real.stat()
        digest = hashlib.sha256(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0".encode() + real.read_bytes())
    except OSError:
        return None
    return cds.cache_dir() / f"java-{digest.hexdigest()[:20]}.ok"


def check_java(java: str | None = None) -> int:
    """Return the Java major version, or raise EnvironmentProblem with one line saying what to do.

    A passed check is remembered (:func:`_checked_mark`): ``java -version`` costs ~0.15 s before
    every report's JVM can start, and the binary it asked cannot change without a new mark.
    """
    java = java if java is not None else java_binary()
    if java is None:
        where = "JAVA_HOME/bin/java" if os.environ.get("JAVA_HOME") else "java on PATH"
        raise EnvironmentProblem(f"Spark needs Java {MIN_JAVA}+ but no {where} was found; {INSTALL_HINT}")
    mark = _checked_mark(java)
    with contextlib.suppress(OSError, ValueError):
        if mark is not None and (known := int(mark.read_text(encoding="ascii"))) >= MIN_JAVA:
            return known
    major = _ask_java(java)  # raises unless it is MIN_JAVA or later
    if mark is not None:
        with contextlib.suppress(OSError):
            mark.parent.mkdir(parents=True, exist_ok=True)
            tmp = mark.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(str(major), encoding="ascii")
            tmp.replace(mark)
    return major


def _ask_java(java: str) -> int:
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run {java} -version ({exc.strerror}); {INSTALL_HINT}") from exc
    except subprocess.TimeoutExpired as exc:
        raise EnvironmentProblem(f"{java} -version did not answer in 60s; {INSTALL_HINT}") from exc
    major = parse_java_major(proc.stderr + proc.stdout)
    if proc.returncode != 0 or major is None:
        raise EnvironmentProblem(f"{java} -version failed or printed no version; {INSTALL_HINT}")
    if major < MIN_JAVA:
        raise EnvironmentProblem(f"Spark needs Java {MIN_JAVA}+ but {java} is Java {major}; {INSTALL_HINT}")
    return major


def resolve_master(master: str | None) -> str | None:
    """The master a session built for ``master`` gets; None under spark-submit with no master
    named (spark-submit's own ``--master`` then holds)."""
    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:
        return None
    return master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER


def is_local(master: str) -> bool:
    return master.startswith("local")


def local_cores(master: str) -> int:
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if master == "local":
        return 1
    if m is None or m.group(1) == "*":
        return os.cpu_count() or 2
    return int(m.group(1))


def _log_config() -> Path:
    path = Path(tempfile.gettempdir()) / f"amqp-conformance-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text(encoding="utf-8") != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2, encoding="utf-8")
        tmp.replace(path)
    return path


# A local JVM for a small input (one run's report): the client compiler only and the serial
# collector. A few hundred rows never run hot enough for C2 to pay off, while its compile threads
# (and G1's) cost CPU the two cores need for the report itself: measured on one run's report (357
# records), JVM CPU 82 s → 41 s, wall 89 s → 58 s at load 9. Large inputs keep the JVM's defaults.
SMALL_INPUT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _launch_warming_extensions(opts: dict[str, str]) -> None:
    """Launch the local JVM as ``getOrCreate`` would (the same ``--conf``), then, in a background
    thread, load the session extensions found on the classpath while the SparkContext is built.

    PySpark's jars include MLlib, which registers a session extension (``META-INF/services``)
    whose first load starts Scala's runtime reflection: ~1 s of CPU that a new SparkSession
    otherwise waits for after the SparkContext, alone on one core. Loaded beside the context,
    the session finds it done. Only the order of class loading changes; a failure here is left
    for the session's own load to meet.
    """
    from pyspark import SparkConf, SparkContext

    if SparkContext._gateway is not None:
        return
    SparkContext._ensure_initialized(conf=SparkConf(loadDefaults=False).setAll(list(opts.items())))
    jvm = SparkContext._jvm
    assert jvm is not None

    def load() -> None:
        with contextlib.suppress(Exception):
            provider = jvm.java.lang.Class.forName("org.apache.spark.sql.SparkSessionExtensionsProvider")
            found = jvm.java.util.ServiceLoader.load(provider).iterator()
            while found.hasNext():
                found.next()

    threading.Thread(target=load, name="spark-extensions", daemon=True).start()


def _jvm_options(java: str | None, master: str, *, submitted: bool, small_input: bool,
                 record_cds: bool) -> tuple[str, str]:
    """The driver's and the executors' extra JVM options.

    The driver is this process's JVM whatever the master (unless spark-submit started it): the
    class-data-sharing archive (:mod:`cds`) and, for a small input, :data:`SMALL_INPUT_JVM` apply
    to it on a cluster too; before, only on ``local[*]``, and a cluster's driver started cold
    (12-19 s of a one-run report's 56 s there, against 2-4 s local). A cluster's executors are new
    JVMs for each application, and for a small input they never run hot enough for C2 either."""
    log_opts = f"-Dlog4j2.configurationFile=file:{_log_config()}"
    if submitted:
        return log_opts, log_opts
    from conformance.report import cds

    small = SMALL_INPUT_JVM if small_input else ""
    driver = " ".join(o for o in (log_opts, small, cds.java_options(java, record=record_cds)) if o)
    executor = f"{log_opts} {small}" if small and not is_local(master) else log_opts
    return driver, executor


def build_session(master: str | None = None, app_name: str = "amqp-conformance-report", *,
                  record_cds: bool = False, small_input: bool = False,
                  launching: threading.Event | None = None) -> SparkSession:
    """A new (or the already active) SparkSession, configured quiet and small for local mode.

    The driver maps the class-data-sharing archive when there is one (:mod:`cds`, any master);
    ``record_cds``: without one, this session's JVM records it (the caller stops the session
    with :func:`stop_session`, which puts the archive in place). ``small_input``: the JVM is
    started for a small input (:data:`SMALL_INPUT_JVM`). ``launching``: set when the JVM is
    about to be launched (this thread's Python work before it is done).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    java = java_binary()
    check_java(java)
    if not os.environ.get("SPARK_HOME"):
        # What PySpark launches its JVM from. Unset, its spark-submit script starts a Python
        # interpreter just to find it (~0.15 s before the JVM, more through a version shim).
        from pyspark.find_spark_home import _find_spark_home

        os.environ["SPARK_HOME"] = _find_spark_home()
    # Under spark-submit the JVM is already up with spark-submit's --master and settings: keep
    # them unless a master is named here.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ and master is None
    master = resolve_master(master) or DEFAULT_MASTER
    driver_opts, executor_opts = _jvm_options(java, master, submitted=submitted, small_input=small_input,
                                              record_cds=record_cds)
    opts: dict[str, str] = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # PySpark records the Python call site of every column function for error messages:
        # several calls into the JVM each, thousands per report (its own docs call it a
        # slowdown). Errors still name the failing expression.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        "spark.driver.extraJavaOptions": driver_opts,
        "spark.executor.extraJavaOptions": executor_opts,
        # Tuned for the small inputs of one run (a few hundred rows) without hurting large ones:
        # adaptive plans coalesce tiny shuffles and turn small joins into broadcasts; no Hive
        # catalogue to initialise; the v2 committer moves each task's files once, not twice.
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.sql.autoBroadcastJoinThreshold": str(32 * 1024 * 1024),
        "spark.sql.catalogImplementation": "in-memory",
        "spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version": "2",
        "spark.sql.sources.partitionOverwriteMode": "static",
    }
    if not submitted:
        opts["spark.master"] = master
        if "SPARK_DRIVER_MEMORY" in os.environ:  # the driver is this process's JVM, whatever the master
            opts["spark.driver.memory"] = os.environ["SPARK_DRIVER_MEMORY"]
    if not submitted and not is_local(master):
        if small_input:
            # One run's tiny tasks on a cluster: no wait for a data-local slot (spark.locality.wait,
            # 3 s by default); any executor runs them as fast. Its shuffles are one partition each
            # (pipeline.SMALL_INPUT_CONF), whatever the master.
            opts["spark.locality.wait"] = "0"
        if launching is not None:
            launching.set()
        _launch_warming_extensions(opts)
    if is_local(master) and not submitted:
        cores = local_cores(master)
        opts["spark.driver.memory"] = os.environ.get("SPARK_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY)
        opts["spark.sql.shuffle.partitions"] = opts["spark.default.parallelism"] = str(max(2, 2 * cores))
        if not os.environ.get("SPARK_LOCAL_IP"):
            # Local mode talks to itself only: loopback, not the host's address (which may not
            # answer, or answer late, and leaves a port open to the network).
            opts["spark.driver.bindAddress"] = opts["spark.driver.host"] = "127.0.0.1"
        if launching is not None:
            launching.set()
        _launch_warming_extensions(opts)
    if launching is not None:
        launching.set()
    builder = SparkSession.builder.config(map=dict(opts))
    # The JVM's own chatter ("Using Spark's default log4j profile", native-hadoop warnings) goes
    # to stderr before our log config applies; PySpark's gateway keeps stdout clean.
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _size_cluster_shuffles(spark, master, submitted=submitted)
    return spark


def _size_cluster_shuffles(spark: SparkSession, master: str, *, submitted: bool) -> None:
    """On a cluster this process configured (not under spark-submit), :func:`cluster_shuffle_partitions`."""
    if submitted or is_local(master):
        return
    context = spark.sparkContext
    partitions = cluster_shuffle_partitions(context.getConf().contains("spark.sql.shuffle.partitions"),
                                            context.defaultParallelism)
    if partitions is not None:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)


def cluster_shuffle_partitions(configured: bool, parallelism: int) -> str | None:
    """The shuffle partitions of a report on a cluster: twice the executors' cores when the session
    starts (Spark's ``defaultParallelism``: the cores of the executors registered by then, at least
    2), the rule ``local[N]`` has (2 × N); None when the Spark configuration names its own.

    Spark's default is 200 whatever the cluster. The report's shuffles are small (a store's partial
    aggregates, the tables' joins: 3.6 MB in all for a 10M-row store) and it runs ~150 jobs, each
    of whose shuffles then wrote and read 200 partitions: the 10M-row store's report took 124.9 s on
    a 2-core standalone cluster against 44.1 s on ``local[*]``; with this rule 58.9 s against 44.8 s
    (2026-12-02, median of 3 each). A big cluster's users set ``spark.sql.shuffle.partitions`` in its
    configuration, which is kept."""
    if configured:
        return None
    return str(max(2, 2 * parallelism))


@contextmanager
def spark_session(master: str | None = None) -> Iterator[SparkSession]:
    """A session for one command (large inputs: a small one's report starts an
    :class:`EarlySession`); stopped at the end only if this call started it."""
    from pyspark.sql import SparkSession

    existed = SparkSession.getActiveSession() is not None
    spark = build_session(master, record_cds=not existed)
    try:
        yield spark
    finally:
        if not existed:
            stop_session(spark)


def stop_session(spark: SparkSession) -> None:
    """Stop a session this command started; if its JVM records the class-data-sharing archive,
    end the JVM and put the archive in place."""
    from conformance.report import cds

    spark.stop()
    cds.finish()


class EarlySession:
    """A SparkSession being started in a background thread, so the JVM's start-up overlaps other
    work (``run`` starts one while the suite runs; the report then costs only its compute).

    ``get()`` waits for it and returns it, or raises what starting it raised
    (:class:`EnvironmentProblem` for a missing Java); ``stop()`` stops it if it started.
    """

    def __init__(self, master: str | None = None, *, small_input: bool = True) -> None:
        self._master = master
        self._small_input = small_input
        # What the session's master will be (None: spark-submit's), known before it starts.
        self.master = resolve_master(master)
        self._spark: SparkSession | None = None
        self._error: BaseException | None = None
        self._stop_lock = threading.Lock()
        # Set once the JVM is being launched (or starting failed): Python work done before then
        # (imports, parsing) competes for the interpreter with what leads to the launch.
        self.launching = threading.Event()
        self._stopper: threading.Thread | None = None
        self._stop_error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="spark-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            self._spark = build_session(self._master, record_cds=True, small_input=self._small_input,
                                        launching=self.launching)
        except BaseException as exc:  # handed to whoever calls get()  # noqa: BLE001
            self._error = exc
        finally:
            self.launching.set()

    def get(self, timeout: float | None = None) -> SparkSession:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise EnvironmentProblem(f"Spark did not start within {timeout:.0f}s")
        if self._error is not None:
            raise self._error
        assert self._spark is not None
        return self._spark

    def stop(self, *, wait: bool = True) -> None:
        """Stop the session (waiting for it to finish starting first); safe to call again and from
        several threads. ``wait=False``: stop it in a background thread, so that the caller's next
        work (a report's page, once Spark's part is done) overlaps Spark's stop and the JVM's exit;
        a later ``stop()`` waits for that stop and raises what it raised."""
        with self._stop_lock:
            if self._stopper is None:
                self._stopper = threading.Thread(target=self._stop, name="spark-stop", daemon=True)
                self._stopper.start()
        if wait:
            self._stopper.join()
            if self._stop_error is not None:
                error, self._stop_error = self._stop_error, None
                raise error

    def _stop(self) -> None:
        self._thread.join()
        try:
            if self._spark is not None:
                stop_session(self._spark)
        except BaseException as exc:  # handed to the stop() that waits  # noqa: BLE001
            self._stop_error = exc


def start_session_early(master: str | None = None) -> EarlySession:
    """Start a SparkSession in the background now; pass the handle to ``build_report(session=…)``."""
    return EarlySession(master)
